"""sql/65_memory.sql on hand-made rows: pairing, peak, live set, attribution, steps, leaks."""

from __future__ import annotations

from typing import Any

import pytest
from fixtures import RUN, query, warehouse

GPU = {"device_type": 1, "device_id": 0}
CPU = {"device_type": 0, "device_id": -1}


def _mem(i: int, ts: int, nbytes: int, addr: int | None, total: int | None, *,
         dev: dict[str, int] = GPU, reserved: int | None = 1000, tid: int = 1) -> dict[str, Any]:
    return {"event_index": i, "ph": "i", "cat": "cpu_instant_event", "name": "[memory]",
            "pid": 1, "tid": tid, "ts_ns": ts, "bytes": nbytes, "addr": addr,
            "total_allocated": total, "total_reserved": reserved, **dev}  # fmt: skip


def _op(i: int, name: str, ts: int, dur: int, *, tid: int = 1, cat: str = "cpu_op") -> dict[str, Any]:
    return {"event_index": i, "cat": cat, "name": name, "pid": 1, "tid": tid, "ts_ns": ts, "dur_ns": dur}


# 100 bytes allocated before the trace (at 0xB), freed at t=50: an unpaired free.
# Address 0xA is allocated, freed and allocated again; 0xC is never freed.
MEM = [
    _mem(100, 10, 40, 0xA, 140),      # seq 1, A1 (by outer op at its start)
    _mem(101, 20, 30, 0xC, 170),      # seq 2, C  (inner op), never freed
    _mem(102, 30, -40, 0xA, 130),     # seq 3, frees A1
    _mem(103, 40, 60, 0xA, 190),      # seq 4, A2 (address reused): the peak
    _mem(104, 50, -100, 0xB, 90),     # seq 5, unpaired free (allocated before the trace)
    _mem(105, 60, -60, 0xA, 30),      # seq 6, frees A2
    _mem(106, 70, 5, 0xD, 35, tid=2),  # seq 7, another thread: no op
]
OPS = [
    _op(1, "outer", 10, 100),          # [10, 110)
    _op(2, "inner", 15, 10),           # [15, 25): encloses t=20
    _op(3, "ends_at_40", 35, 5),       # [35, 40): does not enclose t=40
    _op(4, "ProfilerStep#1", 0, 200, cat="user_annotation"),  # annotations are not operators
    _op(5, "my_region", 65, 10, tid=2, cat="user_annotation"),
]


def _rows(con: Any, sql: str) -> list[dict[str, Any]]:
    return list(query(con, sql, [RUN]).iter_rows(named=True))


def test_events_pairing_and_order() -> None:
    con = warehouse(instants=list(reversed(MEM)))
    got = _rows(con, "SELECT * FROM memory_events(?) ORDER BY seq")
    assert [r["seq"] for r in got] == list(range(1, 8))
    assert [r["event_index"] for r in got] == [100, 101, 102, 103, 104, 105, 106]
    assert [r["kind"] for r in got] == ["alloc", "alloc", "free", "alloc", "free", "free", "alloc"]
    assert [r["pair_seq"] for r in got] == [3, None, 1, 6, None, 4, None]
    assert [r["pair_event_index"] for r in got] == [102, None, 100, 105, None, 103, None]
    assert got[0]["pair_ts_ns"] == 30
    assert {r["device_type"] for r in got} == {"gpu"}
    assert {(r["device_kind"], r["device"], r["device_name"]) for r in got} == {("cuda", 0, "cuda:0")}


def test_summary_peak_live_set_and_before_trace() -> None:
    con = warehouse(instants=MEM, events=OPS, runs=[{"run_id": RUN, "ingest_id": "ing-1", "start_ns": 5}])
    (s,) = _rows(con, "SELECT * FROM memory_summary(?)")
    assert (s["events"], s["allocations"], s["frees"]) == (7, 4, 3)
    assert (s["allocated_bytes"], s["freed_bytes"]) == (135, 200)
    assert (s["start_allocated_bytes"], s["end_allocated_bytes"]) == (100, 35)
    assert (s["peak_allocated_bytes"], s["peak_allocated_ts_ns"], s["peak_offset_ns"]) == (190, 40, 35)
    assert (s["peak_reserved_bytes"], s["peak_reserved_ts_ns"]) == (1000, 10)
    # live at the peak (seq 4): C (30) and A2 (60); the other 100 bytes predate the trace
    assert (s["peak_live_allocations"], s["peak_live_bytes"], s["peak_before_trace_bytes"]) == (2, 90, 100)
    assert (s["unpaired_frees"], s["unpaired_freed_bytes"]) == (1, 100)
    assert (s["live_at_end_allocations"], s["live_at_end_bytes"]) == (2, 35)
    assert (s["top_op_name"], s["top_op_live_bytes"]) == ("outer", 60)


