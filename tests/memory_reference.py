"""An independent, plain-``json`` computation of the memory analyses, for the tests.

It reads a Kineto trace with :mod:`json` (timestamps kept exact through ``Decimal``) and
computes, with loops and dicts, what ``sql/65_memory.sql`` computes with window
functions and ASOF joins: per device the peak and its live set, frees paired with
allocations by address, each allocation's innermost enclosing CPU operator (with a
stack per thread instead of the SQL's depth sweep) and its module path (every
``nn.Module`` span open on the thread, by brute force), and per ProfilerStep the peak.
Each allocation's innermost enclosing ``python_function`` too (the SQL has no such
column: the tests use it to say what allocates outside any operator).
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

OP_CATS = ("cpu_op", "Operator")
MODULE_PREFIX = "nn.Module: "
DEVICE_KINDS = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 19: "mtia"}


def _ns(v: Any) -> int:
    return int(Decimal(v) * 1000)


@dataclass
class Mem:
    """One [memory] event."""

    index: int
    pid: int | None
    tid: int | None
    ts: int
    nbytes: int
    addr: int | None
    allocated: int
    reserved: int | None
    seq: int = 0
    pair: Mem | None = None
    op: str | None = None
    op_index: int | None = None
    module: str | None = None
    python: str | None = None  # innermost enclosing python_function


@dataclass
class Device:
    """One device's events, in order, and what the reference derives from them."""

    key: tuple[int, int]
    events: list[Mem] = field(default_factory=list)

    @property
    def name(self) -> str:
        kind = DEVICE_KINDS.get(self.key[0], f"type{self.key[0]}")
        return "cpu" if self.key[0] == 0 else f"{kind}:{self.key[1]}"

    @property
    def allocs(self) -> list[Mem]:
        return [e for e in self.events if e.nbytes > 0]

    @property
    def frees(self) -> list[Mem]:
        return [e for e in self.events if e.nbytes < 0]

    @property
    def peak(self) -> Mem:
        best = self.events[0]
        for e in self.events:
            if e.allocated > best.allocated:
                best = e
        return best

    def live_at(self, seq: int) -> list[Mem]:
        """Traced allocations made at or before ``seq`` and not freed by then."""
        return [a for a in self.allocs if a.seq <= seq and (a.pair is None or a.pair.seq > seq)]

    def level_before(self, ts: int) -> int:
        """Allocated just before time ``ts`` (after the latest earlier event)."""
        level = self.events[0].allocated - self.events[0].nbytes
        for e in self.events:
            if e.ts >= ts:
                break
            level = e.allocated
        return level

    def reserved_before(self, ts: int) -> int | None:
        level = self.events[0].reserved
        for e in self.events:
            if e.ts >= ts:
                break
            level = e.reserved
        return level


@dataclass
class Reference:
    """What a trace holds, memory-wise."""

    start_ns: int
    devices: dict[str, Device]
    steps: dict[int, tuple[int, int]]  # step -> [start, end) of its window


def _load(path: Path) -> dict[str, Any]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        doc: dict[str, Any] = json.load(f, parse_float=Decimal)
    return doc


def reference(path: Path) -> Reference:
    """The memory reference of the trace at ``path``."""
    doc = _load(path)
    base = int(doc.get("baseTimeNanoseconds") or 0)
    by_dev: dict[tuple[int, int], list[Mem]] = defaultdict(list)
    ops: dict[tuple[int, int], list[tuple[int, int, int, str]]] = defaultdict(list)
    modules: dict[tuple[int, int], list[tuple[int, int, str]]] = defaultdict(list)
    python: dict[tuple[int, int], list[tuple[int, int, int, str]]] = defaultdict(list)
    steps: dict[int, tuple[int, int, int]] = {}
    start: int | None = None
    for i, e in enumerate(doc["traceEvents"]):
        if not isinstance(e, dict) or e.get("ts") is None:
            continue
        ts = _ns(e["ts"]) + base
        if e.get("ph") != "M":
            start = ts if start is None else min(start, ts)
        args = e.get("args") or {}
        if e.get("ph") in ("i", "I") and e.get("name") == "[memory]":
            if args.get("Bytes") is None or args.get("Device Type") is None:
                continue
            ta = args.get("Total Allocated")
            by_dev[(int(args["Device Type"]), int(args["Device Id"]))].append(Mem(
                i, e.get("pid"), e.get("tid"), ts, int(args["Bytes"]),
                None if args.get("Addr") is None else int(args["Addr"]),
                -1 if ta is None else int(ta),
                None if args.get("Total Reserved") is None else int(args["Total Reserved"]),
            ))
        elif e.get("ph") == "X" and e.get("dur") is not None:
            dur = _ns(e["dur"])
            name = str(e.get("name"))
            m = re.fullmatch(r"ProfilerStep#(\d+)", name)
            if m and e.get("cat") != "gpu_user_annotation":
                n = int(m.group(1))
                if n not in steps or dur > steps[n][1] - steps[n][0]:
                    steps[n] = (ts, ts + dur, i)
            elif (e.get("cat") in OP_CATS and dur > 0 and isinstance(e.get("pid"), int)
                  and isinstance(e.get("tid"), int)):
                ops[(e["pid"], e["tid"])].append((ts, ts + dur, i, name))
            elif (e.get("cat") == "python_function" and dur > 0
                  and isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int)):
                python[(e["pid"], e["tid"])].append((ts, ts + dur, i, name))
                if name.startswith(MODULE_PREFIX):
                    modules[(e["pid"], e["tid"])].append((ts, ts + dur, name[len(MODULE_PREFIX):]))
    devices: dict[str, Device] = {}
    for key, evs in by_dev.items():
        evs.sort(key=lambda m: (m.ts, m.index))
        if all(m.allocated == -1 for m in evs):
            run = 0
            for m in evs:
                run += m.nbytes
                m.allocated = run
        last: dict[int, Mem] = {}
        for seq, m in enumerate(evs, 1):
            m.seq = seq
            if m.addr is None:
                continue
            prev = last.get(m.addr)
            if m.nbytes < 0 and prev is not None and prev.nbytes > 0:
                m.pair, prev.pair = prev, m
            last[m.addr] = m
        dev = Device(key, evs)
        devices[dev.name] = dev
    for a, (_, _, index, name) in _innermost(devices, ops):
        a.op, a.op_index = name, index
    for a, (_, _, _, name) in _innermost(devices, python):
        a.python = name
    for dev in devices.values():
        for a in dev.allocs:
            # every nn.Module span open on the thread at the allocation, outermost first
            spans = sorted((m for m in modules.get((a.pid, a.tid), []) if m[0] <= a.ts < m[1]),
                           key=lambda m: (m[0], -m[1]))
            a.module = "/".join(m[2] for m in spans) if spans else None
    return Reference(start or 0, devices, {n: (s, e) for n, (s, e, _) in steps.items()})


