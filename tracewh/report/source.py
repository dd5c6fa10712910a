"""What a report shows, gathered from a warehouse into plain Polars frames.

It takes any object with the :class:`Warehouse` methods it needs
(:class:`~tracewh.report.protocol.WarehouseLike`). Every number comes from one of the
warehouse's analyses (the SQL views); this module only picks rows and columns.

The trends over runs (history, change points, memory) are gathered by
:mod:`tracewh.report.trends` (:func:`collect_history`, re-exported here); the diff comes
from ``Warehouse.diff`` where the warehouse has it, otherwise its frame is ``None`` and the
report says there is no data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tracewh.core.errors import TracewhError
from tracewh.query.options import KERNEL_WAIT_THRESHOLD_NS
from tracewh.query.runsel import RunSelector, days_of
from tracewh.report.protocol import WarehouseLike, as_frame, one_snapshot
from tracewh.report.trends import Trend, collect_history

__all__ = [
    "CRITICAL_PATH_STEPS", "TIMELINE_MAX_OPS", "RunData", "Trend", "WarehouseLike", "collect_across",
    "collect_critical_path",
    "collect_diff", "collect_history", "collect_roofline", "collect_run", "one_snapshot", "run_label",
]

#: GPU ops drawn at most in the timeline (the first ones of the window).
TIMELINE_MAX_OPS = 4000


@dataclass
class RunData:
    """Everything a run's report section shows (durations in int64 ns, as stored)."""

    run_id: str
    meta: dict[str, Any]
    kernels: pl.DataFrame  # kernel_ranking by short_name
    categories: pl.DataFrame  # kernel_ranking by category
    timeline: pl.DataFrame  # device, stream, lane, short_name, category, step, start_ns, end_ns
    timeline_note: str
    gaps: pl.DataFrame  # stream_gaps
    idle: pl.DataFrame  # idle_breakdown, stream level
    largest_gaps: pl.DataFrame
    launch_ops: pl.DataFrame  # launch_latency: api_ns, queue_ns per GPU op
    launch_kernels: pl.DataFrame  # launch_latency_by_kernel
    steps: pl.DataFrame  # step_summary
    breakdown: pl.DataFrame  # gpu_time_breakdown
    rank_kernels: pl.DataFrame  # rank_kernels of the run's job (all ranks)
    rank_imbalance: pl.DataFrame
    rank_stragglers: pl.DataFrame  # rank_stragglers: steps where a rank stands above its peers
    extra: dict[str, Any] = field(default_factory=dict)
    roofline: pl.DataFrame | None = None  # Warehouse.roofline rows; None: not collected
    ref: Any = None  # the resolved run (a RunRef): later queries of the run pass it


def collect_run(
    wh: WarehouseLike,
    selector: RunSelector,
    *,
    top: int = 15,
    timeline_steps: int = 2,
    threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS,
    roofline: bool = True,
    across: bool = True,
) -> RunData:
    """Gather the frames of one run's report.

    Parameters
    ----------
    wh
        The warehouse.
    selector
        A run selector (``latest``, a run_id prefix, ``KEY=VALUE``).
    top
        Kernels shown in the ranking.
    timeline_steps
        ProfilerSteps drawn in the GPU timeline (the first ones with GPU ops).
    threshold_ns
        Kernel-wait threshold of the gap classification, in ns.
    roofline
        Also gather ``Warehouse.roofline`` (where the warehouse has it).
    across
        Also gather what spans the run's steps and ranks (:func:`collect_across`: the
        critical path of its steps, its job's ranks); ``False`` leaves them for the caller
        to gather later (a report draws the other charts meanwhile).

    Returns
    -------
    RunData
    """
    # resolved once: every analysis below gets the RunRef (no selector lookup per query)
    ref = wh.resolve_run(selector)
    run_id: str = ref.run_id
    runs = wh.runs(where={"run_id": run_id})  # with `unusable`: the summary says why
    meta = runs.row(0, named=True) if runs.height else {"run_id": run_id}
    timeline, note = _timeline(wh, ref, steps=timeline_steps)
    data = RunData(
        run_id=run_id,
        meta=meta,
        kernels=wh.kernels(ref, group_by="short_name", top=top),
        categories=wh.kernels(ref, group_by="category"),
        timeline=timeline,
        timeline_note=note,
        gaps=wh.gaps(ref, threshold_ns=threshold_ns),
        idle=wh.idle_breakdown(ref, threshold_ns=threshold_ns).filter(
            pl.col("level") == "stream"
        ),
        largest_gaps=wh.largest_gaps(ref, n=10, threshold_ns=threshold_ns),
        launch_ops=wh.launches(ref, by="op").select("short_name", "api_ns", "queue_ns"),
        launch_kernels=wh.launches(ref, by="kernel"),
        steps=wh.steps(ref, threshold_ns=threshold_ns),
        breakdown=wh.breakdown(ref),
        rank_kernels=pl.DataFrame(),
        rank_imbalance=pl.DataFrame(),
        rank_stragglers=pl.DataFrame(),
        roofline=collect_roofline(wh, ref) if roofline else None,
        ref=ref,
    )
    if across:
        collect_across(wh, data)
    return data


