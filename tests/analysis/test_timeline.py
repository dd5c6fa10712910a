"""GPU segments, time breakdown, steps, operator attribution, CPU op time, memcpy and ranks:
SQL vs hand-worked fixtures (and invariants on a real trace)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fixtures import NS_TRACE_GLOB, RUN, query, real_trace, warehouse


def _g(name: str, ts: int, dur: int, stream: int, **kw: Any) -> dict[str, Any]:
    return {"cat": "kernel", "op_kind": "kernel", "category": "gemm", "name": name, "short_name": name,
            "device": 0, "stream": stream, "ts_ns": ts, "dur_ns": dur, **kw}  # fmt: skip


GPU = [
    _g("K1", 0, 100, 7, launch_ts_ns=-10, op_name="aten::mm", op_input_dims="[[2, 3]]", op_external_id=1),
    _g("N1", 50, 100, 20, category="communication", launch_ts_ns=40, op_name="nccl:all_reduce"),
    _g("M1", 140, 60, 30, cat="gpu_memcpy", op_kind="memcpy", category="memcpy_HtoD", memcpy_kind="HtoD", bytes=6000),
    _g("K2", 300, 50, 7, launch_ts_ns=250, op_name="aten::mm", op_input_dims="[[2, 3]]", op_external_id=2),
    _g("M2", 500, 10, 30, cat="gpu_memcpy", op_kind="memcpy", memcpy_kind="HtoD", device=1),
]  # fmt: skip
STEPS = [{"step": 1, "ts_ns": 0, "dur_ns": 160}, {"step": 2, "ts_ns": 160, "dur_ns": 240}]


def test_breakdown_sums_to_the_window() -> None:
    con = warehouse(gpu_ops=GPU)
    # segments: [0,50) compute; [50,100) compute+comm; [100,140) comm; [140,150) comm+memcpy;
    # [150,200) memcpy; [200,300) idle; [300,350) compute
    seg = query(con, "SELECT * FROM gpu_segments(?) WHERE device = 0 ORDER BY start_ns", [RUN])
    assert seg.select("start_ns", "end_ns", "compute_ops", "comm_ops", "memcpy_ops").rows() == [
        (0, 50, 1, 0, 0), (50, 100, 1, 1, 0), (100, 140, 0, 1, 0), (140, 150, 0, 1, 1),
        (150, 200, 0, 0, 1), (200, 300, 0, 0, 0), (300, 350, 1, 0, 0),
    ]  # fmt: skip
    b = query(con, "SELECT * FROM gpu_time_breakdown(?)", [RUN]).row(0, named=True)
    assert (b["window_ns"], b["computation_ns"], b["communication_ns"]) == (350, 150, 100)
    assert (
        b["comm_overlapped_ns"],
        b["comm_exposed_ns"],
        b["memcpy_exposed_ns"],
        b["idle_ns"],
    ) == (50, 50, 50, 100)
    assert b["overlap_ratio"] == 0.5
    assert (
        b["computation_ns"] + b["comm_exposed_ns"] + b["memcpy_exposed_ns"] + b["idle_ns"]
        == b["window_ns"]
    )


def test_steps_by_launch() -> None:
    """Hand-worked: each step owns the GPU ops it launched, tail and idle parts add up."""
    steps = [{"step": 1, "ts_ns": 0, "dur_ns": 160}, {"step": 2, "ts_ns": 160, "dur_ns": 240}]
    gpu = [
        _g("A", 10, 50, 7, launch_ts_ns=5, step=1),
        _g("B", 80, 40, 7, launch_ts_ns=70, step=1),    # gap 60->80 launched at 70: host wait 20
        _g("C", 130, 70, 7, launch_ts_ns=100, step=1),  # gap 120->130, launched before: kernel wait 10
        _g("D", 210, 40, 7, launch_ts_ns=170, step=2),  # C (step 1) runs until 200: tail 40
        _g("E", 300, 20, 7, launch_ts_ns=260, step=2),  # gap 250->300 launched at 260: host wait 50
        _g("F", 330, 5, 7, step=2),                     # unlinked: never a host wait (10)
        _g("M", 170, 10, 3, launch_ts_ns=165, step=2, device=1),
    ]
    con = warehouse(gpu_ops=gpu, steps=steps)
    got = {(r["step"], r["device"]): r for r in
           query(con, "SELECT * FROM step_summary(?)", [RUN]).iter_rows(named=True)}
    keys = ("wall_ns", "gpu_busy_ns", "gpu_idle_ns", "gpu_tail_ns", "ops", "lead_ns",
            "host_wait_ns", "kernel_wait_ns", "other_wait_ns", "trail_ns", "top_kernel", "bound")
    want = {
        (1, 0): (160, 160, 40, 40, 3, 10, 20, 10, 0, 0, "C", "cpu"),
        (2, 0): (240, 65, 175, 0, 3, 50, 50, 10, 0, 65, "D", "cpu"),
        (1, 1): (160, 0, 160, 0, 0, 160, 0, 0, 0, 0, None, "cpu"),
        (2, 1): (240, 10, 230, 0, 1, 10, 0, 0, 0, 220, "M", "gpu"),
    }
    assert {k: tuple(v[c] for c in keys) for k, v in got.items()} == want
    for r in got.values():
        assert r["gpu_idle_ns"] == (r["lead_ns"] + r["host_wait_ns"] + r["kernel_wait_ns"]
                                    + r["other_wait_ns"] + r["trail_ns"])


def test_op_attribution_and_memcpy() -> None:
    con = warehouse(gpu_ops=GPU)
    ops = query(con, "SELECT * FROM op_gpu_time(?)", [RUN])
    mm = ops.row(0, named=True)
    assert (mm["op_name"], mm["op_input_dims"], mm["op_calls"], mm["kernels"], mm["gpu_ns"]) == (
        "aten::mm", "[[2, 3]]", 2, 2, 150)  # fmt: skip
    assert mm["mean_gpu_ns_per_call"] == 75.0 and mm["kernel_names"] == ["K1", "K2"]
    mem = query(con, "SELECT * FROM memcpy_summary(?)", [RUN]).row(0, named=True)
    # 6000 bytes in 60 ns = 100 bytes/ns = 100 GB/s; M2 has no byte count
    assert (mem["memcpy_kind"], mem["ops"], mem["bytes"], mem["total_ns"]) == ("HtoD", 2, 6000, 70)
    assert mem["achieved_gbps"] == pytest.approx(100.0)
    wide = query(con, "SELECT ops FROM memcpy_kinds WHERE run_id = ?", [RUN])
    assert wide.rows() == [(2,)]


def test_cpu_op_self_and_total() -> None:
    def ev(name: str, ts: int, dur: int, tid: int = 1) -> dict[str, Any]:
        return {"cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts_ns": ts, "dur_ns": dur}

    events = [
        ev("p", 0, 100), ev("c", 10, 20), ev("c", 40, 20), ev("g", 45, 5), ev("z", 70, 0),
        ev("q", 200, 100), ev("r", 200, 50),  # same start: the longer one is the parent
        ev("p", 0, 30, tid=2),  # another thread: not nested in tid 1's ops
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts_ns": 12, "dur_ns": 5},
    ]  # fmt: skip
    con = warehouse(events=events)
    nest = query(
        con,
        "SELECT name, tid, depth, self_ns FROM cpu_op_nesting(?) ORDER BY tid, ts_ns, dur_ns DESC",
        [RUN],
    )
    assert nest.rows() == [
        ("p", 1, 0, 60), ("c", 1, 1, 20), ("c", 1, 1, 15), ("g", 1, 2, 5), ("z", 1, 1, 0),
        ("q", 1, 0, 50), ("r", 1, 1, 50), ("p", 2, 0, 30),
    ]  # fmt: skip
    t = {
        r[0]: r[1:]
        for r in query(
            con, "SELECT name, calls, total_ns, self_ns FROM cpu_op_time(?)", [RUN]
        ).rows()
    }
    assert t["p"] == (2, 130, 90) and t["c"] == (2, 40, 35) and t["q"] == (1, 100, 50)


def test_ranks() -> None:
    runs = [{"run_id": f"r{i}", "rank": i, "job": "j"} for i in range(3)] + [
        {"run_id": "x", "job": "j"}  # same folder, not in the instance's run list
    ]
    gpu = [
        {"run_id": f"r{i}", "cat": "kernel", "name": "k", "ts_ns": 0, "dur_ns": d, "step": 1}
        for i, d in enumerate((100, 100, 140))
    ] + [
        {"run_id": "r2", "cat": "kernel", "name": "k", "ts_ns": 500, "dur_ns": 60, "step": 2},
        {"run_id": "x", "cat": "kernel", "name": "k", "ts_ns": 0, "dur_ns": 9999, "step": 1},
    ]
    steps = [{"run_id": "r0", "step": 1, "ts_ns": 0, "dur_ns": 300}]
    con = warehouse(runs=runs, gpu_ops=gpu, steps=steps)
    ids = "['r0', 'r1', 'r2']"
    per = query(con, f"SELECT rank, total_ns FROM rank_kernels({ids})")
    assert per.rows() == [(0, 100), (1, 100), (2, 200)]
    imb = query(con, f"SELECT * FROM rank_imbalance({ids})").row(0, named=True)
    assert (imb["ranks"], imb["median_rank_total_ns"], imb["imbalance"], imb["slowest_rank"]) == (
        3,
        100.0,
        2.0,
        2,
    )
    st = query(
        con,
        f"SELECT step, rank, ratio, straggler, wall_ns FROM rank_stragglers({ids}) WHERE step = 1",
    )
    # peers of r2: 100, 100 (median 100, MAD 0): 140 > max(0, 2% of 100)
    assert st.rows() == [(1, 0, 100 / 120, False, 300), (1, 1, 100 / 120, False, None),
                         (1, 2, 1.4, True, None)]  # fmt: skip
    loose = query(
        con, f"SELECT straggler FROM rank_stragglers({ids}, floor_fraction := 0.5) WHERE step = 1"
    )
    assert not any(loose["straggler"].to_list())


def _stragglers_by_hand(gpu: list[list[float]], k: float = 3.0, floor: float = 0.02) -> list[list[bool]]:
    """gpu[step][rank] -> straggler flags: above the others' median by > max(k*1.4826*MAD, floor*median)."""
    import statistics

    out = []
    for row in gpu:
        flags = []
        for r, v in enumerate(row):
            peers = row[:r] + row[r + 1:]
            med = statistics.median(peers)
            mad = statistics.median(abs(p - med) for p in peers)
            flags.append(v - med > max(k * 1.4826 * mad, floor * med))
        out.append(flags)
    return out