def test_allocations_attribution_and_lifetime() -> None:
    con = warehouse(instants=MEM, events=OPS)
    got = {r["event_index"]: r for r in _rows(con, "SELECT * FROM memory_allocations(?)")}
    assert set(got) == {100, 101, 103, 106}
    assert got[100]["op_name"] == "outer"  # an op starting at the event's time encloses it
    assert got[101]["op_name"] == "inner"  # innermost
    assert got[103]["op_name"] == "outer"  # ends_at_40 ended at t=40: not enclosing
    assert got[106]["op_name"] is None  # inside an annotation only: not an operator
    assert (got[100]["free_ts_ns"], got[100]["lifetime_ns"], got[100]["free_seq"]) == (30, 20, 3)
    assert got[101]["free_ts_ns"] is None and got[101]["lifetime_ns"] is None
    assert got[101]["op_event_index"] == 2 and got[101]["op_ts_ns"] == 15 and got[101]["op_dur_ns"] == 10


def test_peak_holders_and_largest_allocations() -> None:
    con = warehouse(instants=MEM, events=OPS)
    holders = _rows(con, "SELECT * FROM memory_peak_holders(?)")
    got = [(r["origin"], r["op_name"], r["allocations"], r["live_bytes"], r["rank"]) for r in holders]
    assert got == [("before_trace", None, None, 100, 1), ("traced", "outer", 1, 60, 2),
                   ("traced", "inner", 1, 30, 3)]
    assert holders[0]["share_of_peak"] == pytest.approx(100 / 190)
    assert sum(r["live_bytes"] for r in holders) == 190
    top = _rows(con, "SELECT * FROM memory_peak_allocations(?, n := 1)")
    assert [(r["event_index"], r["bytes"], r["op_name"], r["rank"]) for r in top] == [(103, 60, "outer", 1)]
    assert (top[0]["age_at_peak_ns"], top[0]["lifetime_ns"], top[0]["peak_allocated_ts_ns"]) == (0, 20, 40)


def test_devices_apart_and_missing_totals_use_a_running_sum() -> None:
    rows = [*MEM, _mem(200, 15, 8, 0x1, None, dev=CPU, reserved=None),
            _mem(201, 25, 4, 0x2, None, dev=CPU, reserved=None),
            _mem(202, 35, -8, 0x1, None, dev=CPU, reserved=None)]
    con = warehouse(instants=rows)
    by = {r["device_name"]: r for r in _rows(con, "SELECT * FROM memory_summary(?)")}
    assert set(by) == {"cuda:0", "cpu"}
    cpu = by["cpu"]
    assert (cpu["device_type"], cpu["device"], cpu["events"]) == ("cpu", -1, 3)
    assert (cpu["start_allocated_bytes"], cpu["peak_allocated_bytes"], cpu["end_allocated_bytes"]) == (0, 12, 4)
    assert cpu["peak_reserved_bytes"] is None and cpu["peak_reserved_ts_ns"] is None
    assert by["cuda:0"]["peak_allocated_bytes"] == 190


def test_peak_ties_take_the_first_event_and_null_addresses_never_pair() -> None:
    rows = [_mem(1, 10, 50, None, 50), _mem(2, 20, -50, None, 0), _mem(3, 30, 50, 0x9, 50)]
    con = warehouse(instants=rows)
    (s,) = _rows(con, "SELECT * FROM memory_summary(?)")
    assert (s["peak_allocated_ts_ns"], s["unpaired_frees"], s["live_at_end_allocations"]) == (10, 1, 2)


STEPS = [{"step": 1, "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts_ns": 100, "dur_ns": 100},
         {"step": 2, "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts_ns": 200, "dur_ns": 100},
         {"step": 3, "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts_ns": 300, "dur_ns": 100}]  # fmt: skip


def _leaky(leak: int) -> list[dict[str, Any]]:
    """Before the trace 1000 bytes; each step allocates 500, frees it, and keeps ``leak``."""
    rows, total, i = [], 1000, 0
    for k in range(3):
        base = 100 * (k + 1)
        for ts, nbytes, addr in ((base + 10, 500, 0x10), (base + 20, leak, 0x100 + k), (base + 30, -500, 0x10)):
            if nbytes:
                total += nbytes
                rows.append(_mem(i, ts, nbytes, addr, total, reserved=4000 + 100 * k))
                i += 1
    rows.append(_mem(i, 50, 0, 0x1, 1000))  # a 0-byte event before the first step
    return rows


