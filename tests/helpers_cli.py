"""Tiny hand-written Kineto traces for the CLI tests, and plain-json expectations over them.

A trace is one ``ProfilerStep#0`` on one thread; each :class:`Launch` is a CPU operator (with
``Input Dims``) enclosing a ``cudaLaunchKernel`` whose kernel runs on stream 7 of device 0.
Times are µs offsets from ``T0`` (an epoch-based start, as Kineto writes), so everything a test
expects is computed here from the event dicts with plain loops, never by tracewh.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

#: 2023-11-14 22:13:20 UTC, in µs (Kineto's epoch-based timestamps).
T0 = 1_700_000_000_000_000


@dataclass(frozen=True)
class Launch:
    """A CPU operator launching one kernel (offsets and durations in µs)."""

    op: str
    dims: Sequence[Any]
    kernel: str
    launch_at: float  # start of the cudaLaunchKernel, after T0
    gpu_at: float  # kernel start on the GPU
    gpu_dur: float


def trace_events(
    launches: Sequence[Launch], *, step_dur: float = 1000.0, t0: int = T0
) -> list[dict[str, Any]]:
    """The traceEvents of a one-step trace starting at ``t0`` (µs) running ``launches``."""
    events: list[dict[str, Any]] = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#0", "pid": 10, "tid": 10,
         "ts": t0, "dur": step_dur, "args": {"External id": 1}},
    ]
    for i, ln in enumerate(launches):
        corr = 100 + i
        ext = 10 + i
        events.append({"ph": "X", "cat": "cpu_op", "name": ln.op, "pid": 10, "tid": 10,
                       "ts": t0 + ln.launch_at - 1, "dur": 8,
                       "args": {"External id": ext, "Input Dims": list(ln.dims)}})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10,
                       "tid": 10, "ts": t0 + ln.launch_at, "dur": 5,
                       "args": {"External id": ext, "correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": ln.kernel, "pid": 0, "tid": 7,
                       "ts": t0 + ln.gpu_at, "dur": ln.gpu_dur,
                       "args": {"External id": ext, "correlation": corr, "device": 0,
                                "stream": 7}})
    return events


def write_trace(
    path: Path, launches: Sequence[Launch], *, device: str = "NVIDIA H100 80GB HBM3",
    rank: int | None = None, step_dur: float = 1000.0, t0: int = T0,
) -> list[dict[str, Any]]:
    """Write the trace to ``path`` (plain JSON); returns its events."""
    events = trace_events(launches, step_dur=step_dur, t0=t0)
    doc: dict[str, Any] = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": device}],
                           "traceEvents": events}
    if rank is not None:
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc), encoding="utf-8")
    return events


def ns(us: float | int) -> int:
    """µs (as written in the JSON) to exact ns."""
    return int(Decimal(str(us)) * 1000)


def start_ns(events: Sequence[dict[str, Any]]) -> int:
    """The run's start: the earliest event start."""
    return min(ns(e["ts"]) for e in events)


def largest_gap(events: Sequence[dict[str, Any]]) -> tuple[int, int, int]:
    """(gap_ns, gap_start_ns, gap_end_ns) of the largest gap between kernels of a stream."""
    ops = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events if e["cat"] == "kernel")
    best = (0, 0, 0)
    end = ops[0][1]
    for s, e in ops[1:]:
        if s - end > best[0]:
            best = (s - end, end, s)
        end = max(end, e)
    return best


def op_time(events: Sequence[dict[str, Any]]) -> dict[str, int]:
    """GPU ns per "op_name dims" group: each kernel goes to the innermost CPU op enclosing its launch."""
    launches = {e["args"]["correlation"]: e for e in events if e["cat"] == "cuda_runtime"}
    ops = [e for e in events if e["cat"] == "cpu_op"]
    out: dict[str, int] = {}
    for k in (e for e in events if e["cat"] == "kernel"):
        launch = launches[k["args"]["correlation"]]
        t = ns(launch["ts"])
        enclosing = [o for o in ops if o["tid"] == launch["tid"] and ns(o["ts"]) <= t < ns(o["ts"]) + ns(o["dur"])]
        op = max(enclosing, key=lambda o: ns(o["ts"]))
        key = f"{op['name']} {json.dumps(op['args']['Input Dims'], separators=(',', ':'))}"
        out[key] = out.get(key, 0) + ns(k["dur"])
    return out
