"""The report's memory history: the GPU's peak allocated memory per step over the runs.

One value per run: ``peak_allocated_per_step_bytes`` of ``run_memory_in``
(``sql/65_memory.sql``; the largest over the run's GPUs), the series that
``tracewh changes`` and ``check`` analyse as metric ``memory``; the caller draws
its change points on it.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracewh.core.errors import TracewhError

#: The memory series drawn (the GPU's; the CPU's is analysed too, not drawn).
KEY = "peak_allocated_gpu"

_QUERY = """
SELECT r.run_id, r.start_ns, r.rank, m.value
FROM (
    SELECT run_id, max(peak_allocated_per_step_bytes) AS value
    FROM run_memory_in($run_ids)
    WHERE device_type = 'gpu'
    GROUP BY run_id
) m
JOIN runs r USING (run_id)
ORDER BY r.start_ns
"""


def memory_series(wh: Any, runs: pl.DataFrame) -> pl.DataFrame | None:
    """``run_id``, ``start_ns``, ``rank``, ``value`` (bytes) per run with GPU memory events.

    ``runs`` holds the runs of the history (``run_id``, ``day``). ``None`` where the
    warehouse cannot say (no ``sql`` method, or the query fails) or fewer than two runs
    have a value (no history to draw).
    """
    method = getattr(wh, "sql", None)
    if method is None or runs.is_empty():
        return None
    try:
        frame: pl.DataFrame = method(_QUERY, {"run_ids": runs["run_id"].to_list()},
                                     since=runs["day"].min())
    except TracewhError:
        return None
    return frame if frame.height >= 2 else None


__all__ = ["KEY", "memory_series"]
