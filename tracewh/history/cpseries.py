"""The critical path's shares by bound as history series (metric ``critical_path``), on demand.

One series per bound of :data:`tracewh.analysis.critical_path.BOUNDS` (``cpu_bound``,
``gpu_compute_bound``, ``gpu_communication_bound``, ...): a run's value is the bound's
**share of the critical path** of its first :data:`MAX_STEPS` steps (``ProfilerStep#N``),
0..1: the bound's time on the paths of those steps over their summed length (each step's
own path, HTA's graph: :func:`tracewh.analysis.critical_run.step_critical_paths`); a run
without steps contributes its whole run's path. ``step_sd`` is the standard deviation of the
steps' own shares (the noise floor of the change-point test; NULL with fewer than 2 steps).
``changes`` and ``check`` analyse them with ``critical_path=True`` (``--critical-path``), as
they do an operator's TFLOP/s with ``op``: a shift of the path (from GPU compute to CPU or
launch overhead) is a change point like any other. A rise of ``gpu_compute_bound`` is the
improvement (the GPU is what holds the step), a rise of any other share the regression.

Why on demand and not stored at ingest (``run_series``, :mod:`tracewh.history.runseries`):
a run's critical path is an event graph built and walked in Python per step, not one SQL
pass over its tables. On the shared traces a run's series values took 25-90% of the time
of its ingest (``python -m bench.bench_cp_series``; figures in ``docs/concepts/history.md``):
stored at ingest, they would slow every ingest down by that much for a series only some
users ask for; computed when asked, they cost only those who ask (runs x steps paths;
``MAX_STEPS`` bounds the steps).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from tracewh.analysis.critical_path import BOUNDS
from tracewh.analysis.critical_run import run_critical_path, step_critical_paths

if TYPE_CHECKING:
    from tracewh.query.runsel import Catalog

__all__ = ["HIGHER_IS_BETTER_KEYS", "MAX_STEPS", "METRIC", "critical_path_series", "critical_path_values"]

#: The metric of the series.
METRIC = "critical_path"
#: Steps of each run whose critical path makes its value (the first ones).
MAX_STEPS = 5
#: The bound whose rising share is an improvement (the others' rising share is the regression).
HIGHER_IS_BETTER_KEYS = frozenset({"gpu_compute_bound"})

SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String(), "metric": pl.String(), "key": pl.String(), "name": pl.String(),
    "short_name": pl.String(), "category": pl.String(), "value": pl.Float64(),
    "step_sd": pl.Float64(), "n_steps": pl.Int64(),
}  # fmt: skip


def critical_path_values(
    src: Catalog, run_ids: Sequence[str], *, max_steps: int = MAX_STEPS
) -> pl.DataFrame:
    """The ``critical_path`` series values of ``run_ids``, in the shape of ``series_values``.

    Parameters
    ----------
    src
        The catalog (a :class:`tracewh.api.Warehouse`).
    run_ids
        The runs.
    max_steps
        Steps of each run whose paths make its value (the first ones).

    Returns
    -------
    polars.DataFrame
        One row per (run, bound): ``run_id``, ``metric`` (``critical_path``), ``key`` and
        ``name`` (the bound), ``short_name`` and ``category`` (NULL), ``value`` (the bound's
        share of the steps' paths, 0..1), ``step_sd`` (of the steps' shares), ``n_steps``
        (the steps used; 1 for a run without steps). A run whose path is empty (no CPU
        operators or GPU ops) has no rows.

    Examples
    --------
    >>> critical_path_values(Warehouse("wh"), ["5e69..."]).filter(key="cpu_bound")  # doctest: +SKIP
    """
    rows: list[dict[str, object]] = []
    with src.session():
        for run_id in run_ids:
            ref = src.resolve_run(run_id)
            steps = step_critical_paths(src, ref, max_steps=max_steps)
            if steps.is_empty():  # no ProfilerStep: the whole run's path
                path = run_critical_path(src, ref)
                steps = pl.DataFrame([{"total_ns": path.total_ns,
                                       **{f"{b}_ns": path.by_bound[b] for b in BOUNDS}}])
            steps = steps.filter(pl.col("total_ns") > 0)
            if steps.is_empty():
                continue
            total = float(steps["total_ns"].sum())
            for b in BOUNDS:
                shares = steps[f"{b}_ns"] / steps["total_ns"]
                sd = shares.std() if steps.height >= 2 else None
                rows.append({
                    "run_id": ref.run_id, "metric": METRIC, "key": b, "name": b,
                    "short_name": None, "category": None,
                    "value": float(steps[f"{b}_ns"].sum()) / total,
                    "step_sd": float(sd) if isinstance(sd, int | float) else None,
                    "n_steps": steps.height,
                })  # fmt: skip
    return pl.DataFrame(rows, schema=SCHEMA)


def critical_path_series(src: Catalog, runs: pl.DataFrame, *, max_steps: int = MAX_STEPS) -> pl.DataFrame:
    """``tracewh history --critical-path``: one row per run of ``runs``, in its order.

    Parameters
    ----------
    src
        The catalog.
    runs
        The runs (``Warehouse.runs`` rows, oldest first for a time series).
    max_steps
        As :func:`critical_path_values`.

    Returns
    -------
    polars.DataFrame
        ``day``, ``start_ns``, ``run_id``, ``job``, ``rank``, ``workload``, ``n_steps`` (the
        steps whose paths made the values), and ``<bound>_share`` per bound of
        :data:`~tracewh.analysis.critical_path.BOUNDS` (0..1; NULL for a run without a path):
        the values :func:`critical_path_values` gives ``changes`` and ``check``.
    """
    values = critical_path_values(src, runs["run_id"].to_list(), max_steps=max_steps)
    shares = [pl.col("value").filter(pl.col("key") == b).first().alias(f"{b}_share") for b in BOUNDS]
    wide = values.group_by("run_id").agg(pl.col("n_steps").first(), *shares)
    cols = [c for c in ("day", "start_ns", "run_id", "job", "rank", "workload") if c in runs.columns]
    return runs.select(cols).join(wide, on="run_id", how="left", maintain_order="left")
