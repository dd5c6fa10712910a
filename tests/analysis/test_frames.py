"""Warehouse.frame: the Polars definitions of per-run analyses agree with their SQL macros."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tracewh.api import Warehouse
from tracewh.core.errors import UsageError
from tracewh.synth import SynthConfig, write_trace


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    folder = tmp_path_factory.mktemp("frames")
    w = Warehouse(folder / "wh")
    for i in range(2):  # two runs: each frame must keep to its own run
        path = folder / f"n{i}.pt.trace.json.gz"
        write_trace(path, SynthConfig(steps=2, layers=2, seed=3 + i, night=dt.date(2025, 1, 1 + i)))
        assert w.ingest([path]).ok
    return w


@pytest.mark.parametrize(("name", "options"), [
    ("kernel_ranking", {}),
    ("kernel_ranking", {"group_by": "category", "order_by": "calls"}),
    ("kernel_ranking", {"cats": ["kernel"]}),
    ("stream_gaps", {}),
    ("stream_gaps", {"kernel_wait_threshold_ns": 5}),
    ("idle_breakdown", {}),
    ("launch_latency_by_kernel", {}),
])
def test_a_frame_equals_its_sql_macro(wh: Warehouse, name: str, options: dict[str, object]) -> None:
    for run in ("latest", wh.runs()["run_id"][1]):
        lazy = wh.frame(name, run, **options)
        assert isinstance(lazy, pl.LazyFrame)
        got = lazy.collect()
        assert got.height > 0
        assert_frame_equal(wh.macro(name, run, **options), got, check_dtypes=False)


def test_launch_latency_matches_row_for_row(wh: Warehouse) -> None:
    sql = wh.macro("launch_latency").sort("event_index")
    assert_frame_equal(sql, wh.frame("launch_latency").collect().sort("event_index"),
                       check_dtypes=False)


def test_an_unknown_frame_is_a_usage_error(wh: Warehouse) -> None:
    with pytest.raises(UsageError, match="no Polars analysis 'memcpy_summary'"):
        wh.frame("memcpy_summary")