def collect_across(wh: WarehouseLike, data: RunData) -> None:
    """Fill in ``data`` what spans the run's steps and ranks: the critical path of its first
    steps (``extra["critical_path"]``) and its job's per-rank kernels, imbalance and stragglers."""
    ref = data.ref or wh.resolve_run(data.run_id)
    job = ref.job
    rank_runs = getattr(wh, "rank_runs", None)
    if job is not None and rank_runs is not None:
        # the job instance once for the three views; one rank alone has nothing to compare
        # (no heatmap, no imbalance across ranks, no stragglers): its queries are skipped
        ids = rank_runs(run=ref)
        if len(ids) > 1:
            days = days_of(wh, ids)  # their partitions: the same cost at any history length
            data.rank_kernels = _with_short_names(wh, wh.call("rank_kernels", ids, days=days), days)
            data.rank_imbalance = wh.call("rank_imbalance", ids, days=days)
            data.rank_stragglers = wh.call("rank_stragglers", ids, days=days)
    elif job is not None:
        data.rank_kernels = _with_short_names(wh, wh.ranks(view="kernels", run=ref), None)
        data.rank_imbalance = wh.ranks(view="imbalance", run=ref)
        data.rank_stragglers = wh.ranks(view="stragglers", run=ref)
    data.extra["critical_path"] = collect_critical_path(wh, ref)


#: Steps whose critical path a report computes (the first ones).
CRITICAL_PATH_STEPS = 20


def collect_critical_path(wh: WarehouseLike, ref: Any) -> pl.DataFrame:
    """``Warehouse.critical_path_steps`` of the run's first steps (empty where it has none)."""
    method = getattr(wh, "critical_path_steps", None)
    if method is None:
        return pl.DataFrame()
    try:
        found = as_frame(method(ref, max_steps=CRITICAL_PATH_STEPS))
    except TracewhError:
        return pl.DataFrame()
    return found if found is not None else pl.DataFrame()


def collect_roofline(wh: WarehouseLike, run_id: Any) -> pl.DataFrame | None:
    """``Warehouse.roofline`` of the run, or ``None`` where the warehouse has none."""
    method = getattr(wh, "roofline", None)
    if method is None:
        return None
    try:
        return as_frame(method(run_id))
    except TracewhError:
        return None


def collect_rooflines(wh: WarehouseLike, refs: list[Any]) -> dict[str, pl.DataFrame | None]:
    """:func:`collect_roofline` of each resolved run, by run_id: one query for all of them where
    the warehouse has ``roofline_runs`` (its macros are planned once, not once per run)."""
    method = getattr(wh, "roofline_runs", None)
    if method is not None and refs:
        try:
            found = method(refs)
        except TracewhError:  # one run's missing file or the larger query's memory: run by run
            pass
        else:
            return {ref.run_id: as_frame(found.get(ref.run_id)) for ref in refs}
    return {ref.run_id: collect_roofline(wh, ref) for ref in refs}


def _timeline(wh: WarehouseLike, ref: Any, *, steps: int) -> tuple[pl.DataFrame, str]:
    """GPU ops of the first ``steps`` ProfilerSteps (or the first ops), one row per op
    (``gpu_timeline``, sql/40_steps.sql: only the run's own day partition is read)."""
    df = wh.call("gpu_timeline", ref.run_id, steps=steps, max_ops=TIMELINE_MAX_OPS, days=ref.days)
    first_steps = df.filter(pl.col("step").is_not_null())["step"].unique().sort().to_list()
    if df.height and df["stepped"][0]:
        note = "steps " + ", ".join(str(s) for s in first_steps)
    else:
        note = "first GPU ops (no ProfilerStep in this trace)"
    if df.height == TIMELINE_MAX_OPS:
        note += f", first {TIMELINE_MAX_OPS} ops"
    return df.drop("stepped"), note


def _with_short_names(
    wh: WarehouseLike, rank_kernels: pl.DataFrame, days: set[Any] | None
) -> pl.DataFrame:
    """``rank_kernels`` with each kernel's ``short_name`` (from ``gpu_ops`` of ``days``)."""
    if rank_kernels.is_empty():
        return rank_kernels
    run_ids = rank_kernels["run_id"].unique().to_list()
    names = wh.sql(
        "SELECT name, any_value(short_name) AS short_name FROM gpu_ops"
        " WHERE run_id IN (SELECT unnest($ids)) GROUP BY name",
        {"ids": run_ids}, days=days,
    )
    return rank_kernels.join(names, on="name", how="left").with_columns(
        pl.col("short_name").fill_null(pl.col("name"))
    )


def run_label(wh: WarehouseLike, run_id: str) -> str:
    """``run_id`` with its device and file, as comparisons name their two sides."""
    try:
        row = wh.runs(where={"run_id": run_id})
    except TracewhError:
        return run_id
    if row.is_empty():
        return run_id
    r = row.row(0, named=True)
    device = r.get("device_name") or "unknown device"
    file_name = r.get("file_name")
    return f"{run_id} ({device}" + (f", {file_name})" if file_name else ")")


def collect_diff(
    wh: WarehouseLike, a: str, b: str, *, level: str = "short_name"
) -> pl.DataFrame | None:
    """``Warehouse.diff(a, b)`` at ``level`` (default: kernel short name) where the warehouse has it, else ``None``."""
    method = getattr(wh, "diff", None)
    if method is None:
        return None
    try:
        return as_frame(method(a, b, level=level))
    except TracewhError:
        return None
