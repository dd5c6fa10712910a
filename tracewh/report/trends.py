"""The report's trends over runs: step time, the recent change groups, GPU peak memory.

Each :class:`Trend` is one metric over the usable runs of one workload (the identity
``tracewh history`` and ``changes`` use), with the change points ``Warehouse.changes`` found
drawn on it and the points of a metric ``Warehouse.check`` finds regressed flagged.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import polars as pl

from tracewh.core.errors import TracewhError
from tracewh.report.memory_history import KEY as MEMORY_KEY
from tracewh.report.memory_history import memory_series
from tracewh.report.protocol import WarehouseLike, as_frame

__all__ = ["Trend", "collect_history", "history_window"]


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


def history_window(wh: WarehouseLike, since: str | dt.date | None, *, run: str | None = None
                   ) -> tuple[dt.date | None, str]:
    """The first day of the report's ``--since`` window and what it leaves out, in words.

    Relative forms (``90d``) count back from the latest run's day, as ``history`` and
    ``changes`` do (as :func:`tracewh.history.series.window_start`): a warehouse of older runs
    is not an empty window. The sentence says how many runs of the reported run's workload
    (else of the warehouse) lie before the window and how to include them; "" when none do.
    ``(None, "")`` without a window (``None`` or ``all``).
    """
    from tracewh.query.runsel import parse_since

    if since is None or (isinstance(since, str) and since.strip().lower() == "all"):
        return None, ""
    try:
        info = wh.runs()
    except TracewhError:
        return None, ""
    if "day" not in info.columns or info.is_empty():
        return None, ""
    top = info["day"].max()
    latest = top if isinstance(top, dt.date) else None
    first = parse_since(since, today=latest)
    whose = ""
    if "workload" in info.columns:
        ref = run if run is not None and run in set(info["run_id"]) else info["run_id"][0]
        workload = info.filter(pl.col("run_id") == ref)["workload"][0]
        if workload is not None:
            info = info.filter(pl.col("workload") == workload)
            whose = f" of workload {workload}"
    before = info.filter(pl.col("day") < first).height
    if not before:
        return first, ""
    counted = (f", counted back from the latest run ({latest.isoformat()})"
               if latest is not None and isinstance(since, str) and not _is_date(since) else "")
    return first, (f"left out: {before} run(s){whose} before {first.isoformat()} (the --since "
                   f"window{counted}); --since all, or no --since, includes them")


def _is_date(text: str) -> bool:
    try:
        dt.date.fromisoformat(text.strip())
    except ValueError:
        return False
    return True


def collect_history(
    wh: WarehouseLike, *, since: str | dt.date | None, run: str | None = None,
    max_regressions: int = 3, window_note: str = "",
) -> list[Trend] | None:
    """Step time over runs with its change points, then one trend per recent alert group.

    ``None`` where the warehouse has no ``history`` method (no history data). Change points
    come from ``Warehouse.changes`` (each drawn as a rule labelled with its alert group);
    the groups shown are the ``max_regressions`` most recent, each by its largest kernel or
    category, and points of a metric ``Warehouse.check`` finds regressed for ``run`` are
    flagged from the change's first run on. ``window_note`` (:func:`history_window`: the
    runs the ``since`` window leaves out) is added to the first trend's note; when the
    window leaves every run out, it is that trend's only content.
    """
    history = getattr(wh, "history", None)
    if history is None:
        return None
    try:
        steps = as_frame(history(since=since))
    except TracewhError:
        return None
    nothing = [Trend("Step time per run", pl.DataFrame(), note=_cap(window_note) + ".")] if window_note else []
    if steps is None or steps.is_empty():
        return nothing
    steps, workload, note = _one_workload(wh, steps, run)
    if steps.is_empty():
        return nothing
    if window_note:
        note = f"{note} {_cap(window_note)}." if note else f"{_cap(window_note)}."
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
            frame = as_frame(history(since=since, **arg))
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


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]
