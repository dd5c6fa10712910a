"""The critical path's shares by bound as history series (issue 31: `changes` over
critical-path shares; computed on demand, tracewh.history.cpseries).

Six synthetic nights (one rank, 2 steps each); from the 4th night on flash attention runs
3x longer, which moves the critical path of every step towards GPU compute (measured: GPU
compute ~75% -> ~82% of the path, CPU-bound ~13% -> ~9%). Expected values come from the
per-step paths `tracewh critical-path --by step --format json` prints, summed here.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from tracewh.analysis.critical_path import BOUNDS
from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.core.errors import UsageError
from tracewh.history.cpseries import critical_path_series, critical_path_values
from tracewh.synth import Regression, SynthConfig, write_history

START = dt.date(2025, 1, 1)
NIGHTS = 6
SHIFT = START + dt.timedelta(days=3)


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("cpseries")
    write_history(base / "traces", SynthConfig(steps=2, layers=1, model="demo", seed=3),
                  runs=NIGHTS, start=START, regressions=[Regression("flash_fwd", 2.0, SHIFT)])
    assert Warehouse(base / "wh").ingest([base / "traces"], jobs=1).ok
    return base / "wh"


def _cli(*args: str) -> str:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code in (0, 1), res.output
    return res.stdout


def test_values_are_the_steps_shares_of_the_path(nights: Path) -> None:
    wh = Warehouse(nights)
    runs = wh.runs().sort("start_ns")
    first, last = runs["run_id"][0], runs["run_id"][-1]
    got = critical_path_values(wh, [first, last])
    assert set(got["metric"]) == {"critical_path"} and got.height == 2 * len(BOUNDS)
    for rid in (first, last):
        steps = json.loads(_cli("critical-path", rid, "-w", str(nights), "--by", "step",
                                "--format", "json"))
        total = sum(s["total_ns"] for s in steps)
        mine = got.filter(pl.col("run_id") == rid)
        for b in BOUNDS:
            row = mine.filter(pl.col("key") == b).row(0, named=True)
            assert row["value"] == pytest.approx(sum(s[f"{b}_ns"] for s in steps) / total, abs=1e-12)
            assert row["n_steps"] == len(steps) == 2
            shares = [s[f"{b}_ns"] / s["total_ns"] for s in steps]
            assert row["step_sd"] == pytest.approx(pl.Series(shares).std(), abs=1e-12)
        assert sum(mine["value"]) == pytest.approx(1.0)  # every ns of the paths has a bound
    wide = critical_path_series(wh, runs)
    assert wide["run_id"].to_list() == runs["run_id"].to_list()
    assert wide.filter(pl.col("run_id") == last)["gpu_compute_bound_share"][0] == pytest.approx(
        got.filter((pl.col("run_id") == last) & (pl.col("key") == "gpu_compute_bound"))["value"][0])


def test_changes_and_check_see_the_shift(nights: Path) -> None:
    wh = Warehouse(nights)
    report = wh.changes(since=None, critical_path=True, min_ms=0.0)
    rows = {r["key"]: r for r in report.to_dicts()}
    assert {r["metric"] for r in report.to_dicts()} == {"critical_path"}
    gpu = rows["gpu_compute_bound"]
    assert gpu["day"] == SHIFT.isoformat() and gpu["after"] > gpu["before"] + 0.02
    assert gpu["unit"] == "fraction" and 0 < gpu["before"] < 1
    assert rows["cpu_bound"]["after"] < rows["cpu_bound"]["before"]
    text = _cli("changes", "-w", str(nights), "--since", "all", "--critical-path")
    assert "critical-path share gpu_compute_bound" in text
    checked = wh.check(critical_path=True)
    cp = [f for f in (*checked.regressions, *checked.improvements) if f.metric_kind == "critical_path"]
    assert cp and all(f.since_day == SHIFT for f in cp)
    # the CPU-bound share fell: not a regression of the path (a rising one would be)
    assert all(f.status == "improvement" for f in cp if f.metric == "cpu_bound")
    with pytest.raises(UsageError, match="--critical-path"):
        wh.changes(critical_path=True, kernel="flash")


def test_history_critical_path_rows(nights: Path) -> None:
    rows = json.loads(_cli("history", "-w", str(nights), "--critical-path", "--since", "2d",
                           "--format", "json"))
    assert [r["day"] for r in rows] == ["2025-01-04", "2025-01-05", "2025-01-06"]
    for r in rows:
        assert sum(r[f"{b}_share"] for b in BOUNDS) == pytest.approx(1.0)
        assert r["n_steps"] == 2
