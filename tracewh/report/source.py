"""What a report shows, gathered from a warehouse into plain Polars frames.

The report layer sits beside ``api`` in the dependency order, so it never
imports :mod:`tracewh.api`: it takes any object with the :class:`Warehouse`
methods it needs (:class:`WarehouseLike`). Every number comes from one of the
warehouse's analyses (the SQL views); this module only picks rows and columns.

History and diff come from ``Warehouse.history`` and ``Warehouse.diff`` where
the warehouse has them; otherwise their frames are ``None`` and the report says
there is no history data.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from tracewh.core.errors import TracewhError
from tracewh.query.runsel import RunSelector
from tracewh.report.memory_history import KEY as MEMORY_KEY
from tracewh.report.memory_history import memory_series

#: GPU ops drawn at most in the timeline (the first ones of the window).
TIMELINE_MAX_OPS = 4000


class WarehouseLike(Protocol):
    """The :class:`tracewh.api.Warehouse` methods the report layer calls."""

    root: Path | str

    def resolve_run(self, selector: RunSelector = ...) -> Any: ...

    def runs(self, *, where: Mapping[str, str] | None = ...) -> pl.DataFrame: ...

    def scan(self, table: str) -> pl.LazyFrame: ...

    def kernels(
        self,
        run: str = ...,
        *,
        cats: Sequence[str] | None = ...,
        group_by: str = ...,
        by: str = ...,
        top: int | None = ...,
    ) -> pl.DataFrame: ...

    def gaps(self, run: str = ..., *, threshold_ns: int = ...) -> pl.DataFrame: ...

    def largest_gaps(
        self, run: str = ..., *, n: int = ..., threshold_ns: int = ...
    ) -> pl.DataFrame: ...

    def idle_breakdown(self, run: str = ..., *, threshold_ns: int = ...) -> pl.DataFrame: ...

    def launches(self, run: str = ..., *, by: str = ...) -> pl.DataFrame: ...

    def steps(self, run: str = ..., *, threshold_ns: int = ...) -> pl.DataFrame: ...

    def breakdown(self, run: str = ...) -> pl.DataFrame: ...

    def ranks(
        self, job: str | None = ..., *, view: str = ..., run: str | None = ...
    ) -> pl.DataFrame: ...

    def call(self, name: str, first: Any, /, **params: Any) -> pl.DataFrame: ...

    def sql(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] | None = ..., *,
        days: Collection[date] | None = ..., since: date | None = ...,
    ) -> pl.DataFrame: ...


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


@contextlib.contextmanager
def one_snapshot(wh: WarehouseLike) -> Iterator[None]:
    """Inside ``wh.session()`` (one snapshot and a connection per thread) where it has one.

    A report queries from more than one thread: its sessions must be opened by one (a
    query's own nested session, as ``changes`` opens, then reuses the outer one).
    """
    session = getattr(wh, "session", None)
    if session is None:
        yield
        return
    with session():
        yield


def collect_run(
    wh: WarehouseLike,
    selector: RunSelector,
    *,
    top: int = 15,
    timeline_steps: int = 2,
    threshold_ns: int = 30_000,
    roofline: bool = True,
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

    Returns
    -------
    RunData
    """
    # resolved once: every analysis below gets the RunRef (no selector lookup per query)
    ref = wh.resolve_run(selector)
    run_id: str = ref.run_id
    runs = wh.runs(where={"run_id": run_id})  # with `unusable`: the summary says why
    meta = runs.row(0, named=True) if runs.height else {"run_id": run_id}
    timeline, note = _timeline(wh, run_id, steps=timeline_steps)
    job = ref.job
    rank_kernels = pl.DataFrame()
    rank_imbalance = pl.DataFrame()
    rank_stragglers = pl.DataFrame()
    rank_runs = getattr(wh, "rank_runs", None)
    if job is not None and rank_runs is not None:
        # the job instance once for the three views; one rank alone has nothing to compare
        # (no heatmap, no imbalance across ranks, no stragglers): its queries are skipped
        ids = rank_runs(run=ref)
        if len(ids) > 1:
            rank_kernels = _with_short_names(wh, wh.call("rank_kernels", ids))
            rank_imbalance = wh.call("rank_imbalance", ids)
            rank_stragglers = wh.call("rank_stragglers", ids)
    elif job is not None:
        rank_kernels = _with_short_names(wh, wh.ranks(view="kernels", run=ref))
        rank_imbalance = wh.ranks(view="imbalance", run=ref)
        rank_stragglers = wh.ranks(view="stragglers", run=ref)
    return RunData(
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
        rank_kernels=rank_kernels,
        rank_imbalance=rank_imbalance,
        rank_stragglers=rank_stragglers,
        roofline=collect_roofline(wh, ref) if roofline else None,
        ref=ref,
        extra={"critical_path": collect_critical_path(wh, ref)},
    )


#: Steps whose critical path a report computes (the first ones).
CRITICAL_PATH_STEPS = 20


def collect_critical_path(wh: WarehouseLike, ref: Any) -> pl.DataFrame:
    """``Warehouse.critical_path_steps`` of the run's first steps (empty where it has none)."""
    method = getattr(wh, "critical_path_steps", None)
    if method is None:
        return pl.DataFrame()
    try:
        found = _as_frame(method(ref, max_steps=CRITICAL_PATH_STEPS))
    except TracewhError:
        return pl.DataFrame()
    return found if found is not None else pl.DataFrame()


def collect_roofline(wh: WarehouseLike, run_id: Any) -> pl.DataFrame | None:
    """``Warehouse.roofline`` of the run, or ``None`` where the warehouse has none."""
    method = getattr(wh, "roofline", None)
    if method is None:
        return None
    try:
        return _as_frame(method(run_id))
    except TracewhError:
        return None


def _timeline(wh: WarehouseLike, run_id: str, *, steps: int) -> tuple[pl.DataFrame, str]:
    """GPU ops of the first ``steps`` ProfilerSteps (or the first ops), one row per op."""
    ops = (
        wh.scan("gpu_ops")
        .filter(pl.col("run_id") == run_id, pl.col("ts_ns").is_not_null())
        .select(
            "device", "stream", "short_name", "name", "category", "step", "ts_ns",
            pl.col("dur_ns").fill_null(0),
        )
    )
    first_steps = (
        ops.filter(pl.col("step").is_not_null())
        .select(pl.col("step").unique().sort().head(steps))
        .collect()["step"]
        .to_list()
    )
    if first_steps:
        ops = ops.filter(pl.col("step").is_in(first_steps))
        note = "steps " + ", ".join(str(s) for s in first_steps)
    else:
        note = "first GPU ops (no ProfilerStep in this trace)"
    df = ops.sort("ts_ns", "device", "stream").head(TIMELINE_MAX_OPS).collect()
    if df.height == TIMELINE_MAX_OPS:
        note += f", first {TIMELINE_MAX_OPS} ops"
    df = df.with_columns(
        pl.format("GPU {} · stream {}", pl.col("device"), pl.col("stream")).alias("lane"),
        pl.col("short_name").fill_null(pl.col("name")),
        pl.col("category").fill_null("other"),
        (pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns"),
    ).rename({"ts_ns": "start_ns"})
    return df.drop("name"), note


def _with_short_names(wh: WarehouseLike, rank_kernels: pl.DataFrame) -> pl.DataFrame:
    """``rank_kernels`` with each kernel's ``short_name`` (from ``gpu_ops``)."""
    if rank_kernels.is_empty():
        return rank_kernels
    run_ids = rank_kernels["run_id"].unique().implode()
    names = (
        wh.scan("gpu_ops")
        .filter(pl.col("run_id").is_in(run_ids))
        .select("name", "short_name")
        .unique(subset="name")
        .collect()
    )
    return rank_kernels.join(names, on="name", how="left").with_columns(
        pl.col("short_name").fill_null(pl.col("name"))
    )


@dataclass(frozen=True)
class Trend:
    """One metric over runs: ``time``, ``run_id``, ``rank``, ``value_ns``, ``regression`` (bool).

    ``marks`` holds the change points drawn on it: ``time`` (first run after the change),
    ``label`` (``group N: +x%``). ``value_ns`` is a time in ns, except where ``unit`` says
    ``mb`` (bytes, drawn in MB: the memory trend); ``y_title`` names the axis.
    """

    title: str
    frame: pl.DataFrame
    marks: pl.DataFrame | None = None
    y_title: str | None = None
    unit: str = "ms"
    note: str = ""  # what the trend shows and what it left out (workloads, unusable runs)


def _one_workload(wh: WarehouseLike, steps: pl.DataFrame, run: str | None) -> tuple[pl.DataFrame, str | None, str]:
    """``steps`` cut to the usable runs of ``run``'s workload (else of the newest run's),
    the workload, and a sentence saying what was left out."""
    try:
        info = wh.runs()
    except TracewhError:
        return steps, None, ""
    if "workload" not in info.columns:
        return steps, None, ""
    cols = ["run_id", "workload"] + (["unusable"] if "unusable" in info.columns else [])
    joined = steps.join(info.select(cols), on="run_id", how="left")
    unusable = joined.filter(pl.col("unusable").is_not_null()) if "unusable" in cols else joined.clear()
    usable = joined.filter(pl.col("unusable").is_null()) if "unusable" in cols else joined
    ref = run if run is not None and run in set(info["run_id"]) else (info["run_id"][0] if info.height else None)
    workload = info.filter(pl.col("run_id") == ref)["workload"][0] if ref is not None else None
    if workload is None:
        return usable.drop(cols[1:]), None, ""
    mine = usable.filter(pl.col("workload") == workload)
    others = usable.filter(pl.col("workload") != workload)["run_id"].n_unique()
    left = []
    if others:
        n_wl = usable.filter(pl.col("workload") != workload)["workload"].n_unique()
        left.append(f"{others} run(s) of {n_wl} other workload(s)")
    if unusable.height:
        reasons = ", ".join(sorted({str(x) for x in unusable["unusable"].to_list()}))
        left.append(f"{unusable['run_id'].n_unique()} run(s) unusable for comparison ({reasons})")
    note = (f"Runs of workload {workload} only (the identity tracewh history and changes use)"
            + ("; left out: " + "; ".join(left) if left else "") + ".")
    return mine.drop(cols[1:]), str(workload), note


def _marks(rows: list[dict[str, Any]], start: dict[str, int]) -> pl.DataFrame:
    out = [{"time": start.get(r["run_id"]), "label": f"group {r['group']}: "
            + ("n/a" if r["change_pct"] is None else f"{r['change_pct']:+.0f}%")}
           for r in rows if start.get(r["run_id"]) is not None]  # fmt: skip
    df = pl.DataFrame(out, schema={"time": pl.Int64, "label": pl.String})
    return df.unique(maintain_order=True).select(
        pl.from_epoch("time", time_unit="ns").alias("time"), "label")


def collect_history(
    wh: WarehouseLike, *, since: str | None, run: str | None = None, max_regressions: int = 3
) -> list[Trend] | None:
    """Step time over runs with its change points, then one trend per recent alert group.

    ``None`` where the warehouse has no ``history`` method (no history data). Change points
    come from ``Warehouse.changes`` (each drawn as a rule labelled with its alert group);
    the groups shown are the ``max_regressions`` most recent, each by its largest kernel or
    category, and points of a metric ``Warehouse.check`` finds regressed for ``run`` are
    flagged from the change's first run on.
    """
    history = getattr(wh, "history", None)
    if history is None:
        return None
    try:
        steps = _as_frame(history(since=since))
    except TracewhError:
        return None
    if steps is None or steps.is_empty():
        return []
    steps, workload, note = _one_workload(wh, steps, run)
    if steps.is_empty():
        return []
    start = dict(zip(steps["run_id"].to_list(), steps["start_ns"].to_list(), strict=True))
    rows: list[dict[str, Any]] = []
    changes = getattr(wh, "changes", None)
    if changes is not None:
        try:
            rows = list(changes(since=since).to_dicts())
        except TracewhError:
            rows = []
    if workload is not None:
        rows = [r for r in rows if r.get("workload") == workload]
    findings: list[Any] = []
    check = getattr(wh, "check", None)
    if check is not None and run is not None:
        try:
            findings = list(check(run).regressions)
        except TracewhError:
            findings = []
    step_flags = {f.since_run_id or f.run_id for f in findings if f.metric_kind == "step"}
    title = f"Step time per run, workload {workload}" if workload else "Step time per run"
    trends = [Trend(title, _trend(steps, "step_ns", step_flags),
                    _marks([r for r in rows if r["metric"] == "step"], start), note=note)]  # fmt: skip
    # every rank's finding: each rank is flagged from its own change's first run on
    flagged: dict[str, set[str | None]] = {}
    for f in findings:
        flagged.setdefault(f.metric, set()).add(f.since_run_id or f.run_id)
    groups = sorted({r["group"] for r in rows if r["group"] is not None})[:max_regressions]
    for g in groups:
        lead = next((r for r in rows if r["group"] == g and r["metric"] in ("kernel", "category")), None)
        if lead is None:
            continue
        arg = {"kernel": lead["name"]} if lead["metric"] == "kernel" else {"category": lead["key"]}
        try:
            frame = _as_frame(history(since=since, **arg))
        except TracewhError:
            continue
        if frame is None or frame.is_empty():
            continue
        frame = frame.filter(pl.col("run_id").is_in(list(start)))  # this workload's usable runs
        what = lead["short_name"] or lead["key"]
        pct = "" if lead["change_pct"] is None else f" ({lead['change_pct']:+.0f}%)"
        same = [r for r in rows if r["key"] == lead["key"] and r["metric"] == lead["metric"]]
        trends.append(Trend(
            f"Change group {g}: {lead['metric']} {what}{pct} since {lead['day']}, GPU time per step",
            _trend(frame, "time_per_step_ns", flagged.get(lead["key"], set())), _marks(same, start),
        ))  # fmt: skip
    mem = memory_series(wh, steps)
    if mem is not None:
        marks = [r for r in rows if r["metric"] == "memory" and r["key"] == MEMORY_KEY]
        trends.append(Trend(
            "GPU peak allocated memory per step", _trend(mem, "value", flagged.get(MEMORY_KEY, set())),
            _marks(marks, {**start, **dict(zip(mem["run_id"], mem["start_ns"], strict=True))}),
            y_title="GPU peak allocated per step (MB)", unit="mb",
        ))  # fmt: skip
    return trends


def _trend(frame: pl.DataFrame, value: str, flag_from: set[str | None]) -> pl.DataFrame:
    """``frame`` (one row per run, oldest first) as a trend; runs from a flagged run on are flagged."""
    df = frame.sort("start_ns").select(
        pl.from_epoch("start_ns", time_unit="ns").alias("time"), "run_id", "rank",
        pl.col(value).cast(pl.Float64).alias("value_ns"),
    )
    starts = df.filter(pl.col("run_id").is_in([r for r in flag_from if r])).select(
        "rank", pl.col("time").alias("flag_from"))
    if starts.is_empty():
        return df.with_columns(pl.lit(False).alias("regression"))
    return (
        df.join(starts.group_by("rank").agg(pl.col("flag_from").min()), on="rank", how="left",
                nulls_equal=True)
        .with_columns((pl.col("time") >= pl.col("flag_from")).fill_null(False).alias("regression"))
        .drop("flag_from")
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
        return _as_frame(method(a, b, level=level))
    except TracewhError:
        return None


def _as_frame(result: Any) -> pl.DataFrame | None:
    if isinstance(result, pl.DataFrame):
        return result
    if isinstance(result, pl.LazyFrame):
        return result.collect()
    frame = getattr(result, "frame", None)
    if isinstance(frame, pl.DataFrame):
        return frame
    return None
