"""Launch latency, linkage coverage and queue depth: SQL vs hand-worked numbers, a real
trace, and the Polars twins."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures import NS_TRACE_GLOB, RUN, query, real_trace, scan, warehouse
from polars.testing import assert_frame_equal

from tracewh.analysis import launch_latency, launch_latency_by_kernel

OPS = [
    # launch [0, 20], GPU start 100: api 20, queue 80, launch_to_start 100
    {"cat": "kernel", "name": "a", "device": 0, "stream": 7, "step": 1, "ts_ns": 100, "dur_ns": 10,
     "launch_name": "cudaLaunchKernel", "launch_ts_ns": 0, "launch_dur_ns": 20, "link_method": "correlation"},
    # launch [30, 120], GPU start 110: raw queue -10 -> 0 (counted), launch_to_start 80
    {"cat": "kernel", "name": "b", "device": 0, "stream": 7, "step": 1, "ts_ns": 110, "dur_ns": 30,
     "launch_name": "cudaMemcpy", "launch_ts_ns": 30, "launch_dur_ns": 90, "link_method": "flow"},
    # launch [40, 45], GPU start 60 on stream 7 again: queue 15
    {"cat": "kernel", "name": "a", "device": 0, "stream": 7, "step": 2, "ts_ns": 160, "dur_ns": 10,
     "launch_name": "hipLaunchKernel", "launch_ts_ns": 40, "launch_dur_ns": 5, "link_method": "external_id"},
    {"cat": "kernel", "name": "c", "device": 0, "stream": 7, "ts_ns": 1000, "dur_ns": 5},  # unlinked
]  # fmt: skip


def test_hand_checked_latency() -> None:
    con = warehouse(gpu_ops=OPS)
    got = query(con, "SELECT * FROM launch_latency(?) ORDER BY event_index", [RUN])
    assert got.select(
        "api_ns", "queue_ns", "negative_queue", "launch_to_start_ns", "is_launch_call"
    ).rows() == [
        (20, 80, False, 100, True),
        (90, 0, True, 80, False),
        (5, 115, False, 120, True),
    ]
    by_k = query(con, "SELECT * FROM launch_latency_by_kernel(?)", [RUN])
    a = by_k.row(0, named=True)
    assert (a["name"], a["ops"], a["mean_queue_ns"], a["max_queue_ns"], a["mean_api_ns"]) == (
        "a",
        2,
        97.5,
        115,
        12.5,
    )
    by_s = query(
        con,
        "SELECT step, ops, mean_queue_ns, negative_queue_ops FROM launch_latency_by_step(?)",
        [RUN],
    )
    assert by_s.rows() == [(1, 2, 40.0, 1), (2, 1, 115.0, 0)]
    link = query(con, "SELECT * FROM launch_linkage(?)", [RUN]).row(0, named=True)
    assert (link["gpu_ops"], link["linked_ops"], link["unlinked_ops"]) == (4, 3, 1)
    assert link["unlinked_fraction"] == 0.25
    assert (
        link["by_correlation"],
        link["by_flow"],
        link["by_external_id"],
        link["negative_queue_ops"],
    ) == (1, 1, 1, 1)


def test_hand_checked_queue_depth() -> None:
    con = warehouse(gpu_ops=OPS)
    # +1 at 0, 30, 40; -1 at 100, 110, 160: depth 1 on [0,30), 2 on [30,40), 3 on [40,100),
    # 2 on [100,110), 1 on [110,160): mean = (30 + 20 + 180 + 20 + 50) / 160
    got = query(con, "SELECT * FROM queue_depth(?)", [RUN]).row(0, named=True)
    assert (got["ops"], got["window_ns"], got["max_depth"]) == (3, 160, 3)
    assert got["mean_depth"] == pytest.approx(300 / 160)
    assert got["full_ns"] == 0
    full = query(con, "SELECT * FROM queue_depth(?, full_depth := 2)", [RUN]).row(0, named=True)
    assert full["full_ns"] == 80  # [30, 110)
    assert full["full_fraction"] == pytest.approx(80 / 160)


def test_polars_parity_on_fixture() -> None:
    con = warehouse(gpu_ops=OPS)
    ops = scan(con, "gpu_ops")
    sql = query(con, "SELECT * FROM launch_latency(?) ORDER BY event_index", [RUN])
    assert_frame_equal(sql, launch_latency(ops).sort("event_index").collect(), check_dtypes=False)
    sql = query(con, "SELECT * FROM launch_latency_by_kernel(?)", [RUN])
    assert_frame_equal(sql, launch_latency_by_kernel(ops).collect(), check_dtypes=False)


@pytest.fixture(scope="module")
def ns_trace(shared_traces: Path) -> Path:
    return next(shared_traces.glob(NS_TRACE_GLOB))


def test_real_trace_latency_and_parity(ns_trace: Path) -> None:
    con, tables = real_trace(ns_trace)
    linked = [o for o in tables["gpu_ops"] if o.get("launch_ts_ns") is not None]
    got = query(con, "SELECT * FROM launch_latency(?) ORDER BY event_index", [RUN])
    assert len(got) == len(linked) > 1000
    by_index = {o["event_index"]: o for o in linked}
    for row in got.head(500).iter_rows(named=True):
        o = by_index[row["event_index"]]
        raw = o["ts_ns"] - (o["launch_ts_ns"] + o["launch_dur_ns"])
        assert row["queue_ns"] == max(raw, 0) and row["negative_queue"] == (raw < 0)
        assert row["api_ns"] == o["launch_dur_ns"]
    link = query(con, "SELECT * FROM launch_linkage(?)", [RUN]).row(0, named=True)
    assert link["unlinked_ops"] == len(tables["gpu_ops"]) - len(linked)
    ops = scan(con, "gpu_ops")
    assert_frame_equal(got, launch_latency(ops).sort("event_index").collect(), check_dtypes=False)
    sql = query(con, "SELECT * FROM launch_latency_by_kernel(?)", [RUN])
    assert_frame_equal(
        sql, launch_latency_by_kernel(ops).collect(), check_dtypes=False, rel_tol=1e-9
    )
    depth = query(con, "SELECT * FROM queue_depth(?)", [RUN])
    assert (depth["max_depth"] >= 1).all() and (depth["mean_depth"] >= 0).all()
