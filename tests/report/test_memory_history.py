"""Peak allocated memory per step as a `changes` / `check` metric ("memory went up 20%")."""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Collection, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest
from fixtures import warehouse
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.cli.changes_cmds import report_text
from tracewh.history.alerts import changes
from tracewh.history.check import check
from tracewh.query.runsel import RunRef
from tracewh.report.sections import history_sections
from tracewh.report.source import collect_history
from tracewh.synth import SynthConfig, write_trace

START = dt.date(2025, 1, 1)
BASE = 6_000_000_000  # bytes held before the trace


class FakeSource:
    """A Source over one DuckDB connection (as tests/history/test_alerts.py)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con

    def sql(self, query: str, params: Sequence[Any] | Mapping[str, Any] | None = None, *,
            days: Collection[date] | None = None, since: date | None = None) -> pl.DataFrame:  # fmt: skip
        return self.con.sql(query, params=params).pl()

    def resolve_run(self, selector: str = "latest") -> RunRef:
        df = self.con.sql("SELECT run_id, day, job, rank FROM runs ORDER BY start_ns DESC, rank").pl()
        row = df.row(0, named=True)
        return RunRef(row["run_id"], row["day"], row["job"], row["rank"])

    def run_table(self, **_: object) -> pl.DataFrame:
        df = self.con.sql("SELECT * EXCLUDE (metadata_json) FROM runs").pl()
        return df.with_columns(pl.Series("minhash", [None] * df.height, dtype=pl.List(pl.Int64)))


def _nights(n: int, *, shift: tuple[int, float] | None, jitter: int, seed: int) -> FakeSource:
    """``n`` nights, 3 steps each; every step allocates a block and frees it. Its size is
    1 GB times (1 + shift) from night ``shift[0]`` on, plus up to ``jitter`` bytes of noise."""
    rng = random.Random(seed)
    runs, steps, inst, ops = [], [], [], []
    for night in range(n):
        day = START + dt.timedelta(days=night)
        rid = f"n{night:03d}"
        t0 = (night * 86400 + 7200) * 10**9
        runs.append({"run_id": rid, "ingest_id": "i", "day": day, "start_ns": t0, "end_ns": t0 + 10**8,
                     "rank": 0, "world_size": 1, "device_name": "GPU", "backend": "cuda",
                     "job": f"/traces/{day}", "labels_json": json.dumps({"model": "m", "commit": f"c{night}"})})  # fmt: skip
        size = int(1e9 * (1 + (shift[1] if shift and night >= shift[0] else 0.0)))
        total, i = BASE, 0
        for step in range(3):
            ts = t0 + step * 10**7
            steps.append({"run_id": rid, "ingest_id": "i", "day": day, "step": step, "ts_ns": ts, "dur_ns": 10**7})
            ops.append({"run_id": rid, "ingest_id": "i", "day": day, "cat": "kernel", "op_kind": "kernel",
                        "name": "k", "short_name": "k", "category": "gemm", "device": 0, "stream": 7,
                        "ts_ns": ts, "dur_ns": 10**6, "step": step})  # fmt: skip
            nbytes = size + rng.randrange(jitter + 1)
            for dt_ns, b in ((100, nbytes), (5_000_000, -nbytes)):
                total += b
                inst.append({"run_id": rid, "ingest_id": "i", "day": day, "event_index": i, "ph": "i",
                             "name": "[memory]", "pid": 1, "tid": 1, "ts_ns": ts + dt_ns, "bytes": b,
                             "addr": 0x1000, "total_allocated": total, "total_reserved": 2 * BASE,
                             "device_type": 1, "device_id": 0})  # fmt: skip
                i += 1
    return FakeSource(warehouse(runs=runs, steps=steps, instants=inst, gpu_ops=ops))


def _memory(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["metric"] == "memory"]


def test_a_20_percent_rise_is_found_on_its_night_and_checked() -> None:
    src = _nights(30, shift=(12, 0.2), jitter=200_000, seed=1)
    rep = changes(src, since=None, min_ms=0.0)
    (r,) = _memory(rep.to_dicts())
    assert (r["key"], r["unit"], r["day"]) == ("peak_allocated_gpu", "bytes", "2025-01-13")
    assert r["before"] == pytest.approx(BASE + 1e9, rel=1e-3)
    assert r["after"] == pytest.approx(BASE + 1.2e9, rel=1e-3)
    assert r["change_pct"] == pytest.approx(100 * 0.2e9 / (BASE + 1e9), rel=0.01)
    text = report_text(rep)
    assert "GPU peak allocated per step: 7.000 GB -> 7.200 GB" in text
    chk = check(src, "latest", threshold=0.02)
    (f,) = [f for f in chk.regressions if f.metric_kind == "memory"]
    assert f.metric == "peak_allocated_gpu" and f.since_day == START + dt.timedelta(days=12)
    assert f.to_dict()["unit"] == "bytes" and f.since_commit == "c12"


def test_allocator_jitter_alone_is_no_change() -> None:
    # up to 0.9 MiB of run-to-run jitter, and one 0.5 MiB step: both under the 1 MiB floor
    src = _nights(30, shift=(15, 0.0005), jitter=900_000, seed=2)
    assert _memory(changes(src, since=None, min_ms=0.0).to_dicts()) == []
    assert not [f for f in check(src, "latest", threshold=0.0001).regressions if f.metric_kind == "memory"]


def test_synthetic_nights_with_a_leak_from_night_4(tmp_path: Path) -> None:
    for night in range(8):
        day = START + dt.timedelta(days=night)
        folder = tmp_path / "traces" / day.isoformat()
        leak = 50_000_000 if night >= 4 else 0
        write_trace(folder / "rank-0.pt.trace.json.gz",
                    SynthConfig(steps=3, layers=1, seed=5, night=day, leak_bytes=leak, noise=0.0))
        (folder / "run.json").write_text(json.dumps({"model": "leaky", "commit": f"c{night}"}))
    wh = Warehouse(tmp_path / "wh")
    assert all(r.outcome == "ingested" for r in wh.ingest([tmp_path / "traces"]).results)
    rows = _memory(wh.changes(since=None).to_dicts())
    assert [(r["key"], r["day"]) for r in rows] == [("peak_allocated_gpu", "2025-01-05")]
    # 3 steps: the third step's peak holds the two earlier leaks of 50 MB
    assert rows[0]["after"] - rows[0]["before"] == pytest.approx(2 * 50_000_000, abs=1)
    result = CliRunner().invoke(app, ["changes", "-w", str(tmp_path / "wh"), "--since", "2024-12-01"])
    assert result.exit_code == 0, result.output
    assert "GPU peak allocated per step" in result.output
    # the report's history draws the series with its change point
    trends = collect_history(wh, since="2024-12-01", run="latest")
    assert trends is not None
    (mem,) = [t for t in trends if t.unit == "mb"]
    values = mem.frame.sort("time")["value_ns"].to_list()  # bytes, drawn in MB
    assert len(values) == 8 and values[4] - values[3] == pytest.approx(100_000_000, abs=1)
    assert mem.marks is not None and mem.marks["label"].to_list() == [f"group {rows[0]['group']}: +4%"]
    (sec,) = [s for s in history_sections(trends) if s.title == mem.title]
    assert sec.chart is not None and "MB" in sec.tables[0].frame.columns[3]
