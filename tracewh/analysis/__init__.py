"""Per-run analyses, one module per family.

- :mod:`tracewh.analysis.memory`: allocations, peaks and leaks (over ``sql/`` memory macros);
- :mod:`tracewh.analysis.roofline`: achieved TFLOP/s and arithmetic intensity against peaks;
- :mod:`tracewh.analysis.gaps`, :mod:`tracewh.analysis.kernels`, :mod:`tracewh.analysis.launches`:
  pure Polars analyses (LazyFrame in, LazyFrame out; no I/O, no DuckDB), each mirroring a SQL
  table macro of ``sql/`` (same columns, same definitions); parity tests assert they agree.

The Polars functions are importable from here (loaded on first use, so ``import
tracewh.analysis.memory`` does not import Polars).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "gap_kinds": "gaps",
    "gpu_op_gaps": "gaps",
    "idle_breakdown": "gaps",
    "stream_gaps": "gaps",
    "kernel_ranking": "kernels",
    "launch_latency": "launches",
    "launch_latency_by_kernel": "launches",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tracewh.analysis' has no attribute {name!r}")
    return getattr(importlib.import_module(f"tracewh.analysis.{module}"), name)
