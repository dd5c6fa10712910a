"""The critical path of a run or of one of its steps: the queries, then the event graph.

The rows come from the macros of ``sql/83_critical_path.sql`` (``cp_cpu``, ``cp_gpu``,
``cp_sync``, ``cp_thread_merge``, ``cp_names``; a step's window from ``cp_step_window``); the
graph and the classification are :mod:`tracewh.analysis.critical_path` (HTA's). What the
run's collectives waited for on the other ranks of its job comes from ``collective_holdups``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from tracewh.analysis import critical_path as cp
from tracewh.core.errors import UsageError
from tracewh.query.runsel import days_of

if TYPE_CHECKING:
    import polars as pl

    from tracewh.query.runsel import Catalog, RunRef

__all__ = ["critical_path_history", "cross_rank", "run_critical_path", "step_critical_paths", "with_names"]


def run_critical_path(
    wh: Catalog, ref: RunRef, *, step: int | None = None, data_loading: Sequence[str] = (),
    ranks: Sequence[str] = (),
) -> cp.CriticalPath:
    """The critical path of run ``ref``, or of its step ``step`` (``ProfilerStep#N``).

    HTA's event graph and classification (:mod:`tracewh.analysis.critical_path`) over the
    rows of ``sql/83_critical_path.sql``; the window of a step takes the CPU events that
    start in it and the GPU ops launched in it. ``data_loading``: regular expressions of
    CPU events whose time counts as ``data_loading``. ``ranks``: the run ids of its job
    instance; with more than one, ``extra["cross_rank"]`` says whom its collectives waited
    for and what that rank was busy with.

    Examples
    --------
    >>> Warehouse("wh").critical_path("latest", step=3).by_bound  # doctest: +SKIP
    """
    lo = hi = None
    day = ref.days  # the run's partition: the cost of a run is the same at any history length
    if step is not None:
        win = wh.call("cp_step_window", ref.run_id, step=step, days=day)
        if win.is_empty():
            steps = wh.sql("SELECT DISTINCT step FROM steps WHERE run_id = $r ORDER BY step",
                           {"r": ref.run_id}, days=day)["step"].to_list()
            shown = ", ".join(map(str, steps[:10])) + (" ..." if len(steps) > 10 else "")
            raise UsageError(f"run {ref.run_id[:16]} has no step {step} "
                             f"(steps: {shown or 'none'})")
        lo, hi = int(win["lo_ns"][0]), int(win["hi_ns"][0])
    with wh.session():
        rows = [
            wh.call("cp_cpu", ref.run_id, lo_ns=lo, hi_ns=hi, loading=list(data_loading),
                    days=day),
            wh.call("cp_gpu", ref.run_id, lo_ns=lo, hi_ns=hi, days=day),
            wh.call("cp_sync", ref.run_id, lo_ns=lo, hi_ns=hi, days=day),
        ]
        merge = wh.call("cp_thread_merge", ref.run_id, lo_ns=lo, hi_ns=hi, days=day)
        path = cp.critical_path(*rows, merge_tids=dict(zip(
            merge["from_tid"].to_list(), merge["to_tid"].to_list(), strict=True)))
        del rows
        names = wh.call("cp_names", ref.run_id, lo_ns=lo, hi_ns=hi, days=day)
    path = with_names(path, names)
    path.extra.update(run_id=ref.run_id, rank=ref.rank, step=step, lo_ns=lo, hi_ns=hi)
    if len(ranks) > 1:  # the other ranks of its job: whom its collectives waited for
        path.extra["cross_rank"] = cross_rank(
            path, wh.call("collective_holdups", list(ranks), run_id=ref.run_id,
                          days=days_of(wh, ranks)))
    return path


def step_critical_paths(
    wh: Catalog, ref: RunRef, *, data_loading: Sequence[str] = (), max_steps: int | None = None,
) -> pl.DataFrame:
    """The critical path of every step of run ``ref``: one row per step (``ProfilerStep#N``).

    Columns: ``step``, ``total_ns`` and one ``*_ns`` column per bound of
    :data:`tracewh.analysis.critical_path.BOUNDS` (``cpu_bound_ns``, ...), summing to it.
    ``max_steps``: only the first N steps.

    Each step's path is :func:`run_critical_path`'s for that step; the rows are read once for
    the span from the first step's start to the last one's end (the same macros over that
    window), and each step's are taken from them by the macros' own window rule
    (:func:`_in_window`), instead of four queries a step.
    """
    import polars as pl

    schema = {"step": pl.Int64, "total_ns": pl.Int64, **{f"{b}_ns": pl.Int64 for b in cp.BOUNDS}}
    day = ref.days
    windows = wh.call("cp_step_windows", ref.run_id, days=day)
    if max_steps is not None:
        windows = windows.head(max_steps)
    if windows.is_empty():
        return pl.DataFrame(schema=schema)
    steps = windows["step"].to_list()
    lo, hi = int(windows["lo_ns"].min()), int(windows["hi_ns"].max())  # type: ignore[arg-type]
    with wh.session():
        cpu = wh.call("cp_cpu", ref.run_id, lo_ns=lo, hi_ns=hi, loading=list(data_loading),
                      days=day)
        gpu = wh.call("cp_gpu", ref.run_id, lo_ns=lo, hi_ns=hi, days=day)
        sync = wh.call("cp_sync", ref.run_id, lo_ns=lo, hi_ns=hi, days=day)
        merges = wh.call("cp_step_thread_merge", ref.run_id, first_step=steps[0],
                         last_step=steps[-1], days=day)
    merge = {s: {f: t} for s, f, t in merges.select("step", "from_tid", "to_tid").iter_rows()}
    rows = []
    for n, s_lo, s_hi in windows.select("step", "lo_ns", "hi_ns").iter_rows():
        path = cp.critical_path(*_in_window(cpu, gpu, sync, s_lo, s_hi), merge_tids=merge.get(n))
        rows.append({"step": int(n), "total_ns": path.total_ns,
                     **{f"{b}_ns": path.by_bound[b] for b in cp.BOUNDS}})
    return pl.DataFrame(rows, schema=schema)


def _in_window(
    cpu: pl.DataFrame, gpu: pl.DataFrame, sync: pl.DataFrame, lo: int, hi: int
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The rows of ``cp_cpu``, ``cp_gpu`` and ``cp_sync`` of a wider window that those macros
    keep for the window [lo, hi] (their WHERE clauses: sql/83_critical_path.sql); order kept."""
    import polars as pl

    def within(col: str) -> pl.Expr:
        return (pl.col(col) >= lo) & (pl.col(col) <= hi)

    runtime, ts = pl.col("runtime_ts_ns"), pl.col("ts_ns")
    return (
        cpu.filter(within("ts_ns")),
        gpu.filter(within("launch_ts_ns")),
        # NULL runtime_ts_ns: SQL's three-valued OR/AND, as Polars' (a NULL filter drops the row)
        sync.filter((pl.col("kind") == "Stream Wait Event")
                    | (((runtime >= lo) | (ts >= lo)) & ((runtime <= hi) | (ts <= hi)))),
    )


def critical_path_history(
    wh: Catalog, refs: Sequence[RunRef], *, step_index: int = 0,
    data_loading: Sequence[str] = (),
) -> pl.DataFrame:
    """The critical path of one step of each run, as a series: one row per run, in the given order.

    Parameters
    ----------
    wh
        The catalog.
    refs
        The runs (oldest first for a time series).
    step_index
        Which step of each run: its ``step_index``-th ``ProfilerStep`` (0: the first); a run
        without steps contributes its whole run.
    data_loading
        As :func:`run_critical_path`.

    Returns
    -------
    polars.DataFrame
        ``run_id``, ``start_ns`` (the run's start), ``step`` (NULL: the whole run),
        ``total_ns``, and ``<bound>_pct`` per bound of
        :data:`tracewh.analysis.critical_path.BOUNDS` (its share of ``total_ns``, percent).
    """
    import polars as pl

    if step_index < 0:
        raise UsageError(f"--step-index must be at least 0, not {step_index}")
    rows = []
    with wh.session():
        for ref in refs:
            steps = wh.sql("SELECT DISTINCT step FROM steps WHERE run_id = $r ORDER BY step",
                           {"r": ref.run_id}, days=ref.days)["step"].to_list()
            step = int(steps[step_index]) if len(steps) > step_index else None
            path = run_critical_path(wh, ref, step=step, data_loading=data_loading)
            total = path.total_ns
            rows.append({"run_id": ref.run_id, "start_ns": ref.start_ns, "step": step,
                         "total_ns": total,
                         **{f"{b}_pct": (100.0 * path.by_bound[b] / total if total else None)
                            for b in cp.BOUNDS}})
    schema = {"run_id": pl.String, "start_ns": pl.Int64, "step": pl.Int64, "total_ns": pl.Int64,
              **{f"{b}_pct": pl.Float64 for b in cp.BOUNDS}}
    return pl.DataFrame(rows, schema=schema)


def with_names(path: cp.CriticalPath, names: pl.DataFrame) -> cp.CriticalPath:
    """``path`` with a ``name`` column on its edges (``names``: ``event_index``, ``name``)."""
    edges = path.edges.join(
        names.unique("event_index"), on="event_index", how="left", maintain_order="left"
    ).select("kind", "bound", "event_index", "name", "ts_ns", "dur_ns")
    return cp.CriticalPath(path.total_ns, path.by_bound, edges, path.nodes, path.graph_edges,
                        path.extra)


def cross_rank(path: cp.CriticalPath, holdups: pl.DataFrame) -> pl.DataFrame:
    """The communication kernels on ``path`` that waited for another rank, and for whom.

    Parameters
    ----------
    path
        A rank's critical path.
    holdups
        ``collective_holdups`` rows of that rank (``sql/79_collectives.sql``): its kernels
        whose collective another rank arrived at last, with that rank and what it was busy
        with.

    Returns
    -------
    polars.DataFrame
        One row per such kernel on the path, in path order: ``event_index``, ``pg``, ``seq``,
        ``collective``, ``ts_ns``, ``on_path_ns`` (the kernel's time on the path),
        ``waited_ns`` (the part of it spent waiting: min(wait_ns, on_path_ns)), ``last_rank``,
        ``held_by``, ``held_by_op``.
    """
    ops = path.edges.filter(pl.col("bound") == "gpu_communication_bound").select(
        "event_index", pl.col("dur_ns").alias("on_path_ns"))
    cols = ["event_index", "pg", "seq", "collective", "ts_ns", "on_path_ns", "waited_ns",
            "last_rank", "held_by", "held_by_op"]
    if holdups.is_empty() or ops.is_empty():
        return pl.DataFrame(schema={c: (pl.String if c in ("pg", "collective", "held_by", "held_by_op")
                                        else pl.Int64) for c in cols})
    return (
        ops.join(holdups, on="event_index", how="inner", maintain_order="left")
        .with_columns(pl.min_horizontal("wait_ns", "on_path_ns").alias("waited_ns"))
        .select(cols)
    )
