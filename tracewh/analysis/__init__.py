"""Pure Polars analyses: LazyFrame in, LazyFrame out (no I/O, no DuckDB).

Each function mirrors a SQL table macro of ``sql/`` (same columns, same definitions); parity
tests assert they agree.
"""

from __future__ import annotations

from tracewh.analysis.gaps import gap_kinds, gpu_op_gaps, idle_breakdown, stream_gaps
from tracewh.analysis.kernels import kernel_ranking
from tracewh.analysis.launches import launch_latency, launch_latency_by_kernel

__all__ = [
    "gap_kinds",
    "gpu_op_gaps",
    "idle_breakdown",
    "kernel_ranking",
    "launch_latency",
    "launch_latency_by_kernel",
    "stream_gaps",
]
