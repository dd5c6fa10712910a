"""``Warehouse.scan(table, days=...)``: a run's scans read its day partition only.

Per-run commands (``export``, ``flame``, ``Warehouse.frame``) read one run; reading every
file of a table made them grow with the warehouse's history (``export`` of one run: 1.9 s
at 300 runs, 8.0 s at 3,000). A file of another day is never opened: a damaged one there
does not matter.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from tracewh.analysis.frames import FRAMES
from tracewh.api import Warehouse
from tracewh.report.export import export_trace
from tracewh.report.flame import write_flame

FRAME = sorted(FRAMES)[0]


def _day_files(wh: Warehouse, table: str, day: dt.date) -> list[Path]:
    return sorted((Path(wh.root) / "tables" / table / f"day={day.isoformat()}").glob("*.parquet"))


def test_days_keep_only_those_partitions(two_days: Warehouse) -> None:
    runs = two_days.runs().sort("day")
    (first, day1), (second, day2) = runs.select("run_id", "day").rows()
    assert day1 != day2
    whole = two_days.scan("gpu_ops").collect()
    one = two_days.scan("gpu_ops", days={day1}).collect()
    assert set(whole["run_id"]) == {first, second} and set(one["run_id"]) == {first}
    assert one.sort("event_index").equals(
        whole.filter(pl.col("run_id") == first).sort("event_index"))
    # a table that is not a run child (runs) is read whole whatever the days
    assert two_days.scan("runs", days={day1}).collect().height == 2
    assert two_days.scan("gpu_ops", days=set()).collect().height == 0


def test_other_days_files_are_never_opened(two_days: Warehouse, tmp_path: Path) -> None:
    """A damaged file of the other day breaks a whole scan, not one of this day; the per-run
    commands built on it (export, flame, frame) work on the undamaged day."""
    import shutil

    wh = Warehouse(shutil.copytree(two_days.root, tmp_path / "wh"))
    (first, day1), (_, day2) = wh.runs().sort("day").select("run_id", "day").rows()
    for table in ("gpu_ops", "events", "instants", "threads", "flows", "steps"):
        for f in _day_files(wh, table, day2):
            f.write_bytes(b"not parquet")
    with pytest.raises(Exception):  # noqa: B017 (Polars' own error for a bad Parquet file)
        wh.scan("gpu_ops").collect()
    assert wh.scan("gpu_ops", days={day1}).collect().height > 0
    assert wh.frame(FRAME, first).collect().height > 0
    out = export_trace(wh, first, tmp_path / "one.json.gz")
    assert out.events > 0
    with gzip.open(tmp_path / "one.json.gz", "rt") as fh:
        assert json.load(fh)["traceEvents"]
    assert write_flame(wh, first, tmp_path / "one.folded").stat().st_size > 0