def test_steps_levels_growth_and_retained() -> None:
    con = warehouse(instants=_leaky(64), steps=STEPS)
    got = _rows(con, "SELECT * FROM memory_steps(?)")
    assert [r["step"] for r in got] == [1, 2, 3]
    assert [r["start_allocated_bytes"] for r in got] == [1000, 1064, 1128]
    assert [r["end_allocated_bytes"] for r in got] == [1064, 1128, 1192]
    assert [r["peak_allocated_bytes"] for r in got] == [1564, 1628, 1692]
    assert [r["peak_allocated_ts_ns"] for r in got] == [120, 220, 320]
    assert [r["peak_reserved_bytes"] for r in got] == [4000, 4100, 4200]
    assert [r["net_bytes"] for r in got] == [64, 64, 64]
    assert [(r["retained_allocations"], r["retained_bytes"]) for r in got] == [(1, 64)] * 3
    assert [r["peak_growth_bytes"] for r in got] == [None, 64, 64]
    assert [(r["events"], r["allocations"], r["frees"]) for r in got] == [(3, 2, 1)] * 3
    assert [(r["start_ns"], r["wall_ns"]) for r in got] == [(100, 100), (200, 100), (300, 100)]
    (leak,) = _rows(con, "SELECT * FROM memory_leak_check(?)")
    assert (leak["steps"], leak["first_peak_bytes"], leak["last_peak_bytes"]) == (3, 1564, 1692)
    assert (leak["growth_per_step_bytes"], leak["rising_steps"], leak["retaining_steps"]) == (64, 2, 3)
    assert leak["rising_openings"] == 2
    assert leak["leak_suspect"] is True


def test_no_leak_and_a_step_without_events_keeps_its_opening_level() -> None:
    steps = [*STEPS, {"step": 4, "name": "ProfilerStep#4", "pid": 1, "tid": 1, "ts_ns": 500, "dur_ns": 50}]
    con = warehouse(instants=_leaky(0), steps=steps)
    got = _rows(con, "SELECT * FROM memory_steps(?)")
    last = got[-1]
    assert (last["step"], last["events"], last["start_allocated_bytes"], last["peak_allocated_bytes"]) == (4, 0, 1000, 1000)
    assert (last["peak_allocated_ts_ns"], last["peak_reserved_bytes"], last["peak_growth_bytes"]) == (500, 4200, -500)
    (leak,) = _rows(con, "SELECT * FROM memory_leak_check(?)")
    assert (leak["rising_steps"], leak["retaining_steps"], leak["leak_suspect"]) == (0, 0, False)
    assert leak["rising_openings"] == 0


