"""Each single-run analysis as a call of one ``sql/`` table macro, defined once.

:class:`~tracewh.api.Warehouse` turns a :class:`MacroCall` into a Polars frame
(``Warehouse.kernels(...)``), a printing command into plain rows
(``Warehouse.macro_rows``) without importing Polars; both take the macro and
its parameters from the functions here, which also check the options.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tracewh.errors import UsageError

__all__ = [
    "DIFF_LEVELS", "MacroCall", "breakdown", "gaps", "idle_breakdown", "kernels", "largest_gaps", "launches",
    "memcpy", "ops", "queue_depth", "steps",
]


#: Grouping levels of a diff (``op``: CPU operator and input shapes, across hardware).
DIFF_LEVELS = ("kernel", "short_name", "category", "op")


@dataclass(frozen=True)
class MacroCall:
    """``SELECT * FROM name(run_id, key := value, ...)`` for one run."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)


def check_choice(what: str, value: str, choices: tuple[str, ...]) -> None:
    """Raise :class:`UsageError` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise UsageError(f"{what} must be one of {', '.join(choices)}, not {value!r}")


def kernels(
    *, cats: Sequence[str] | None = None, group_by: str = "name", by: str = "total"
) -> MacroCall:
    """Kernel ranking (``kernel_ranking`` of ``sql/10_kernels.sql``)."""
    check_choice("group_by", group_by, ("name", "short_name", "category"))
    check_choice("by", by, ("total", "mean", "max", "calls"))
    return MacroCall(
        "kernel_ranking",
        {"cats": list(cats) if cats else None, "group_by": group_by, "order_by": by},
    )


def gaps(*, threshold_ns: int = 30_000) -> MacroCall:
    """Stream gaps and idle breakdown per (device, stream) (``stream_gaps``)."""
    return MacroCall("stream_gaps", {"kernel_wait_threshold_ns": threshold_ns})


def largest_gaps(*, n: int = 20, threshold_ns: int = 30_000) -> MacroCall:
    """The ``n`` largest gaps with the ops on either side (``largest_gaps``)."""
    return MacroCall("largest_gaps", {"n": n, "kernel_wait_threshold_ns": threshold_ns})


def idle_breakdown(*, threshold_ns: int = 30_000) -> MacroCall:
    """Idle time by kind per stream and per device (``idle_breakdown``)."""
    return MacroCall("idle_breakdown", {"kernel_wait_threshold_ns": threshold_ns})


_LAUNCHES = {
    "kernel": "launch_latency_by_kernel",
    "step": "launch_latency_by_step",
    "op": "launch_latency",
    "linkage": "launch_linkage",
}


def launches(*, by: str = "kernel") -> MacroCall:
    """Launch latency per kernel name, per step, per GPU op, or the linkage summary."""
    check_choice("by", by, tuple(_LAUNCHES))
    return MacroCall(_LAUNCHES[by])


def queue_depth() -> MacroCall:
    """Outstanding GPU ops per stream (``queue_depth``)."""
    return MacroCall("queue_depth")


def steps(*, threshold_ns: int = 30_000) -> MacroCall:
    """Per step: wall time, GPU busy/idle, top kernel, bound (``step_summary``)."""
    return MacroCall("step_summary", {"kernel_wait_threshold_ns": threshold_ns})


def ops(*, cpu: bool = False) -> MacroCall:
    """GPU time per CPU operator and shapes (``op_gpu_time``), or CPU op time (``cpu_op_time``)."""
    return MacroCall("cpu_op_time" if cpu else "op_gpu_time")


def memcpy() -> MacroCall:
    """Memory copies per kind (``memcpy_summary``)."""
    return MacroCall("memcpy_summary")


def breakdown() -> MacroCall:
    """GPU time per device: compute, communication, memcpy, idle (``gpu_time_breakdown``)."""
    return MacroCall("gpu_time_breakdown")