def test_stragglers_by_noise() -> None:
    """A rank 8% slower every step among 8 peers within 1% of each other is flagged in every
    step; noise alone (all ranks within 1%) flags nothing."""
    import random

    rng = random.Random(7)
    n_ranks, n_steps = 8, 6
    noisy = [[1e6 * (1 + rng.uniform(-0.01, 0.01)) for _ in range(n_ranks)] for _ in range(n_steps)]
    slow = [[v * (1.08 if r == 5 else 1.0) for r, v in enumerate(row)] for row in noisy]
    for grid, expect_rank in ((noisy, None), (slow, 5)):
        gpu = [{"run_id": f"r{r}", "cat": "kernel", "name": "k", "ts_ns": 10 * s,
                "dur_ns": int(grid[s][r]), "step": s}
               for s in range(n_steps) for r in range(n_ranks)]  # fmt: skip
        runs = [{"run_id": f"r{r}", "rank": r} for r in range(n_ranks)]
        con = warehouse(runs=runs, gpu_ops=gpu)
        ids = "[" + ", ".join(f"'r{r}'" for r in range(n_ranks)) + "]"
        got = query(con, f"SELECT step, rank, straggler FROM rank_stragglers({ids})")
        flags = {(s, r): f for s, r, f in got.rows()}
        hand = _stragglers_by_hand([[float(int(v)) for v in row] for row in grid])
        assert flags == {(s, r): hand[s][r] for s in range(n_steps) for r in range(n_ranks)}
        flagged = {r for (s, r), f in flags.items() if f}
        assert flagged == (set() if expect_rank is None else {expect_rank})
        if expect_rank is not None:
            assert all(flags[(s, expect_rank)] for s in range(n_steps))


