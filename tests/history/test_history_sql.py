"""sql/90_history.sql and 91_diff.sql on hand-made runs, against plain Python."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from fixtures import query, rows_table, warehouse
from polars.testing import assert_frame_equal

from tracewh.api import Warehouse

# ----------------------------------------------------------------------------- diff


def _op(run: str, name: str, ts: int, dur: int, **kw: Any) -> dict[str, Any]:
    base = {"run_id": run, "cat": "kernel", "op_kind": "kernel", "name": name,
            "short_name": name.split("<")[0], "category": "gemm", "device": 0, "stream": 7,
            "ts_ns": ts, "dur_ns": dur}  # fmt: skip
    return {**base, **kw}


# run A: 2 steps; run B: 4 steps (per-step normalisation makes them comparable)
DIFF_OPS = [
    *[_op("A", "gemm<1>", 1000 * i, 100) for i in range(4)],  # 2 per step, 100 each
    *[_op("A", "gemm<2>", 1000 * i + 200, 50) for i in range(2)],
    _op("A", "old_kernel", 5000, 30, category="elementwise", short_name="old_kernel"),
    *[_op("B", "gemm<1>", 1000 * i, 150) for i in range(8)],  # 2 per step, 150 each: slower
    *[_op("B", "gemm<2>", 1000 * i + 200, 51) for i in range(4)],  # +2%: unchanged
    *[_op("B", "attn", 1000 * i + 400, 80, category="attention", short_name="attn") for i in range(4)],
]  # fmt: skip
DIFF_STEPS = [
    *[{"run_id": "A", "step": s, "ts_ns": 2000 * s, "dur_ns": 2000} for s in range(2)],
    *[{"run_id": "B", "step": s, "ts_ns": 2000 * s, "dur_ns": 2000} for s in range(4)],
]


@pytest.fixture(scope="module")
def diff_con() -> Any:
    return warehouse(gpu_ops=DIFF_OPS, steps=DIFF_STEPS)


def _expected_diff(level: str, min_delta_ns: float) -> dict[str, dict[str, Any]]:
    """run_diff rows computed with plain Python from DIFF_OPS."""
    key = {"kernel": "name", "short_name": "short_name", "category": "category"}[level]
    nsteps = {"A": 2, "B": 4}
    agg: dict[str, dict[str, list[int]]] = {}
    for o in DIFF_OPS:
        agg.setdefault(o[key], {"A": [], "B": []})[o["run_id"]].append(o["dur_ns"])
    out = {}
    for name, sides in agg.items():
        ta = sum(sides["A"]) / nsteps["A"]
        tb = sum(sides["B"]) / nsteps["B"]
        ratio = tb / ta if sides["A"] and sides["B"] else None
        if not sides["A"]:
            status = "added"
        elif not sides["B"]:
            status = "removed"
        elif ratio is not None and ratio > 1.05 and tb - ta >= min_delta_ns:
            status = "slower"
        elif ratio is not None and ratio < 0.95 and ta - tb >= min_delta_ns:
            status = "faster"
        else:
            status = "unchanged"
        out[name] = {"calls_a": len(sides["A"]), "calls_b": len(sides["B"]),
                     "time_per_step_a_ns": ta, "time_per_step_b_ns": tb,
                     "delta_per_step_ns": tb - ta, "ratio": ratio, "status": status}  # fmt: skip
    return out


@pytest.mark.parametrize("level", ["kernel", "short_name", "category"])
def test_run_diff_matches_plain_python(diff_con: Any, level: str) -> None:
    con = diff_con
    got = query(con, "SELECT * FROM run_diff('A', 'B', level := ?, min_delta_ns := 1)", [level])
    want = _expected_diff(level, 1)  # the fixture's deltas are tens of ns: a 1 ns floor
    assert sorted(got["name"].to_list()) == sorted(want)
    for row in got.iter_rows(named=True):
        w = want[row["name"]]
        for col in ("calls_a", "calls_b", "time_per_step_a_ns", "time_per_step_b_ns",
                    "delta_per_step_ns"):  # fmt: skip
            assert row[col] == pytest.approx(w[col]), (row["name"], col)
        assert row["status"] == w["status"], row["name"]
        assert row["ratio"] == (None if w["ratio"] is None else pytest.approx(w["ratio"]))
    # sorted by absolute impact
    impacts = [abs(d) for d in got["delta_per_step_ns"].to_list()]
    assert impacts == sorted(impacts, reverse=True)
    if level == "kernel":
        status = dict(zip(got["name"], got["status"], strict=True))
        assert status == {"gemm<1>": "slower", "gemm<2>": "unchanged", "old_kernel": "removed",
                          "attn": "added"}  # fmt: skip


def test_run_diff_status_uses_tolerance_and_floor(diff_con: Any) -> None:
    con = diff_con
    got = query(con, "SELECT name, status FROM run_diff('A', 'B')")  # floor 1000 ns per step
    assert dict(got.rows())["gemm<1>"] == "unchanged"  # +100 ns per step < 1 µs floor
    got = query(con, "SELECT name, status FROM run_diff('A', 'B', tolerance := 0.0, min_delta_ns := 1)")
    assert dict(got.rows())["gemm<2>"] == "slower"
    with pytest.raises(Exception, match="level must be"):
        query(con, "SELECT * FROM run_diff('A', 'B', level := 'nope')")


def test_run_compare_side_by_side(diff_con: Any) -> None:
    con = diff_con
    got = {r["metric"]: r for r in query(con, "SELECT * FROM run_compare('A', 'B')").iter_rows(named=True)}
    assert got["n_steps"]["value_a"] == 2 and got["n_steps"]["value_b"] == 4
    assert got["step_ns"]["value_a"] == 2000 and got["step_ns"]["value_b"] == 2000
    gpu_a = sum(o["dur_ns"] for o in DIFF_OPS if o["run_id"] == "A") / 2
    gpu_b = sum(o["dur_ns"] for o in DIFF_OPS if o["run_id"] == "B") / 4
    assert got["gpu_op_per_step_ns"]["value_a"] == pytest.approx(gpu_a)
    assert got["gpu_op_per_step_ns"]["delta"] == pytest.approx(gpu_b - gpu_a)
    assert next(iter(got)) == "n_steps" and len(got) == 10


# ----------------------------------------------------------------- GPU time per run

TIMELINE = [
    # device 0: [0,100) [50,150) -> busy 150; gap 150..300 (launch at 200 > 150: host wait);
    # [300,350); gap 350..360 (launched early, 10 ns < 30 µs: kernel wait); [360,400)
    _op("R", "a", 0, 100, launch_ts_ns=-5),
    _op("R", "b", 50, 100, stream=8, launch_ts_ns=0),
    _op("R", "c", 300, 50, launch_ts_ns=200),
    _op("R", "d", 360, 40, launch_ts_ns=100),
    # device 1: one op, a 40 000 ns gap with no launch info (other), one op
    _op("R", "e", 0, 10, device=1),
    _op("R", "f", 40_010, 10, device=1),
]  # fmt: skip


def test_run_gpu_time_by_hand_and_parity_with_breakdown() -> None:
    con = warehouse(gpu_ops=TIMELINE)
    g = query(con, "SELECT * FROM run_gpu_time WHERE run_id = 'R'").row(0, named=True)
    assert g["gpu_window_ns"] == 400 + 40_020
    assert g["gpu_busy_ns"] == (150 + 50 + 40) + 20
    assert g["gpu_idle_ns"] == 150 + 10 + 40_000
    assert (g["host_wait_ns"], g["kernel_wait_ns"], g["other_wait_ns"]) == (150, 10, 40_000)
    b = query(con, "SELECT sum(idle_ns) AS idle, sum(window_ns) AS w FROM gpu_time_breakdown('R')")
    assert (b["idle"][0], b["w"][0]) == (g["gpu_idle_ns"], g["gpu_window_ns"])
    m = query(con, "SELECT * FROM run_metrics WHERE run_id = 'R'").row(0, named=True)
    assert m["n_steps"] == 0 and m["step_divisor"] == 1  # no steps: per run
    assert m["gpu_idle_fraction"] == pytest.approx(g["gpu_idle_ns"] / g["gpu_window_ns"])


# TIMELINE plus ops that have a duration but no place on the timeline: a zero-duration op
# inside device 0's host-wait gap (it must not split it), one without a start, one without a
# duration (left out everywhere), and on device 1 a zero-duration op named like device 0's
# "a" (counted once among the distinct names). Run Z has only a zero-duration op; run N none.
EDGES = [
    *TIMELINE,
    _op("R", "zero", 200, 0),
    _op("R", "lost", None, 7, category="attention"),
    _op("R", "nodur", 10, None),
    _op("R", "a", 5, 0, device=1),
    _op("Z", "z", 0, 0),
]


@pytest.fixture(scope="module")
def edges_con() -> Any:
    return warehouse(runs=[{"run_id": "N"}], gpu_ops=EDGES)


def test_gpu_time_ignores_ops_off_the_timeline(edges_con: Any) -> None:
    con = edges_con
    g = query(con, "SELECT * FROM run_gpu_time ORDER BY run_id")
    assert g["run_id"].to_list() == ["R"]  # Z has no op of positive duration, N no op
    r = g.row(0, named=True)
    assert (r["devices"], r["gpu_window_ns"], r["gpu_busy_ns"]) == (2, 400 + 40_020, 260)
    assert (r["host_wait_ns"], r["kernel_wait_ns"], r["other_wait_ns"]) == (150, 10, 40_000)
    m = {r["run_id"]: r for r in query(con, "SELECT * FROM run_metrics").iter_rows(named=True)}
    assert m["R"]["gpu_op_per_step_ns"] == 100 + 100 + 50 + 40 + 10 + 10 + 7
    assert m["R"]["gpu_idle_fraction"] == pytest.approx(40_160 / 40_420)
    for run in ("Z", "N"):
        assert m[run]["gpu_op_per_step_ns"] == 0
        assert m[run]["gpu_busy_per_step_ns"] is None and m[run]["gpu_idle_fraction"] is None


@pytest.mark.parametrize(
    ("args", "want"),
    [  # per run: kernels, calls, time_per_step_ns, mean_ns (no steps: per run)
        ("", {"R": (8, 9, 317, 317 / 9), "Z": (1, 1, 0, 0.0), "N": (0, 0, 0, None)}),
        ("kernel_pattern := 'A'", {"R": (1, 2, 100, 50.0), "Z": (0, 0, 0, None)}),
        ("kernel_pattern := '[ab]'", {"R": (2, 3, 200, 200 / 3)}),
        ("category_name := 'ATTENTION'", {"R": (1, 1, 7, 7.0)}),
        ("kernel_pattern := 'l*', category_name := 'gemm'", {"R": (0, 0, 0, None)}),
    ],
)
def test_metric_history_by_hand(
    edges_con: Any, args: str, want: dict[str, tuple[Any, ...]]
) -> None:
    got = query(edges_con, f"SELECT * FROM metric_history({args})")
    assert sorted(got["run_id"]) == ["N", "R", "Z"]
    rows = {r["run_id"]: r for r in got.iter_rows(named=True)}
    for run, (kernels, calls, per_step, mean) in want.items():
        r = rows[run]
        assert (r["kernels"], r["calls"], r["time_per_step_ns"]) == (kernels, calls, per_step)
        assert r["mean_ns"] == (None if mean is None else pytest.approx(mean)), run
    assert rows["R"]["gpu_idle_fraction"] == pytest.approx(40_160 / 40_420)
    assert rows["Z"]["gpu_idle_fraction"] is None


# ------------------------------------------------------------- nightly rows

DAY0 = dt.date(2025, 1, 1)
NIGHT_NS = 86_400 * 10**9
BIG = [1000, 1010, 990, 1005, 995, 1002, 1400, 1410]  # ns per call of k_big, night by night
STEP_NS = 100_000


def _runs_and_ops(model: str, prefix: str, rank: int = 0) -> tuple[list[dict[str, Any]], ...]:
    runs, ops, steps = [], [], []
    for i, big in enumerate(BIG):
        rid = f"{prefix}{i}"
        start = 1_735_689_600 * 10**9 + i * NIGHT_NS
        labels = {"model": model, "branch": "main", "night": str(DAY0 + dt.timedelta(days=i))}
        runs.append({"run_id": rid, "day": DAY0 + dt.timedelta(days=i), "start_ns": start,
                     "end_ns": start + 2 * STEP_NS, "rank": rank, "device_name": "A100",
                     "backend": "cuda", "job": f"/h/{i}", "labels_json": json.dumps(labels)})  # fmt: skip
        for s in range(2):  # 2 steps, each: 3 x k_big and 1 x k_small
            t0 = start + s * STEP_NS
            steps.append({"run_id": rid, "step": s, "ts_ns": t0, "dur_ns": STEP_NS,
                          "day": DAY0 + dt.timedelta(days=i)})  # fmt: skip
            for c in range(3):
                ops.append(_op(rid, "k_big", t0 + 10_000 * c, big * 50, day=DAY0 + dt.timedelta(days=i)))
            ops.append(_op(rid, "k_small", t0 + 50_000, 20, category="elementwise",
                           day=DAY0 + dt.timedelta(days=i)))  # fmt: skip
    return runs, ops, steps


def test_run_steps_spread_of_the_step_walls() -> None:
    """step_sd_ns: the sample standard deviation of each step's [first start, last end]."""
    import statistics

    steps = [{"run_id": "a", "step": 0, "ts_ns": 0, "dur_ns": 100},
             {"run_id": "a", "step": 0, "ts_ns": 50, "dur_ns": 80},  # step 0 spans 0..130
             {"run_id": "a", "step": 1, "ts_ns": 200, "dur_ns": 110},
             {"run_id": "a", "step": 2, "ts_ns": 400, "dur_ns": 90},
             {"run_id": "b", "step": 0, "ts_ns": 0, "dur_ns": 100}]  # fmt: skip
    con = warehouse(runs=[{"run_id": "a"}, {"run_id": "b"}, {"run_id": "c", "start_ns": 0,
                                                              "end_ns": 5}], steps=steps)  # fmt: skip
    got = {r[0]: r[1:] for r in query(con, "SELECT run_id, n_steps, step_ns, step_sd_ns "
                                           "FROM run_steps").rows()}  # fmt: skip
    assert got["a"][0] == 3 and got["a"][1] == pytest.approx((130 + 110 + 90) / 3)
    assert got["a"][2] == pytest.approx(statistics.stdev([130, 110, 90]))
    assert got["b"] == (1, 100.0, None) and got["c"] == (0, 5.0, None)


