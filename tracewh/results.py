"""What the commands return as data: the JSON documents of ``--format json`` and the MCP tools.

The command line (:mod:`tracewh.cli`) prints these documents with ``--format json`` and the
MCP server (:mod:`tracewh.mcp`) returns them as its tools' structured output: one
implementation, so an agent and a script read the same values.

* A result frame (kernels, gaps, steps, runs, history, sql, ...) is a list of row objects
  keyed by column name, exact values as stored, ``top`` rows kept (:func:`json_rows`,
  whose text :func:`json_text` is what the CLI prints).
* ``diff`` is ``{"runs": [...], "groups": [...]}`` (:class:`DiffResult`).
* ``changes`` is a list of change objects, those of one run's series with ``run``
  (:class:`ChangesResult`).
* ``check`` is :meth:`tracewh.history.check.CheckReport.to_dict` (:func:`check_document`).
* ``critical-path`` is one object: the run, the window, ``total_ns``, ``by_bound`` and the
  path's ``edges`` (:func:`critical_path_document`).

Every document holds JSON values only (dates as ISO text): what ``json.loads`` of the
CLI's output gives.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

from tracewh.query.options import RanksOptions

if TYPE_CHECKING:
    import polars as pl

    from tracewh.analysis.critical_path import CriticalPath
    from tracewh.api import Warehouse
    from tracewh.history.alerts import ChangesReport
    from tracewh.history.check import CheckReport
    from tracewh.query.runsel import RunRef, RunSelector

__all__ = [
    "ChangesResult", "DiffResult", "HistoryResult", "RanksResult", "changes", "changes_runs_note", "check_document",
    "check_runs_note", "critical_path_document", "critical_path_edges", "diff", "graph_runs_note", "history", "json_ready", "json_rows", "json_text", "ranks",
]  # fmt: skip


def json_text(df: pl.DataFrame) -> str:
    """The JSON text of a result frame: a list of row objects keyed by column name.

    Polars' encoding: dates and times as ISO text, nested columns as lists and objects.
    """
    buf = io.StringIO()
    df.write_json(buf)
    return buf.getvalue()


def json_rows(df: pl.DataFrame, *, top: int | None = None) -> list[dict[str, Any]]:
    """The first ``top`` rows of ``df`` (``None`` or 0: all) as JSON objects (:func:`json_text`)."""
    shown = df.head(top) if top else df
    rows: list[dict[str, Any]] = json.loads(json_text(shown))
    return rows


def json_ready(value: Any) -> Any:
    """``value`` with JSON values only: what ``json.loads`` of ``json.dumps(value, default=str)`` gives."""
    return json.loads(json.dumps(value, default=str))


@dataclass(frozen=True)
class DiffResult:
    """Two runs compared: the runs, run-level metrics side by side, and the per-group rows.

    Attributes
    ----------
    a, b
        The runs (A the reference).
    runs
        One row per run-level metric (``Warehouse.compare``): metric, value_a, value_b,
        delta, ratio.
    groups
        One row per kernel, short name, category or op (``Warehouse.diff``), by absolute
        impact.
    """

    a: RunRef
    b: RunRef
    runs: pl.DataFrame
    groups: pl.DataFrame

    def document(self, *, top: int | None = None) -> dict[str, Any]:
        """``{"runs": [...], "groups": [...]}``, the first ``top`` groups (``None``/0: all)."""
        groups = self.groups.head(top) if top else self.groups
        out: dict[str, Any] = json_ready({"runs": self.runs.to_dicts(), "groups": groups.to_dicts()})
        return out


def diff(
    wh: Warehouse, a: RunSelector, b: RunSelector, *, level: str = "kernel", tolerance: float = 0.05
) -> DiffResult:
    """Compare runs ``a`` and ``b`` (selectors): ``tolerance`` is a fraction (0.05 = 5%)."""
    ra, rb = wh.resolve_run(a), wh.resolve_run(b)
    groups = wh.diff(ra, rb, level=level, tolerance=tolerance)
    return DiffResult(ra, rb, wh.compare(ra, rb), groups)


@dataclass(frozen=True)
class ChangesResult:
    """The changes found, those of one run's series when a run was given.

    Attributes
    ----------
    report
        What :meth:`tracewh.api.Warehouse.changes` found (every series).
    run
        The run whose series were kept (``None``: every series).
    rows
        One JSON object per change (:meth:`tracewh.history.alerts.ChangesReport.to_dicts`), largest
        groups and contributors first, the first ``top``.
    found
        How many changes there were before ``top``.
    """

    report: ChangesReport
    run: RunRef | None
    rows: list[dict[str, Any]]
    found: int


def changes(
    wh: Warehouse,
    *,
    run: RunSelector | None = None,
    top: int | None = None,
    since: str | None = "90d",
    kernel: str | None = None,
    category: str | None = None,
    module: str | None = None,
    op: str | None = None,
    where: Mapping[str, str] | None = None,
    alpha: float | None = None,
    min_change: float = 0.0,
    min_ms: float = 0.1,
    include_unusable: bool = False,
    critical_path: bool = False,
) -> ChangesResult:
    """Change points over the whole history (:meth:`tracewh.api.Warehouse.changes`).

    With ``run`` (a selector), only the series of that run: its workload and rank. ``since``
    is ``90d``, ``12w``, a date, or ``None``/``"all"`` for all history; ``top`` keeps the
    first changes (``None``/0: all).
    """
    ref = wh.resolve_run(run) if run else None
    if since is not None and since.strip().lower() == "all":
        since = None
    report = wh.changes(
        since=since, kernel=kernel, category=category, module=module, op=op, where=where,
        alpha=alpha, min_change=min_change, min_ms=min_ms, include_unusable=include_unusable,
        critical_path=critical_path,
    )  # fmt: skip
    rows = report.to_dicts()
    if ref is not None:
        own = wh.runs(where={"run_id": ref.run_id})
        workload = own["workload"][0] if own.height and "workload" in own.columns else None
        rows = [r for r in rows if r["workload"] == workload and r["rank"] == ref.rank]
    found = len(rows)
    if top:
        rows = rows[:top]
    return ChangesResult(report, ref, json_ready(rows), found)


def check_document(report: CheckReport) -> dict[str, Any]:
    """The check report as JSON values (status, runs, regressions, improvements, changes, params)."""
    out: dict[str, Any] = json_ready(report.to_dict())
    return out


@dataclass(frozen=True)
class HistoryResult:
    """One row per run, oldest first, and the first day of the window.

    Attributes
    ----------
    frame
        ``Warehouse.history`` rows, or with ``op`` ``Warehouse.roofline_history`` rows.
    first
        The first day of the ``since`` window (relative windows count back from the latest
        run's day); ``None``: every run.
    """

    frame: pl.DataFrame
    first: date | None


def history(
    wh: Warehouse,
    *,
    kernel: str | None = None,
    category: str | None = None,
    op: str | None = None,
    kernel_key: str | None = None,
    since: str | None = None,
    where: Mapping[str, str] | None = None,
    critical_path: bool = False,
) -> HistoryResult:
    """One row per run, oldest first: ``Warehouse.history``, or with ``op`` ``roofline_history``.

    At most one of ``kernel``, ``category``, ``op`` and ``critical_path`` (the critical
    path's shares by bound per run: :func:`tracewh.history.cpseries.critical_path_series`);
    ``kernel_key`` follows GPU ops (not with ``op`` or ``critical_path``). ``since``:
    ``90d``, ``12w`` (counted back from the latest run's day), a date, or ``None``/``"all"``
    for every run.
    """
    from tracewh.core.errors import UsageError
    from tracewh.history.series import window_start

    if sum(x is not None for x in (kernel, category, op)) + critical_path > 1:
        raise UsageError("give one of --kernel, --category, --op or --critical-path")
    if op is not None and kernel_key is not None:
        raise UsageError("--kernel-key follows GPU ops: not with --op")
    if critical_path and kernel_key is not None:
        raise UsageError("--kernel-key follows GPU ops: not with --critical-path")
    if since is not None and since.strip().lower() == "all":
        since = None
    first = window_start(wh, since)  # relative windows end at the latest run, not today
    if op is not None:
        return HistoryResult(wh.roofline_history(op=op, since=first, where=where), first)
    if critical_path:  # the path's shares by bound, computed now (tracewh.history.cpseries)
        import polars as pl

        from tracewh.history.cpseries import critical_path_series

        runs = wh.runs(where=where)
        if first is not None:
            runs = runs.filter(pl.col("day") >= first)
        return HistoryResult(critical_path_series(wh, runs.sort("start_ns")), first)
    frame = wh.history(kernel=kernel, category=category, since=first, where=where,
                       kernel_key=kernel_key)  # fmt: skip
    return HistoryResult(frame, first)


@dataclass(frozen=True)
class RanksResult:
    """The ranks of one job instance compared.

    Attributes
    ----------
    run
        The run whose instance it is (``None`` when a job name chose it).
    run_ids
        The instance's runs, lowest rank first.
    frame
        ``rank_imbalance``, ``rank_kernels`` or ``rank_stragglers`` rows.
    """

    run: RunRef | None
    run_ids: list[str]
    frame: pl.DataFrame


def ranks(
    wh: Warehouse, *, run: RunSelector | None = None, job: str | None = None,
    view: str = RanksOptions.view,
) -> RanksResult:
    """The ranks of the job instance of ``run`` (default: the latest run) or of ``job``'s latest."""
    from tracewh.core.errors import UsageError

    if job is not None and run:
        raise UsageError("give --run or --job, not both")
    ref = None if job is not None else wh.resolve_run(run or "latest")
    ids = wh.rank_runs(job, run=ref)
    df = wh.ranks(job, view=view) if job is not None else wh.ranks(view=view, run=ref)
    return RanksResult(ref, ids, df)


def critical_path_document(ref: RunRef, path: CriticalPath, *, step: int | None = None) -> dict[str, Any]:
    """``tracewh critical-path --format json``: the critical path of run ``ref`` (or its step).

    ``run_id``, ``rank``, ``step`` (None: the whole run), ``window_ns`` ([first, last] ns of
    the step's window; [None, None] for the whole run), ``total_ns``, ``by_bound`` (ns per
    bound of :data:`tracewh.analysis.critical_path.BOUNDS`, summing to ``total_ns``),
    ``edges`` (kind, bound, event_index, name, ts_ns, dur_ns in path order) and, for a rank
    of a multi-rank job, ``cross_rank``: ``waited_on_ns`` (time its collectives on the path
    waited, per rank that arrived last) and ``collectives`` (those kernels, in path order).
    """
    import polars as pl

    doc: dict[str, Any] = {
        "run_id": ref.run_id, "rank": ref.rank, "step": step,
        "window_ns": [path.extra.get("lo_ns"), path.extra.get("hi_ns")],
        "total_ns": path.total_ns, "by_bound": path.by_bound,
        "edges": path.edges.to_dicts(),
    }  # fmt: skip
    cross = path.extra.get("cross_rank")
    if isinstance(cross, pl.DataFrame):
        waited = cross.group_by("last_rank").agg(pl.col("waited_ns").sum()).sort("last_rank")
        doc["cross_rank"] = {
            "waited_on_ns": {str(r): int(w) for r, w in waited.iter_rows()},
            "collectives": cross.to_dicts(),
        }
    out: dict[str, Any] = json_ready(doc)
    return out


def critical_path_edges(path: CriticalPath) -> pl.DataFrame:
    """``tracewh critical-path --by edge``: the path's edges with their ``position`` on it,
    longest first."""
    return path.edges.with_row_index("position").sort("dur_ns", descending=True)


def changes_runs_note(wh: Warehouse, op: str, *, since: str | None = None,
                      where: dict[str, str] | None = None, run: RunRef | None = None) -> str | None:
    """:func:`graph_runs_note` for ``changes --op``: over the runs of its ``op`` series (as
    ``history --op`` with the same ``since`` and ``where``); with ``run`` (the resolved run
    whose series were kept), only its workload and rank."""
    import polars as pl

    series = history(wh, op=op, since=since, where=where).frame
    ids: list[str] = series["run_id"].to_list() if "run_id" in series.columns else []
    runs = wh.runs()
    if run is not None and {"workload", "rank"} <= set(runs.columns):
        mine = runs.filter(pl.col("run_id") == run.run_id)
        same = runs.filter((pl.col("workload") == mine["workload"][0])
                           & pl.col("rank").eq_missing(mine["rank"][0]))
        ids = [i for i in ids if i in set(same["run_id"])]
    return graph_runs_note(wh, ids) if ids else None


def check_runs_note(wh: Warehouse, report: CheckReport) -> str | None:
    """:func:`graph_runs_note` for ``check --op``: over the runs of the checked runs' workloads
    up to the latest checked run (the histories its baselines come from)."""
    import polars as pl

    runs = wh.runs()
    mine = {c.run_id for c in report.checked}
    workloads = {c.workload for c in report.checked if c.workload is not None}
    if not {"workload", "start_ns"} <= set(runs.columns) or not workloads:
        return graph_runs_note(wh, sorted(mine))
    until = runs.filter(pl.col("run_id").is_in(mine))["start_ns"].max()
    ids = runs.filter(pl.col("workload").is_in(workloads) & (pl.col("start_ns") <= until))["run_id"]
    return graph_runs_note(wh, ids.to_list())


def graph_runs_note(wh: Warehouse, run_ids: list[str]) -> str | None:
    """The line for rows over many runs whose operators may come from graph captures
    (``history --op``, ``changes --op``, ``check --op``): how many of the runs replay graphs, and the lowest match quality
    among them (``Warehouse.graph_match`` of each replaying run); None without replays. The
    CLI prints it as a note, the MCP ``history`` tool returns it as one."""
    import polars as pl

    runs = wh.runs()
    if "kind" not in runs.columns:
        return None
    replay = runs.filter(pl.col("run_id").is_in(run_ids) & (pl.col("kind") == "replay"))["run_id"]
    if replay.is_empty():
        return None
    quality = {rid: wh.graph_match(rid).get("match_quality") for rid in replay.to_list()}
    unmapped = sorted(r for r, q in quality.items() if not isinstance(q, int | float))
    mapped = {r: float(q) for r, q in quality.items() if isinstance(q, int | float)}
    parts = [f"graph replays in {len(quality)} of {len(set(run_ids))} runs: their operators' GPU "
             "time comes through the capture"]
    if mapped:
        worst = min(mapped, key=lambda r: mapped[r])
        parts.append(f"lowest match quality {100 * mapped[worst]:.1f}% (run {worst[:12]})")
    if unmapped:
        parts.append(f"{len(unmapped)} run(s) with no capture matched (run {unmapped[0][:12]})")
    return "; ".join(parts) + "; `tracewh ops --run RUN` says how a run's replays matched"