def test_real_trace_invariants(shared_traces: Path) -> None:
    con, tables = real_trace(next(shared_traces.glob(NS_TRACE_GLOB)))
    for b in query(con, "SELECT * FROM gpu_time_breakdown(?)", [RUN]).iter_rows(named=True):
        assert (
            b["computation_ns"] + b["comm_exposed_ns"] + b["memcpy_exposed_ns"] + b["idle_ns"]
            == b["window_ns"]
        )
    steps = query(con, "SELECT * FROM step_summary(?)", [RUN])
    assert len(steps) == len({s["step"] for s in tables["steps"]}) > 0
    assert ((steps["gpu_busy_ns"] >= 0) & (steps["gpu_busy_ns"] <= steps["wall_ns"])).all()
    cpu = query(con, "SELECT * FROM cpu_op_time(?)", [RUN])
    n_cpu = sum(1 for e in tables["events"] if e["cat"] == "cpu_op")
    assert cpu["calls"].sum() == n_cpu
    assert ((cpu["self_ns"] >= 0) & (cpu["self_ns"] <= cpu["total_ns"])).all()


def test_overlap_ratio_is_zero_when_communication_never_overlaps() -> None:
    # compute [0, 100), communication [150, 250): communication exists, never overlapped
    gpu = [_g("K1", 0, 100, 7), _g("N1", 150, 100, 20, category="communication")]
    b = query(warehouse(gpu_ops=gpu), "SELECT * FROM gpu_time_breakdown(?)", [RUN]).row(0, named=True)
    assert (b["communication_ns"], b["comm_overlapped_ns"], b["overlap_ratio"]) == (100, 0, 0.0)
    # no communication at all: NULL
    b = query(warehouse(gpu_ops=gpu[:1]), "SELECT * FROM gpu_time_breakdown(?)", [RUN]).row(0, named=True)
    assert b["communication_ns"] == 0 and b["overlap_ratio"] is None
