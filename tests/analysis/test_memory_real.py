"""The memory macros on the real traces with [memory] events, against plain-json loops.

``memory_reference`` reads each trace with :mod:`json` and pairs, attributes and sums
with loops and dicts; the warehouse side is the real ingest plus ``sql/65_memory.sql``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from memory_reference import Reference, reference, step_rows

from tracewh.api import Warehouse

#: the python_function of a buffer allocated by Inductor's generated code (no cpu_op around)
_INDUCTOR_ALLOC = re.compile(r"<built-in function _empty_strided_\w+>")

TRACES = [
    pytest.param("tracelens__mi300__bert-small-uncased.json.gz", id="mi300"),
    pytest.param("tracelens__h100__timesformer-base-k400.json.gz", id="h100"),
    pytest.param("df_index_resolver__df_index_resolver.json.gz", id="df_index"),
    pytest.param("tracelens__vllm_decode_full__capture_rank_0.pt.trace.json.gz", id="vllm",
                 marks=pytest.mark.slow),
]


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    return Warehouse(tmp_path_factory.mktemp("memreal") / "wh")


def _ingest(wh: Warehouse, path: Path) -> str:
    report = wh.ingest([path])
    result = report.results[0]
    assert result.run_id, result
    return result.run_id


@pytest.fixture(scope="module")
def loaded(wh: Warehouse, shared_traces: Path) -> dict[str, tuple[str, Reference]]:
    return {}


def _get(wh: Warehouse, loaded: dict[str, tuple[str, Reference]], root: Path, name: str) -> tuple[str, Reference]:
    if name not in loaded:
        loaded[name] = (_ingest(wh, root / name), reference(root / name))
    return loaded[name]


@pytest.mark.parametrize("name", TRACES)
def test_summary_matches_plain_json(wh: Warehouse, loaded: Any, shared_traces: Path, name: str) -> None:
    run_id, ref = _get(wh, loaded, shared_traces, name)
    got = {r["device_name"]: r for r in wh.memory(run_id).iter_rows(named=True)}
    assert set(got) == set(ref.devices) and got
    start = wh.sql("SELECT start_ns FROM runs WHERE run_id = ?", [run_id])["start_ns"][0]
    for dev_name, dev in ref.devices.items():
        s, peak = got[dev_name], dev.peak
        live = dev.live_at(peak.seq)
        reserved = [e.reserved for e in dev.events if e.reserved is not None]
        expected = {
            "device_type": "cpu" if dev.key[0] == 0 else "gpu",
            "device": dev.key[1],
            "events": len(dev.events),
            "allocations": len(dev.allocs),
            "frees": len(dev.frees),
            "allocated_bytes": sum(a.nbytes for a in dev.allocs),
            "freed_bytes": -sum(f.nbytes for f in dev.frees),
            "start_allocated_bytes": dev.events[0].allocated - dev.events[0].nbytes,
            "end_allocated_bytes": dev.events[-1].allocated,
            "peak_allocated_bytes": peak.allocated,
            "peak_allocated_ts_ns": peak.ts,
            "peak_offset_ns": peak.ts - start,
            "peak_reserved_bytes": max(reserved) if reserved else None,
            "peak_live_allocations": len(live),
            "peak_live_bytes": sum(a.nbytes for a in live),
            "peak_before_trace_bytes": peak.allocated - sum(a.nbytes for a in live),
            "unpaired_frees": sum(1 for f in dev.frees if f.pair is None),
            "live_at_end_allocations": sum(1 for a in dev.allocs if a.pair is None),
        }
        assert {k: s[k] for k in expected} == expected, dev_name
        # the allocator's own counter agrees with the events: nothing was lost in between
        assert dev.events[0].allocated - dev.events[0].nbytes + sum(e.nbytes for e in dev.events) == s["end_allocated_bytes"]


@pytest.mark.parametrize("name", TRACES)
def test_every_allocation_paired_and_attributed_as_plain_json(
    wh: Warehouse, loaded: Any, shared_traces: Path, name: str
) -> None:
    run_id, ref = _get(wh, loaded, shared_traces, name)
    got = wh.sql("SELECT * FROM memory_allocations(?)", [run_id])
    rows = {r["event_index"]: r for r in got.iter_rows(named=True)}
    n_ops = n_modules = n_inductor = 0
    for dev in ref.devices.values():
        for a in dev.allocs:
            r = rows.pop(a.index)
            assert (r["op_name"], r["op_event_index"]) == (a.op, a.op_index), a.index
            assert r["module_path"] == a.module, a.index
            n_modules += a.module is not None
            assert r["free_event_index"] == (a.pair.index if a.pair else None), a.index
            # every free frees its allocation's size: pairing by address and size (as HTA's
            # MemoryAnalysis does) pairs these traces the same way
            assert a.pair is None or a.pair.nbytes == -a.nbytes, a.index
            assert r["lifetime_ns"] == (a.pair.ts - a.ts if a.pair else None)
            n_ops += a.op is not None
            n_inductor += a.op is None and _INDUCTOR_ALLOC.fullmatch(a.python or "") is not None
    assert not rows
    # nearly every allocation happens inside an operator, but for the buffers of Inductor's
    # compiled graphs (torch.compile: vllm's 73 of 592), allocated by torch's
    # _empty_strided_<device> straight from the generated code, outside the dispatcher
    assert n_ops + n_inductor > 0.9 * got.height
    if name.startswith("tracelens__h100") or name.startswith("tracelens__mi300"):
        assert n_modules > 0.5 * got.height  # traces recorded with module spans


@pytest.mark.parametrize("name", TRACES)
def test_peak_holders_and_largest_live_allocations(
    wh: Warehouse, loaded: Any, shared_traces: Path, name: str
) -> None:
    run_id, ref = _get(wh, loaded, shared_traces, name)
    holders = wh.memory(run_id, view="peak", top=10_000)
    modules = wh.memory(run_id, view="modules", top=10_000)
    largest = wh.memory(run_id, view="allocations", top=5)
    for dev_name, dev in ref.devices.items():
        peak = dev.peak
        live = dev.live_at(peak.seq)
        by_op: dict[tuple[str | None, str | None], int] = defaultdict(int)
        by_module: dict[str | None, int] = defaultdict(int)
        for a in live:
            by_op[(a.module, a.op)] += a.nbytes
            by_module[a.module] += a.nbytes
        mine = holders.filter(holders["device_name"] == dev_name)
        traced = {(r["module_path"], r["op_name"]): r["live_bytes"]
                  for r in mine.iter_rows(named=True) if r["origin"] == "traced"}
        assert traced == dict(by_op)
        mods = modules.filter(modules["device_name"] == dev_name)
        assert {r["module_path"]: r["live_bytes"] for r in mods.iter_rows(named=True)
                if r["origin"] == "traced"} == dict(by_module)
        assert mods["live_bytes"].sum() == peak.allocated
        assert mine["live_bytes"].sum() == peak.allocated
        top = sorted(live, key=lambda a: (-a.nbytes, a.seq))[:5]
        rows = largest.filter(largest["device_name"] == dev_name)
        assert rows["event_index"].to_list() == [a.index for a in top]
        assert rows["age_at_peak_ns"].to_list() == [peak.ts - a.ts for a in top]


@pytest.mark.parametrize("name", TRACES)
def test_steps_and_timeline_match_plain_json(wh: Warehouse, loaded: Any, shared_traces: Path, name: str) -> None:
    run_id, ref = _get(wh, loaded, shared_traces, name)
    steps = wh.memory(run_id, view="steps")
    timeline = wh.memory(run_id, view="timeline", buckets=50)
    for dev_name, dev in ref.devices.items():
        mine = steps.filter(steps["device_name"] == dev_name).sort("step")
        expected = step_rows(ref, dev)
        assert [{k: r[k] for k in e} for r, e in zip(mine.iter_rows(named=True), expected, strict=True)] == expected
        tl = timeline.filter(timeline["device_name"] == dev_name)
        assert tl["events"].sum() == len(dev.events)
        assert tl["max_allocated_bytes"].max() == dev.peak.allocated
        assert tl["allocated_bytes"][-1] == dev.events[-1].allocated
    assert (steps.height > 0) == bool(ref.steps)
