"""Each single-run analysis as a call of one ``sql/`` table macro, defined once.

:class:`~tracewh.api.Warehouse` turns a :class:`MacroCall` into a Polars frame
(``Warehouse.kernels(...)``), a printing command into plain rows
(``Warehouse.macro_relation(...).rows()``) without importing Polars; both take the macro and
its parameters from the functions here, which also check the options (their defaults and
choices: :mod:`tracewh.query.options`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tracewh.core.errors import UsageError
from tracewh.query.options import (
    KERNEL_GROUPS,
    KERNEL_ORDERS,
    LAUNCH_VIEWS,
    AnnotationsOptions,
    GapsOptions,
    KernelsOptions,
    LaunchesOptions,
    ModulesOptions,
    OpsOptions,
    StepsOptions,
)

__all__ = [
    "DIFF_LEVELS", "GRAPH_MACROS", "MacroCall", "annotation_tree", "breakdown", "gaps", "graph_match",
    "idle_breakdown",
    "kernels", "largest_gaps", "launches", "macro_sql", "memcpy", "modules", "ops", "queue_depth",
    "steps",
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
    *, cats: Sequence[str] | None = KernelsOptions.cats, group_by: str = KernelsOptions.group_by,
    by: str = KernelsOptions.by,
) -> MacroCall:
    """Kernel ranking (``kernel_ranking`` of ``sql/10_kernels.sql``)."""
    check_choice("group_by", group_by, KERNEL_GROUPS)
    check_choice("by", by, KERNEL_ORDERS)
    return MacroCall(
        "kernel_ranking",
        {"cats": list(cats) if cats else None, "group_by": group_by, "order_by": by},
    )


def gaps(*, threshold_ns: int = GapsOptions.threshold_ns) -> MacroCall:
    """Stream gaps and idle breakdown per (device, stream) (``stream_gaps``)."""
    return MacroCall("stream_gaps", {"kernel_wait_threshold_ns": threshold_ns})


def largest_gaps(
    *, n: int = GapsOptions.largest, threshold_ns: int = GapsOptions.threshold_ns
) -> MacroCall:
    """The ``n`` largest gaps with the ops on either side (``largest_gaps``)."""
    return MacroCall("largest_gaps", {"n": n, "kernel_wait_threshold_ns": threshold_ns})


def idle_breakdown(*, threshold_ns: int = GapsOptions.threshold_ns) -> MacroCall:
    """Idle time by kind per stream and per device (``idle_breakdown``)."""
    return MacroCall("idle_breakdown", {"kernel_wait_threshold_ns": threshold_ns})


_LAUNCHES = {
    "kernel": "launch_latency_by_kernel",
    "step": "launch_latency_by_step",
    "op": "launch_latency",
    "linkage": "launch_linkage",
    "graph": "graph_launches",
}

#: Macros that map CUDA/HIP graph replays to captures of the run's job (``sql/45_graphs.sql``):
#: their connection holds the days of the job's capture and replay runs too.
GRAPH_MACROS = frozenset({
    "graph_launches", "graph_replay", "graph_replay_map", "graph_match", "gpu_ops_attributed",
    "op_gpu_time",
    "module_tree", "module_gpu_time", "annotation_tree", "annotation_gpu_time",
    "attribution_tree", "attribution_time",
})


def launches(*, by: str = LaunchesOptions.by) -> MacroCall:
    """Launch latency per kernel name, per step, per launch, the linkage, or per graph launch.

    A CUDA/HIP graph launch is one launch, measured to its first replayed op (``by="graph"``:
    one row per graph launch with the capture it maps to, ``graph_launches``).
    """
    check_choice("by", by, LAUNCH_VIEWS)
    return MacroCall(_LAUNCHES[by])


def graph_match() -> MacroCall:
    """How a run's graph replays map to captures, in one row (``graph_match``)."""
    return MacroCall("graph_match")


def queue_depth() -> MacroCall:
    """Outstanding GPU ops per stream (``queue_depth``)."""
    return MacroCall("queue_depth")


def steps(*, threshold_ns: int = StepsOptions.threshold_ns) -> MacroCall:
    """Per step: wall time, GPU busy/idle, top kernel, bound (``step_summary``)."""
    return MacroCall("step_summary", {"kernel_wait_threshold_ns": threshold_ns})


def ops(*, cpu: bool = OpsOptions.cpu) -> MacroCall:
    """GPU time per CPU operator and shapes (``op_gpu_time``), or CPU op time (``cpu_op_time``)."""
    return MacroCall("cpu_op_time" if cpu else "op_gpu_time")


def modules(*, depth: int | None = ModulesOptions.depth, top: int | None = None) -> MacroCall:
    """GPU time per nn.Module as a tree (``module_tree`` of ``sql/55_modules.sql``).

    Parameters
    ----------
    depth
        Cut module paths after ``depth`` names (None: full paths).
    top
        Keep the ``top`` nodes of largest GPU time (with their ancestors).

    Returns
    -------
    MacroCall
        Its rows: one per node, depth first: module_path, name, depth, calls, kernels,
        gpu_ns (inclusive), self_gpu_ns, pct.
    """
    _check_tree(depth, top)
    return MacroCall("module_tree", {"max_depth": depth, "top": top})


def annotation_tree(
    *, gpu: bool = AnnotationsOptions.gpu, depth: int | None = AnnotationsOptions.depth,
    top: int | None = None,
) -> MacroCall:
    """GPU time per user annotation as a tree (``annotation_tree``, ``sql/56_annotations.sql``).

    ``gpu=False``: the ``user_annotation`` spans (``record_function``) enclosing each
    kernel's launch on its thread; ``gpu=True``: the ``gpu_user_annotation`` spans
    enclosing each kernel's start on its GPU track. ``depth`` and ``top`` as in
    :func:`modules`. Columns: annotation_path, name, depth, calls, kernels, gpu_ns
    (inclusive), self_gpu_ns, pct.
    """
    _check_tree(depth, top)
    source = "gpu_user_annotation" if gpu else "user_annotation"
    return MacroCall("annotation_tree", {"source": source, "max_depth": depth, "top": top})


def _check_tree(depth: int | None, top: int | None) -> None:
    if depth is not None and depth < 1:
        raise UsageError("--depth must be at least 1")
    if top is not None and top < 1:
        raise UsageError("--top must be at least 1")


def memcpy() -> MacroCall:
    """Memory copies per kind (``memcpy_summary``)."""
    return MacroCall("memcpy_summary")


def breakdown() -> MacroCall:
    """GPU time per device: compute, communication, memcpy, idle (``gpu_time_breakdown``)."""
    return MacroCall("gpu_time_breakdown")


def macro_sql(name: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """``SELECT * FROM name($first, key := $key, ...)`` and its parameters (``first`` to add)."""
    if not name.isidentifier():
        raise UsageError(f"not a macro name: {name!r}")
    named = "".join(f", {k} := ${k}" for k in params)
    return f"SELECT * FROM {name}($first{named})", dict(params)