def test_new_views_run_on_an_empty_warehouse() -> None:
    con = warehouse()
    for sql in (
        "SELECT * FROM run_steps", "SELECT * FROM run_group_metrics", "SELECT * FROM run_gpu_time",
        "SELECT * FROM run_metrics", "SELECT * FROM metric_history()",
        "SELECT * FROM run_gpu_summary(kernel_pattern := 'x', since := DATE '2025-01-01')",
        "SELECT * FROM run_diff('a', 'b')", "SELECT * FROM run_compare('a', 'b')",
    ):  # fmt: skip
        con.execute(sql).fetchall()


def test_history_since_reads_only_its_days_and_matches_the_full_history(tmp_path: Path) -> None:
    # the check_con rows as a Delta warehouse: 8 nights x 3 runs, one partition per night
    r1, o1, s1 = _runs_and_ops("m", "m")
    r2, o2, s2 = _runs_and_ops("other", "o")
    for r in r2:
        r["start_ns"] += 1
    wh = Warehouse(tmp_path / "wh")
    wh.store.create()
    wh.store.append("gpu_ops", lambda: rows_table("gpu_ops", o1 + o2))
    wh.store.append("steps", lambda: rows_table("steps", s1 + s2))
    wh.store.append("runs", lambda: rows_table("runs", r1 + r2))
    calls = [{"kernel": "k_big"}, {"category": "elementwise"}, {"where": {"model": "m"}}]
    full = [wh.history(**kw) for kw in calls]  # type: ignore[arg-type]
    assert [f.height for f in full] == [16, 16, 8]
    cuts = [DAY0 - dt.timedelta(days=1), DAY0, DAY0 + dt.timedelta(days=5),
            DAY0 + dt.timedelta(days=7), DAY0 + dt.timedelta(days=30)]  # fmt: skip
    for since in cuts:
        nights = sum(r["day"] >= since for r in r1)  # one file per night and table
        files = wh.store.snapshot_files(since=since)
        assert len(files["gpu_ops"]) == len(files["steps"]) == nights
        for kw, whole in zip(calls, full, strict=True):
            got = wh.history(since=since, **kw)  # type: ignore[arg-type]
            assert_frame_equal(got, whole.filter(pl.col("day") >= since))
    # the partitions before `since` are not read at all: without them the answer is the same
    for part in (tmp_path / "wh" / "tables").glob("*/day=2025-01-0[1-5]"):
        for f in part.glob("*.parquet"):
            f.unlink()
    since = DAY0 + dt.timedelta(days=5)
    got = wh.history(kernel="k_big", since=since)
    assert_frame_equal(got, full[0].filter(pl.col("day") >= since))
