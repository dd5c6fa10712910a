"""The run_series table: written at ingest with the runs (before their runs rows), equal to
the values computed from the tables, read by changes/history; `tracewh migrate` stores the
rows of an older warehouse once, idempotently, and finishes after a kill -9."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.ingest.batch import ingest_paths
from tracewh.ingest.options import IngestOptions
from tracewh.synth import Regression, SynthConfig, write_history

KEYS = ["run_id", "metric", "key"]
NIGHTS = 8


def _history(root: Path) -> Path:
    """8 nights x 2 ranks, flash_fwd 40% slower from night 5 (index 4)."""
    import datetime as dt

    write_history(root, SynthConfig(steps=3, layers=2, ranks=2, seed=5), runs=NIGHTS,
                  start=dt.date(2025, 1, 1),
                  regressions=[Regression("flash_fwd", 0.40, dt.date(2025, 1, 5))])  # fmt: skip
    return root


def _stored(wh: Warehouse) -> pl.DataFrame:
    return wh.sql("SELECT * EXCLUDE (ingest_id, day) FROM run_series").sort(KEYS)


def _old(tmp_path: Path, traces: Path, name: str = "old") -> Warehouse:
    """A warehouse as a tracewh before run_series wrote it: the same runs, no series rows."""
    root = tmp_path / name
    report = ingest_paths(Warehouse(root).store, [traces], IngestOptions(), jobs=1)
    assert report.ok and len(report.ingested) == 2 * NIGHTS
    assert Warehouse(root).sql("SELECT count(*) AS n FROM run_series")["n"][0] == 0
    return Warehouse(root)


def test_ingest_stores_every_runs_series_equal_to_its_tables(tmp_path: Path) -> None:
    traces = _history(tmp_path / "t")
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([traces], jobs=1).ok
    stored = _stored(wh)
    runs = wh.sql("SELECT run_id, rows_json FROM runs")
    assert set(stored["run_id"]) == set(runs["run_id"]) and runs.height == 2 * NIGHTS
    # each run recorded its row count (verify checks it)
    counts = stored.group_by("run_id").len()
    recorded = {r: json.loads(j)["run_series"] for r, j in runs.iter_rows()}
    assert dict(counts.iter_rows()) == recorded
    assert wh.verify().ok
    # independent of the SQL: step time and each op name's time per step, from the tables
    steps = wh.sql("SELECT run_id, step, ts_ns, dur_ns FROM steps").group_by("run_id", "step").agg(
        wall=(pl.col("ts_ns") + pl.col("dur_ns")).max() - pl.col("ts_ns").min())
    step_ns = steps.group_by("run_id").agg(pl.col("wall").mean(), n=pl.len())
    got = stored.filter(pl.col("metric") == "step").join(step_ns, on="run_id")
    assert got.height == 2 * NIGHTS
    assert (got["value"] - got["wall"]).abs().max() < 1e-6  # type: ignore[operator]
    ops = wh.sql("SELECT run_id, name, dur_ns FROM gpu_ops WHERE dur_ns IS NOT NULL").group_by(
        "run_id", "name").agg(calls=pl.len(), total=pl.col("dur_ns").sum())  # fmt: skip
    op_rows = stored.filter(pl.col("metric") == "op").join(
        ops, left_on=["run_id", "key"], right_on=["run_id", "name"], how="full")
    assert op_rows["calls_right"].to_list() == op_rows["calls"].to_list()
    assert (op_rows["total"] - op_rows["total_ns"]).abs().max() == 0  # type: ignore[operator]
    # the stored rows read back as the computation from the tables of an older warehouse
    old = _old(tmp_path, traces)
    assert_frame_equal(wh.sql("SELECT * FROM series_values()").sort(KEYS),
                       old.sql("SELECT * FROM series_values()").sort(KEYS))  # fmt: skip


def test_changes_and_history_read_the_stored_series(tmp_path: Path) -> None:
    traces = _history(tmp_path / "t")
    new = Warehouse(tmp_path / "wh")
    assert new.ingest([traces], jobs=1).ok
    old = _old(tmp_path, traces)
    a, b = (w.changes(since=None).changes.drop("group_rank") for w in (new, old))
    assert_frame_equal(a.sort(["run_id", "metric", "key"]), b.sort(["run_id", "metric", "key"]))
    assert "flash_fwd" in " ".join(a["name"].to_list())
    for kw in ({"kernel": "flash_fwd"}, {"category": "gemm"}, {}):
        assert_frame_equal(new.history(**kw), old.history(**kw))


def test_migrate_stores_an_old_warehouse_once(tmp_path: Path) -> None:
    traces = _history(tmp_path / "t")
    old = _old(tmp_path, traces)
    before = old.sql("SELECT * FROM series_values()").sort(KEYS)
    res = CliRunner().invoke(app, ["migrate", "-w", str(old.root), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["series_runs"] == 2 * NIGHTS
    assert json.loads(res.output)["files_after"] == 1
    assert_frame_equal(old.sql("SELECT * FROM series_values()").sort(KEYS), before)
    stored = _stored(old)
    again = CliRunner().invoke(app, ["migrate", "-w", str(old.root)])
    assert again.exit_code == 0 and "series of 0 run(s)" in again.output
    assert_frame_equal(_stored(old), stored)
    assert old.verify().ok
    # a run ingested after the upgrade mixes in
    fresh = Warehouse(tmp_path / "fresh")
    assert fresh.ingest([traces], jobs=1).ok
    assert_frame_equal(stored, _stored(fresh))


_KILLER = """
import os, signal, sys
from tracewh.api import Warehouse
from tracewh.ingest import backfill
real = backfill.add_rows
def once(*a, **k):
    n = real(*a, **k)
    os.kill(os.getpid(), signal.SIGKILL)  # right after the first chunk's commit
    return n
backfill.add_rows = once
Warehouse(sys.argv[1]).migrate(batch=4)
"""


@pytest.mark.slow
def test_migrate_killed_midway_finishes_on_the_next_run(tmp_path: Path) -> None:
    traces = _history(tmp_path / "t")
    old = _old(tmp_path, traces)
    proc = subprocess.run([sys.executable, "-c", _KILLER, str(old.root)], check=False,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})  # fmt: skip
    assert proc.returncode == -signal.SIGKILL
    partial = old.sql("SELECT count(DISTINCT run_id) AS n FROM run_series")["n"][0]
    assert 0 < partial < 2 * NIGHTS
    assert old.verify().ok  # a partly migrated warehouse is consistent
    res = old.migrate(batch=4)
    assert res.series_runs == 2 * NIGHTS - partial
    fresh = Warehouse(tmp_path / "fresh")
    assert fresh.ingest([traces], jobs=1).ok
    assert_frame_equal(_stored(old), _stored(fresh))
    shutil.rmtree(tmp_path / "t")
