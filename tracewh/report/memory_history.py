"""The report's memory history: the GPU's peak allocated memory per step over the runs.

One value per run: ``peak_allocated_per_step_bytes`` of ``run_memory_in``
(``sql/65_memory.sql``; the largest over the run's GPUs), the series that
``tracewh changes`` and ``check`` analyse as metric ``memory``, read from the same
``series_values`` (the runs' stored ``run_series`` rows; inside a session the one
query ``changes`` and ``check`` ran); the caller draws its change points on it.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import polars as pl

from tracewh.core.errors import TracewhError

#: The memory series drawn (the GPU's; the CPU's is analysed too, not drawn).
KEY = "peak_allocated_gpu"


def memory_series(wh: Any, runs: pl.DataFrame) -> pl.DataFrame | None:
    """``run_id``, ``start_ns``, ``rank``, ``value`` (bytes) per run with GPU memory events.

    ``runs`` holds the runs of the history (``run_id``, ``day``). ``None`` where the
    warehouse cannot say (no ``sql`` method, or the query fails) or fewer than two runs
    have a value (no history to draw).
    """
    if getattr(wh, "sql", None) is None or runs.is_empty():
        return None
    try:
        first = runs["day"].min()
        # imported here: the history's modules (and numpy) load in the thread that gathers
        # the history, not before a report's first query
        from tracewh.history.alerts import series_values

        values = series_values(wh, since=first if isinstance(first, dt.date) else None)
    except TracewhError:
        return None
    frame = (
        values.filter((pl.col("metric") == "memory") & (pl.col("key") == KEY))
        .select("run_id", pl.col("value").cast(pl.Int64))
        .join(runs.select("run_id", "start_ns", "rank"), on="run_id")
        .select("run_id", "start_ns", "rank", "value")
        .sort("start_ns", "rank", "run_id")
    )
    return frame if frame.height >= 2 else None


__all__ = ["KEY", "memory_series"]
