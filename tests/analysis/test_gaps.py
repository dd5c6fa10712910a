"""Stream gaps, idle breakdown and largest gaps: SQL vs hand-worked numbers, a plain-Python
loop over a real trace, and the Polars twins."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from fixtures import NS_TRACE_GLOB, RUN, load_trace, query, real_trace, scan, to_ns, warehouse
from polars.testing import assert_frame_equal

from tracewh.analysis import idle_breakdown, stream_gaps


def _op(name: str, ts: int, dur: int, launch: int | None, stream: int = 7) -> dict[str, Any]:
    return {"cat": "kernel", "name": name, "device": 0, "stream": stream, "ts_ns": ts,
            "dur_ns": dur, "launch_ts_ns": launch, "launch_dur_ns": None if launch is None else 5}  # fmt: skip


OPS = [
    _op("A", 0, 100, -50),
    _op("B", 50, 20, -40),  # overlaps A: no gap
    _op("C", 110, 10, 105),  # gap 10, launched after A ended (100): host wait
    _op("D", 130, 10, 90),  # gap 10, launched before C ended: kernel wait
    _op("E", 100_140, 60, 100),  # gap 100 000 >= 30 000: other
    _op("F", 100_210, 10, None),  # gap 10, unlinked: kernel wait
    _op("G", 0, 5, -1, stream=8),
    _op("H", 40_000, 5, 3, stream=8),  # gap 39 995: other
]


def test_hand_checked_stream_gaps() -> None:
    con = warehouse(gpu_ops=OPS)
    got = query(con, "SELECT * FROM stream_gaps(?)", [RUN])
    s7 = got.row(0, named=True)
    assert (s7["device"], s7["stream"], s7["ops"]) == (0, 7, 6)
    # window 0..100 220; gaps 10 + 10 + 100 000 + 10; busy = 100+10+10+60+10 (union)
    assert (s7["window_ns"], s7["gap_ns"], s7["busy_ns"]) == (100_220, 100_030, 190)
    assert s7["idle_fraction"] == pytest.approx(100_030 / 100_220)
    assert s7["p50_gap_ns"] == 10.0
    assert s7["p95_gap_ns"] == pytest.approx(10 + 0.85 * 99_990)  # rank 2.85 of [10,10,10,1e5]
    assert s7["max_gap_ns"] == 100_000
    assert (s7["host_wait_ns"], s7["kernel_wait_ns"], s7["other_wait_ns"]) == (10, 20, 100_000)
    s8 = got.row(1, named=True)
    assert (s8["stream"], s8["ops"], s8["window_ns"], s8["gap_ns"], s8["busy_ns"]) == (
        8,
        2,
        40_005,
        39_995,
        10,
    )
    assert (s8["host_wait_ns"], s8["kernel_wait_ns"], s8["other_wait_ns"]) == (0, 0, 39_995)


def test_threshold_is_in_ns_and_a_parameter() -> None:
    con = warehouse(gpu_ops=OPS)
    got = query(con, "SELECT * FROM stream_gaps(?, kernel_wait_threshold_ns := 5)", [RUN])
    assert got.row(0, named=True)["kernel_wait_ns"] == 0
    assert got.row(0, named=True)["other_wait_ns"] == 100_020
    got = query(con, "SELECT * FROM stream_gaps(?, kernel_wait_threshold_ns := 40000)", [RUN])
    assert got.row(1, named=True)["kernel_wait_ns"] == 39_995


def test_hand_checked_idle_breakdown_and_largest_gaps() -> None:
    con = warehouse(gpu_ops=OPS)
    ib = query(con, "SELECT * FROM idle_breakdown(?)", [RUN])
    assert ib.select("level", "stream", "gaps", "gap_ns").rows() == [
        ("stream", 7, 4, 100_030),
        ("stream", 8, 1, 39_995),
        ("device", None, 5, 140_025),
    ]
    dev = ib.row(2, named=True)
    assert (dev["host_wait_ns"], dev["kernel_wait_ns"], dev["other_wait_ns"]) == (10, 20, 139_995)
    assert dev["host_wait_ratio"] + dev["kernel_wait_ratio"] + dev[
        "other_wait_ratio"
    ] == pytest.approx(1.0)
    lg = query(con, "SELECT * FROM largest_gaps(?, n := 2)", [RUN])
    assert lg.select(
        "gap_ns", "prev_name", "next_name", "kind", "gap_start_ns", "gap_end_ns"
    ).rows() == [
        (100_000, "D", "E", "other", 140, 100_140),
        (39_995, "G", "H", "other", 5, 40_000),
    ]


def test_polars_parity_on_fixture() -> None:
    con = warehouse(gpu_ops=OPS)
    ops = scan(con, "gpu_ops")
    for threshold in (5, 30_000, 40_000):
        sql = query(
            con, "SELECT * FROM stream_gaps(?, kernel_wait_threshold_ns := ?)", [RUN, threshold]
        )
        pol = stream_gaps(ops, kernel_wait_threshold_ns=threshold).collect()
        assert_frame_equal(sql, pol, check_dtypes=False)
        sql = query(
            con, "SELECT * FROM idle_breakdown(?, kernel_wait_threshold_ns := ?)", [RUN, threshold]
        )
        pol = idle_breakdown(ops, kernel_wait_threshold_ns=threshold).collect()
        assert_frame_equal(sql, pol, check_dtypes=False)


@pytest.fixture(scope="module")
def ns_trace(shared_traces: Path) -> Path:
    return next(shared_traces.glob(NS_TRACE_GLOB))


def _python_gaps(path: Path) -> dict[tuple[int, int], dict[str, int]]:
    """Per (device, stream): ops, window, total gap, max gap and host-wait time, by plain loops."""
    gpu_cats = {"kernel", "gpu_memcpy", "gpu_memset"}
    events = load_trace(path)["traceEvents"]
    launch_ts: dict[int, int] = {}
    for e in events:
        if (
            e.get("ph") == "X"
            and e.get("cat") == "cuda_runtime"
            and "correlation" in e.get("args", {})
        ):
            launch_ts[int(e["args"]["correlation"])] = to_ns(e["ts"])  # type: ignore[assignment]
    by_stream: dict[tuple[int, int], list[tuple[int, int, int, int | None]]] = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("ph") == "X" and e.get("cat") in gpu_cats:
            a = e["args"]
            ts, dur = to_ns(e["ts"]), to_ns(e["dur"])
            assert ts is not None and dur is not None
            by_stream[(int(a["device"]), int(a["stream"]))].append(
                (ts, i, ts + dur, launch_ts.get(int(a.get("correlation", -1))))
            )
    out = {}
    for key, ops in by_stream.items():
        ops.sort()
        latest_end = ops[0][2]
        total = biggest = host = 0
        for ts, _i, end, launched in ops[1:]:
            gap = max(ts - latest_end, 0)
            total += gap
            biggest = max(biggest, gap)
            if gap > 0 and launched is not None and launched > latest_end:
                host += gap
            latest_end = max(latest_end, end)
        window = max(o[2] for o in ops) - ops[0][0]
        out[key] = {
            "ops": len(ops),
            "window_ns": window,
            "gap_ns": total,
            "max_gap_ns": biggest,
            "host_wait_ns": host,
        }
    return out


def test_gaps_on_real_trace_match_a_plain_loop(ns_trace: Path) -> None:
    expected = _python_gaps(ns_trace)
    con, _ = real_trace(ns_trace)
    got = query(con, "SELECT * FROM stream_gaps(?)", [RUN])
    assert len(got) == len(expected) >= 1
    for row in got.iter_rows(named=True):
        exp = expected[(row["device"], row["stream"])]
        for col, value in exp.items():
            if col == "max_gap_ns" and value == 0:
                assert row[col] is None
            else:
                assert row[col] == value, (row["stream"], col)
        assert row["host_wait_ns"] + row["kernel_wait_ns"] + row["other_wait_ns"] == row["gap_ns"]
        assert row["busy_ns"] + row["gap_ns"] == row["window_ns"]


def test_polars_parity_on_real_trace(ns_trace: Path) -> None:
    con, _ = real_trace(ns_trace)
    ops = scan(con, "gpu_ops")
    sql = query(con, "SELECT * FROM stream_gaps(?)", [RUN])
    assert_frame_equal(sql, stream_gaps(ops).collect(), check_dtypes=False, rel_tol=1e-9)
    sql = query(con, "SELECT * FROM idle_breakdown(?)", [RUN])
    assert_frame_equal(sql, idle_breakdown(ops).collect(), check_dtypes=False, rel_tol=1e-9)
    assert not sql.filter(pl.col("level") == "device").is_empty()