def test_rising_peaks_without_kept_memory_are_no_leak_and_a_leak_between_steps_is_one() -> None:
    # steps [100, 150), [200, 250), [300, 350); peaks 1100, 1200, 1300 by bigger temporaries,
    # every step freeing them: no leak
    steps = [dict(s, dur_ns=50) for s in STEPS]
    rows, i = [], 0
    for k in range(3):
        base = 100 * (k + 1)
        for ts, nbytes, total in ((base + 10, 100 * (k + 1), 1000 + 100 * (k + 1)), (base + 30, -100 * (k + 1), 1000)):
            rows.append(_mem(i, ts, nbytes, 0x10, total))
            i += 1
    (leak,) = _rows(warehouse(instants=rows, steps=steps), "SELECT * FROM memory_leak_check(?)")
    assert (leak["rising_steps"], leak["rising_openings"], leak["leak_suspect"]) == (2, 0, False)
    # 64 bytes kept between the steps (at t=175, 275: outside every window): each step opens higher
    between = [_mem(50 + k, 175 + 100 * k, 64, 0x900 + k, 1064 + 64 * k) for k in range(2)]
    shifted = [dict(r, total_allocated=r["total_allocated"] + 64 * ((r["ts_ns"] - 100) // 100)) for r in rows]
    (leak,) = _rows(warehouse(instants=shifted + between, steps=steps), "SELECT * FROM memory_leak_check(?)")
    assert (leak["rising_steps"], leak["rising_openings"], leak["retaining_steps"]) == (2, 2, 0)
    assert leak["leak_suspect"] is True


def test_timeline_buckets_keep_the_peak() -> None:
    con = warehouse(instants=MEM, runs=[{"run_id": RUN, "ingest_id": "ing-1", "start_ns": 0, "end_ns": 99}])
    got = _rows(con, "SELECT * FROM memory_timeline(?, buckets := 2)")
    assert [(r["bucket"], r["ts_ns"], r["end_ns"], r["events"]) for r in got] == [(0, 0, 50, 4), (1, 50, 100, 3)]
    # the level a bucket opens with counts (190 was held until t=50)
    assert [r["max_allocated_bytes"] for r in got] == [190, 190]
    assert [r["min_allocated_bytes"] for r in got] == [100, 30]
    assert [r["allocated_bytes"] for r in got] == [190, 35]
    one = _rows(con, "SELECT * FROM memory_timeline(?, buckets := 1)")
    assert (one[0]["max_allocated_bytes"], one[0]["min_allocated_bytes"], one[0]["events"]) == (190, 30, 7)


def test_run_memory_view_per_run_and_device() -> None:
    rows = _leaky(64) + [dict(r, run_id="run-b", total_allocated=r["total_allocated"] * 2) for r in _leaky(0)]
    steps = STEPS + [dict(s, run_id="run-b") for s in STEPS[:2]]
    con = warehouse(instants=rows, steps=steps)
    got = {r["run_id"]: r for r in query(con, "SELECT * FROM run_memory").iter_rows(named=True)}
    assert got[RUN]["n_steps"] == 3 and got[RUN]["peak_allocated_per_step_bytes"] == 1692
    assert got["run-b"]["n_steps"] == 2 and got["run-b"]["peak_allocated_per_step_bytes"] == 3000
    assert got["run-b"]["peak_allocated_bytes"] == 3000 and got[RUN]["peak_reserved_bytes"] == 4200


def test_other_instants_and_runs_are_ignored_and_empty_runs_give_no_rows() -> None:
    other = {"event_index": 9, "ph": "i", "name": "Iteration Start: PyTorch Profiler", "ts_ns": 1}
    con = warehouse(instants=[*MEM, other, dict(MEM[0], run_id="other-run")])
    assert query(con, "SELECT count(*) AS n FROM memory_events(?)", [RUN])["n"][0] == 7
    for macro in ("memory_events", "memory_allocations", "memory_summary", "memory_peak_holders",
                  "memory_peak_allocations", "memory_steps", "memory_leak_check", "memory_timeline"):
        assert query(con, f"SELECT * FROM {macro}(?)", ["nope"]).is_empty(), macro
    assert warehouse().execute("SELECT * FROM run_memory").fetchall() == []


MODULES = [
    {"event_index": 50, "pid": 1, "tid": 1, "ts_ns": 5, "dur_ns": 60, "name": "Net_0",
     "module_path": "Net_0", "depth": 1, "parent_event_index": None},
    {"event_index": 51, "pid": 1, "tid": 1, "ts_ns": 18, "dur_ns": 10, "name": "Linear_1",
     "module_path": "Net_0/Linear_1", "depth": 2, "parent_event_index": 50},
]  # fmt: skip


def test_module_of_each_allocation_and_holders_by_module() -> None:
    con = warehouse(instants=MEM, events=OPS, module_spans=MODULES)
    got = {r["event_index"]: r["module_path"] for r in _rows(con, "SELECT * FROM memory_allocations(?)")}
    # t=10 and t=40 inside Net_0 only, t=20 inside Linear_1, t=70 on another thread
    assert got == {100: "Net_0", 101: "Net_0/Linear_1", 103: "Net_0", 106: None}
    ops = _rows(con, "SELECT * FROM memory_peak_holders(?)")
    assert [(r["origin"], r["module_path"], r["op_name"], r["live_bytes"]) for r in ops] == [
        ("before_trace", None, None, 100), ("traced", "Net_0", "outer", 60),
        ("traced", "Net_0/Linear_1", "inner", 30)]
    mods = _rows(con, "SELECT * FROM memory_peak_holders(?, level := 'module')")
    assert [(r["module_path"], r["op_name"], r["live_bytes"]) for r in mods] == [
        (None, None, 100), ("Net_0", None, 60), ("Net_0/Linear_1", None, 30)]
    (s,) = _rows(con, "SELECT * FROM memory_summary(?)")
    assert (s["top_module_path"], s["top_module_live_bytes"]) == ("Net_0", 60)
    (top,) = _rows(con, "SELECT * FROM memory_peak_allocations(?, n := 1)")
    assert top["module_path"] == "Net_0"
    assert query(con, "SELECT * FROM memory_peak_holders(?, level := 'nope')", [RUN]).is_empty()
