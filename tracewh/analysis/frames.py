"""Per-run analyses as Polars LazyFrames: the pure-Polars definitions of some SQL macros.

:meth:`tracewh.api.Warehouse.frame` returns them over a run's ``gpu_ops`` (scanned from the
snapshot's files, :func:`tracewh.query.scan.scan`), for callers who go on in Polars (lazily,
joined with their own frames). Each is computed by the function of :mod:`tracewh.analysis`
named after its SQL table macro, with the macro's option names; parity tests
(``tests/analysis/test_frames.py`` and the SQL tests of each family) assert that both give
the same rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from tracewh.analysis.gaps import gap_kinds, gpu_op_gaps, idle_breakdown, stream_gaps
from tracewh.analysis.kernels import kernel_ranking
from tracewh.analysis.launches import launch_latency, launch_latency_by_kernel
from tracewh.core.errors import UsageError

__all__ = ["FRAMES", "frame"]

#: SQL table macro name -> its Polars definition (``gpu_ops`` of one run in, a LazyFrame out).
FRAMES: dict[str, Callable[..., pl.LazyFrame]] = {
    "kernel_ranking": kernel_ranking,
    "stream_gaps": stream_gaps,
    "idle_breakdown": idle_breakdown,
    "gap_kinds": gap_kinds,
    "gpu_op_gaps": gpu_op_gaps,
    "launch_latency": launch_latency,
    "launch_latency_by_kernel": launch_latency_by_kernel,
}


def frame(name: str, gpu_ops: pl.LazyFrame, run_id: str, **options: Any) -> pl.LazyFrame:
    """Analysis ``name`` (a key of :data:`FRAMES`) of run ``run_id``'s rows of ``gpu_ops``.

    ``options`` are the macro's (``kernel_wait_threshold_ns``, ``cats``, ``group_by``,
    ``order_by``...).
    """
    analysis = FRAMES.get(name)
    if analysis is None:
        raise UsageError(f"no Polars analysis {name!r} (analyses: {', '.join(FRAMES)})")
    return analysis(gpu_ops.filter(pl.col("run_id") == run_id), **options)
