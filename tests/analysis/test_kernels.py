"""Kernel ranking: SQL (kernel_ranking, kernel_stats) vs hand-worked numbers, a plain-Python
loop over a real trace, and the Polars twin."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest
from fixtures import NS_TRACE_GLOB, RUN, load_trace, query, real_trace, scan, to_ns, warehouse
from polars.testing import assert_frame_equal

from tracewh.analysis import kernel_ranking

OPS = [
    {"cat": "kernel", "name": "gemm_a", "short_name": "gemm_a", "category": "gemm", "ts_ns": 0, "dur_ns": 10},
    {"cat": "kernel", "name": "gemm_a", "short_name": "gemm_a", "category": "gemm", "ts_ns": 20, "dur_ns": 30},
    {"cat": "kernel", "name": "gemm_a", "short_name": "gemm_a", "category": "gemm", "ts_ns": 60, "dur_ns": 20},
    {"cat": "kernel", "name": "relu", "short_name": "relu", "category": "elementwise", "ts_ns": 90, "dur_ns": 15},
    {"cat": "gpu_memcpy", "name": "Memcpy HtoD", "short_name": "Memcpy HtoD", "category": "memcpy_HtoD", "ts_ns": 110, "dur_ns": 25},
    {"cat": "gpu_memset", "name": "Memset", "short_name": "Memset", "category": "memset", "ts_ns": 140, "dur_ns": 5},
    {"cat": "kernel", "name": "no_dur", "ts_ns": 150, "dur_ns": None},
    {"run_id": "other-run", "cat": "kernel", "name": "gemm_a", "ts_ns": 0, "dur_ns": 1000},
]  # fmt: skip


def test_hand_checked_ranking() -> None:
    con = warehouse(gpu_ops=OPS)
    got = query(con, "SELECT * FROM kernel_ranking(?)", [RUN])
    # gemm_a: 10, 30, 20 -> total 60, mean 20, median 20, p95 = 20 + 0.9*(30-20) = 29,
    # std = sqrt(((10-20)^2 + (30-20)^2 + 0) / 2) = 10; all listed time = 60+25+15+5 = 105
    assert got["name"].to_list() == ["gemm_a", "Memcpy HtoD", "relu", "Memset"]
    g = got.row(0, named=True)
    assert (g["calls"], g["total_ns"], g["min_ns"], g["max_ns"]) == (3, 60, 10, 30)
    assert g["mean_ns"] == 20.0 and g["median_ns"] == 20.0
    assert g["p95_ns"] == pytest.approx(29.0)
    assert g["std_ns"] == pytest.approx(10.0)
    assert g["pct"] == pytest.approx(100 * 60 / 105)
    assert got.filter(pl.col("name") == "relu")["std_ns"].to_list() == [None]
    assert got["pct"].sum() == pytest.approx(100.0)


def test_filters_grouping_and_order() -> None:
    con = warehouse(gpu_ops=OPS)
    classic = query(
        con, "SELECT * FROM kernel_ranking(?, cats := ?)", [RUN, ["kernel", "gpu_memcpy"]]
    )
    assert classic.select("name", "calls", "total_ns").rows() == [
        ("gemm_a", 3, 60),
        ("Memcpy HtoD", 1, 25),
        ("relu", 1, 15),
    ]
    by_cat = query(con, "SELECT * FROM kernel_ranking(?, group_by := 'category')", [RUN])
    assert dict(by_cat.select("name", "total_ns").rows()) == {
        "gemm": 60,
        "memcpy_HtoD": 25,
        "elementwise": 15,
        "memset": 5,
    }
    by_mean = query(con, "SELECT name FROM kernel_ranking(?, order_by := 'mean')", [RUN])
    assert by_mean["name"].to_list() == ["Memcpy HtoD", "gemm_a", "relu", "Memset"]
    by_calls = query(con, "SELECT name FROM kernel_ranking(?, order_by := 'calls')", [RUN])
    assert by_calls["name"].to_list()[0] == "gemm_a"
    stats = query(con, "SELECT * FROM kernel_stats WHERE run_id = ? ORDER BY name", [RUN])
    assert stats.filter(pl.col("name") == "gemm_a")["total_ns"].to_list() == [60]


@pytest.mark.parametrize("group_by", ["name", "short_name", "category"])
@pytest.mark.parametrize("order_by", ["total", "mean", "max", "calls"])
def test_polars_parity_on_fixture(group_by: str, order_by: str) -> None:
    con = warehouse(gpu_ops=OPS)
    sql = query(
        con,
        "SELECT * FROM kernel_ranking(?, group_by := ?, order_by := ?)",
        [RUN, group_by, order_by],
    )
    ops = scan(con, "gpu_ops").filter(pl.col("run_id") == RUN)
    pol = kernel_ranking(ops, group_by=group_by, order_by=order_by).collect()  # type: ignore[arg-type]
    assert_frame_equal(sql, pol, check_dtypes=False, abs_tol=1e-6)


@pytest.fixture(scope="module")
def ns_trace(shared_traces: Path) -> Path:
    return next(shared_traces.glob(NS_TRACE_GLOB))


def test_classic_aggregation_on_real_trace(ns_trace: Path) -> None:
    # independent: a plain loop over the JSON, kernel + gpu_memcpy events with a duration
    totals: dict[str, int] = defaultdict(int)
    counts: dict[str, int] = defaultdict(int)
    durs: dict[str, list[int]] = defaultdict(list)
    for e in load_trace(ns_trace)["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy") and "dur" in e:
            d = to_ns(e["dur"])
            assert d is not None
            totals[e["name"]] += d
            counts[e["name"]] += 1
            durs[e["name"]].append(d)
    expected = sorted(totals, key=lambda n: (-totals[n], n))
    con, _ = real_trace(ns_trace)
    got = query(con, "SELECT * FROM kernel_ranking(?, cats := ?)", [RUN, ["kernel", "gpu_memcpy"]])
    assert got["name"].to_list() == expected
    assert got["total_ns"].to_list() == [totals[n] for n in expected]
    assert got["calls"].to_list() == [counts[n] for n in expected]
    for row in got.iter_rows(named=True):
        d = durs[row["name"]]
        assert row["min_ns"] == min(d) and row["max_ns"] == max(d)
        assert row["median_ns"] == pytest.approx(statistics.median(d))
        if len(d) > 1:
            assert row["std_ns"] == pytest.approx(statistics.stdev(d), rel=1e-9)


def test_polars_parity_on_real_trace(ns_trace: Path) -> None:
    con, _ = real_trace(ns_trace)
    ops = scan(con, "gpu_ops")
    for group_by in ("name", "short_name", "category"):
        sql = query(con, "SELECT * FROM kernel_ranking(?, group_by := ?)", [RUN, group_by])
        pol = kernel_ranking(ops, group_by=group_by).collect()  # type: ignore[arg-type]
        assert_frame_equal(sql, pol, check_dtypes=False, rel_tol=1e-9, abs_tol=1e-6)