def _innermost(
    devices: dict[str, Device], spans: dict[tuple[int, int], list[tuple[int, int, int, str]]]
) -> list[tuple[Mem, tuple[int, int, int, str]]]:
    """Each allocation's innermost enclosing span (start, end, index, name) of its thread,
    where one is open: a stack per thread."""
    out: list[tuple[Mem, tuple[int, int, int, str]]] = []
    allocs: dict[tuple[int, int], list[Mem]] = defaultdict(list)
    for dev in devices.values():
        for a in dev.allocs:
            if isinstance(a.pid, int) and isinstance(a.tid, int):
                allocs[(a.pid, a.tid)].append(a)
    for thread, items in allocs.items():
        items.sort(key=lambda m: m.ts)
        todo = sorted(spans.get(thread, []), key=lambda o: (o[0], -o[1], o[2]))
        stack: list[tuple[int, int, int, str]] = []
        j = 0
        for a in items:
            while j < len(todo) and todo[j][0] <= a.ts:
                while stack and stack[-1][1] <= todo[j][0]:
                    stack.pop()
                stack.append(todo[j])
                j += 1
            while stack and stack[-1][1] <= a.ts:
                stack.pop()
            if stack:
                out.append((a, stack[-1]))
    return out


def marker_steps(path: Path, pattern: str) -> dict[int, tuple[int, int]]:
    """Step windows of ``--step-marker pattern``: the outermost cpu_op/user_annotation spans
    whose name contains ``pattern``, per thread, numbered from 0 by start time."""
    doc = _load(path)
    base = int(doc.get("baseTimeNanoseconds") or 0)
    spans = sorted(
        (_ns(e["ts"]) + base, _ns(e["ts"]) + base + _ns(e["dur"]), e.get("pid"), e.get("tid"))
        for e in doc["traceEvents"]
        if isinstance(e, dict) and e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
        and pattern in str(e.get("name")) and e.get("dur") is not None
    )
    outer = [s for s in spans if not any(o is not s and o[2:] == s[2:] and o[0] <= s[0] and s[1] <= o[1]
                                         and (o[0], -o[1]) < (s[0], -s[1]) for o in spans)]
    return {i: (s, e) for i, (s, e, _, _) in enumerate(outer)}


def step_rows(ref: Reference, dev: Device, windows: dict[int, tuple[int, int]] | None = None) -> list[dict[str, Any]]:
    """Per step of the trace (ProfilerStep, or the given windows): opening level, peak, counts."""
    rows = []
    prev_peak: int | None = None
    steps = ref.steps if windows is None else windows
    for n in sorted(steps):
        s, e = steps[n]
        opening = dev.level_before(s)
        inside = [m for m in dev.events if s <= m.ts < e]
        peak = max([opening, *(m.allocated for m in inside)])
        res = [r for r in [dev.reserved_before(s), *(m.reserved for m in inside)] if r is not None]
        end = inside[-1].allocated if inside else opening
        retained = [m for m in inside if m.nbytes > 0 and (m.pair is None or m.pair.ts >= e)]
        rows.append({
            "step": n, "start_allocated_bytes": opening, "end_allocated_bytes": end,
            "peak_allocated_bytes": peak, "peak_reserved_bytes": max(res) if res else None,
            "events": len(inside), "allocations": sum(1 for m in inside if m.nbytes > 0),
            "frees": sum(1 for m in inside if m.nbytes < 0),
            "allocated_bytes": sum(m.nbytes for m in inside if m.nbytes > 0),
            "net_bytes": end - opening, "retained_allocations": len(retained),
            "retained_bytes": sum(m.nbytes for m in retained),
            "peak_growth_bytes": None if prev_peak is None else peak - prev_peak,
        })
        prev_peak = peak
    return rows
