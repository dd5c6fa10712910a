"""Single-run analysis commands and `tracewh sql`.

Every command takes ``--run SEL`` (repeatable), ``--top N``, ``--format`` and ``--out`` (see
:mod:`tracewh.cli.common`) and prints through :func:`tracewh.cli.output.show`, whose title
names the run. An empty result says why (what was filtered, which values exist).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tracewh import results
from tracewh.api import Warehouse
from tracewh.cli.common import (
    app,
    check_format,
    format_option,
    graph_notes,
    handle_errors,
    open_warehouse,
    out_option,
    run_option,
    selector,
    top_option,
    warehouse_option,
)
from tracewh.cli.output import show
from tracewh.core.errors import UsageError
from tracewh.query import macros
from tracewh.query.options import (
    KERNEL_GROUPS,
    KERNEL_ORDERS,
    KERNEL_WAIT_THRESHOLD_US,
    LAUNCH_VIEWS,
    RANK_VIEWS,
    GapsOptions,
    KernelsOptions,
    LaunchesOptions,
    OpsOptions,
    RanksOptions,
    StepsOptions,
    threshold_ns,
)
from tracewh.query.runsel import RunRef
from tracewh.query.sqllimits import DEFAULT_MEMORY, DEFAULT_SPILL, DEFAULT_TIME_S

if TYPE_CHECKING:  # a terminal table needs no Polars: only CSV/JSON output and --out load it
    import polars as pl

    from tracewh.query.db import Rows

_THRESHOLD_HELP = "Kernel-wait threshold in µs: shorter gaps count as launch overhead."


def _threshold_option() -> float:
    return typer.Option(KERNEL_WAIT_THRESHOLD_US, "--threshold-us", metavar="US", help=_THRESHOLD_HELP)  # type: ignore[no-any-return]


def _run(
    warehouse: str, call: macros.MacroCall, run: list[str] | None, fmt: str, out: Path | None
) -> tuple[Warehouse, RunRef, pl.DataFrame | Rows]:
    """The warehouse, the run resolved and its analysis, in one connection.

    A terminal table is printed from plain rows (no Polars); CSV, JSON and ``--out`` get a
    frame.
    """
    check_format(fmt)
    wh = open_warehouse(warehouse)
    rel = wh.macro_relation(call.name, selector(run), **call.params)
    ref, data = rel.fetch("rows" if fmt in ("table", "markdown") and out is None else "polars")
    return wh, ref, data


def _has_null(data: pl.DataFrame | Rows, column: str) -> bool:
    if column not in data.columns:
        return False
    i = list(data.columns).index(column)
    rows = data.rows if isinstance(data.rows, list) else data.iter_rows()  # Rows, else a frame
    return any(row[i] is None for row in rows)


def _empty(data: pl.DataFrame | Rows) -> bool:
    return (data.height if hasattr(data, "height") else len(data.rows)) == 0


def _why_no_gpu_ops(wh: Warehouse, ref: RunRef, what: str) -> str:
    row = wh.run_row(ref)
    n = row.get("n_gpu_ops") or 0
    if not n:
        return f"no {what}: run {ref.short_id} has no GPU ops (a {row.get('backend') or 'CPU'}-only trace?)"
    return f"no {what} in run {ref.short_id} ({n} GPU ops)"


def _values_text(values: list[tuple[object, int]]) -> str:
    return ", ".join(f"{v!s} ({n})" for v, n in values)


@app.command(name="sql")
def sql_cmd(
    query: str = typer.Argument(..., metavar="QUERY", help="A DuckDB SQL query over the warehouse views."),
    warehouse: str = warehouse_option(),
    top: int | None = top_option(None),
    fmt: str = format_option(),
    out: Path | None = out_option(),
    unrestricted: bool = typer.Option(
        False, "--unrestricted",
        help="Lift the confinement: any statement (COPY, ATTACH, CREATE...) and any file this "
        "user can read or write. Without it a query may only read, and only the warehouse.",
    ),
    time_limit: float = typer.Option(DEFAULT_TIME_S, "--time-limit", metavar="SECONDS", help="Stop the query after this many seconds (0: no limit). Ctrl-C stops it at any time."),
    memory_limit: str = typer.Option(DEFAULT_MEMORY, "--memory-limit", metavar="SIZE", help="DuckDB memory limit of the query, e.g. 2GB, 500MB (none: DuckDB's default, 80% of RAM)."),
    spill_limit: str = typer.Option(DEFAULT_SPILL, "--spill-limit", metavar="SIZE", help="Most the query may spill to its private temporary folder (removed afterwards), e.g. 4GB."),
) -> None:
    """Run a read-only SQL query over the warehouse tables and views.

    The query may only read (SELECT, WITH, SHOW, DESCRIBE, SUMMARIZE, EXPLAIN) and only
    the warehouse's files; --unrestricted lifts both.

    Per-run macros take a run_id; resolve a selector with run('…'):
    SELECT * FROM stream_gaps(run('959efc7b')).

    Every query runs with a time limit, a memory limit and a cap on what it may spill to
    disk (defaults 300 s, 2GB, 4GB); Ctrl-C stops it within a second.

    Example: tracewh sql "SELECT name, count(*) FROM gpu_ops GROUP BY 1 ORDER BY 2 DESC LIMIT 5"
    """
    from tracewh.query.sqllimits import QueryLimits

    with handle_errors():
        check_format(fmt)
        if time_limit < 0:
            raise UsageError(f"--time-limit must be >= 0 seconds (0: no limit), not {time_limit:g}")
        limits = QueryLimits(
            time_s=time_limit or None,
            memory=None if memory_limit.strip().lower() in ("", "none") else memory_limit,
            spill=None if spill_limit.strip().lower() in ("", "none") else spill_limit,
        )
        wh = open_warehouse(warehouse)
        rel = wh.relation(query, unrestricted=unrestricted, limits=limits)
        df = rel.rows() if fmt in ("table", "markdown") and out is None else rel.pl()
        show(df, fmt, title="sql", top=top, out=out, empty=_sql_hint(query) if _empty(df) else None)


_MACRO_CALL = re.compile(r"\b(\w+)\s*\(\s*'([^']*)'")


def _sql_hint(query: str) -> str | None:
    """Why a query calling a per-run macro with a selector (not a run_id) found nothing."""
    for name, literal in _MACRO_CALL.findall(query):
        if name.lower() in ("run", "run_matches") or re.fullmatch(r"[0-9a-f]{16}", literal):
            continue
        if _per_run_macro(name):
            return (
                f"{name}('{literal}'): per-run macros take a full run_id; resolve a selector "
                f"(prefix, KEY=VALUE, latest) with run(): {name}(run('{literal}'))"
            )
    return None


def _per_run_macro(name: str) -> bool:
    from tracewh.core.sqlfiles import sql_files

    pattern = re.compile(rf"MACRO\s+{re.escape(name)}\s*\(\s*run\b", re.IGNORECASE)
    return any(pattern.search(p.read_text(encoding="utf-8")) for p in sql_files())


@app.command()
def kernels(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option(),
    cat: str | None = typer.Option(None, "--cat", metavar="CAT,...", help="Comma-separated trace categories (exact, case-sensitive; default: all GPU ops), e.g. kernel,gpu_memcpy."),
    group_by: str = typer.Option(KernelsOptions.group_by, "--group-by", metavar="|".join(KERNEL_GROUPS), help="Group GPU ops by name, short_name or category."),
    by: str = typer.Option(KernelsOptions.by, "--by", metavar="|".join(KERNEL_ORDERS), help="Rank by total, mean or max time, or by calls."),
    top: int | None = top_option(KernelsOptions.top),
    fmt: str = format_option(),
    out: Path | None = out_option(),
) -> None:
    """Rank GPU kernels (and copies) of a run by time.

    Example: tracewh kernels --cat kernel,gpu_memcpy --by total --top 10
    """
    with handle_errors():
        cats = [c.strip() for c in cat.split(",") if c.strip()] if cat else None
        call = macros.kernels(cats=cats, group_by=group_by, by=by)
        wh, ref, df = _run(warehouse, call, run, fmt, out)
        empty = None
        if _empty(df):
            if cats:
                present = wh.values(ref, "cat")
                empty = (f"no GPU op of run {ref.short_id} has cat {', '.join(map(repr, cats))} "
                         f"(exact, case-sensitive); its GPU ops' cats: {_values_text(present) or 'none'}")
            else:
                empty = _why_no_gpu_ops(wh, ref, "GPU ops with a duration")
        show(df, fmt, title=f"kernels by {by}", run=ref, top=top, out=out, empty=empty)


@app.command()
def gaps(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option(),
    largest: int | None = typer.Option(None, "--largest", metavar="N", help="List the N largest gaps with the ops on either side."),
    breakdown: bool = typer.Option(False, "--breakdown", help="Idle breakdown per stream and per device."),
    threshold_us: float = _threshold_option(),
    top: int | None = top_option(GapsOptions.top),
    fmt: str = format_option(),
    out: Path | None = out_option(),
) -> None:
    """GPU idle gaps per (device, stream), classified as host wait, kernel wait or other.

    Example: tracewh gaps --largest 10
    """
    with handle_errors():
        threshold = threshold_ns(threshold_us)
        if largest is not None:
            if largest < 1:
                raise UsageError("--largest must be at least 1")
            call = macros.largest_gaps(n=largest, threshold_ns=threshold)
            title = f"{largest} largest gaps"
        elif breakdown:
            call = macros.idle_breakdown(threshold_ns=threshold)
            title = "idle breakdown"
        else:
            call = macros.gaps(threshold_ns=threshold)
            title = "stream gaps"
        wh, ref, df = _run(warehouse, call, run, fmt, out)
        empty = _why_no_gpu_ops(wh, ref, "gaps between GPU ops") if _empty(df) else None
        show(df, fmt, title=title, run=ref, top=top, out=out, empty=empty)


@app.command()
def launches(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option(),
    by: str = typer.Option(LaunchesOptions.by, "--by", metavar="|".join(LAUNCH_VIEWS), help="kernel (per kernel name), step, op (one row per launch), linkage or graph (one row per CUDA/HIP graph launch)."),
    top: int | None = top_option(LaunchesOptions.top),
    fmt: str = format_option(),
    out: Path | None = out_option(),
) -> None:
    """Launch latency: runtime-call time, queueing before the GPU start, unlinked ops.

    A CUDA/HIP graph launch is one launch, measured to its first replayed kernel.

    Example: tracewh launches --by step
    """
    with handle_errors():
        wh, ref, df = _run(warehouse, macros.launches(by=by), run, fmt, out)
        empty = _why_no_gpu_ops(wh, ref, "GPU op linked to a launch call") if _empty(df) else None
        show(df, fmt, title=f"launch latency by {by}", run=ref, top=top, out=out, empty=empty)


@app.command()
def queue(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option(),
    top: int | None = top_option(None),
    fmt: str = format_option(),
    out: Path | None = out_option(),
) -> None:
    """Launch-queue depth per stream: time-weighted mean, max, time at >= 1024 outstanding.

    Example: tracewh queue --run latest
    """
    with handle_errors():
        wh, ref, df = _run(warehouse, macros.queue_depth(), run, fmt, out)
        empty = _why_no_gpu_ops(wh, ref, "GPU op linked to a launch call") if _empty(df) else None
        show(df, fmt, title="queue depth", run=ref, top=top, out=out, empty=empty)


@app.command()
def steps(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option(),
    threshold_us: float = _threshold_option(),
    top: int | None = top_option(StepsOptions.top),
    fmt: str = format_option(),
    out: Path | None = out_option(),
) -> None:
    """Per step, by launch: wall time, GPU busy, GPU tail past the step's CPU end, GPU idle split
    into lead, host wait, kernel wait, other wait and trail (they add up), top kernel, bound.

    A step owns the GPU ops it launched; steps are ProfilerStep#N spans or, ingested with
    --step-marker, the marker spans.

    Example: tracewh steps --format csv
    """
    with handle_errors():
        call = macros.steps(threshold_ns=threshold_ns(threshold_us))
        _, ref, df = _run(warehouse, call, run, fmt, out)
        empty = (f"run {ref.short_id} has no steps (no ProfilerStep#N spans: record steps with "
                 "torch.profiler's schedule and prof.step(), or ingest with --step-marker)"
                 ) if _empty(df) else None
        show(df, fmt, title="steps", run=ref, top=top, out=out, empty=empty)


@app.command()
def ops(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option(),
    cpu: bool = typer.Option(OpsOptions.cpu, "--cpu", help="CPU-side operator time (self and total) instead of GPU time."),
    top: int | None = top_option(OpsOptions.top),
    fmt: str = format_option(),
    out: Path | None = out_option(),
) -> None:
    """GPU time per CPU operator and input shapes (kernel -> operator attribution).

    Example: tracewh ops --top 15
    """
    with handle_errors():
        wh, ref, df = _run(warehouse, macros.ops(cpu=cpu), run, fmt, out)
        empty = None
        if _empty(df):
            empty = (f"run {ref.short_id} has no cpu_op events" if cpu
                     else _why_no_gpu_ops(wh, ref, "GPU ops"))
        notes = [] if cpu else graph_notes(wh, ref)
        if not cpu and _has_null(df, "op_name"):
            notes.append("an empty op_name: GPU ops no CPU operator encloses, unlinked ones among "
                         "them (no launch call found: `tracewh launches --by linkage` counts them)")
        show(df, fmt, title="CPU op time" if cpu else "GPU time by operator", run=ref, top=top,
             out=out, empty=empty, notes=notes)


@app.command()
def memcpy(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option(),
    top: int | None = top_option(None),
    fmt: str = format_option(),
    out: Path | None = out_option(),
) -> None:
    """Memory copies per kind (HtoD, DtoH, DtoD, PtoP): count, bytes, time, GB/s.

    Example: tracewh memcpy
    """
    with handle_errors():
        wh, ref, df = _run(warehouse, macros.memcpy(), run, fmt, out)
        empty = _why_no_gpu_ops(wh, ref, "memory copies") if _empty(df) else None
        show(df, fmt, title="memory copies", run=ref, top=top, out=out, empty=empty)


@app.command()
def breakdown(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option(),
    top: int | None = top_option(None),
    fmt: str = format_option(),
    out: Path | None = out_option(),
) -> None:
    """GPU time per device: computation, communication (overlapped/exposed), memcpy, idle.

    Example: tracewh breakdown
    """
    with handle_errors():
        wh, ref, df = _run(warehouse, macros.breakdown(), run, fmt, out)
        empty = _why_no_gpu_ops(wh, ref, "GPU ops with a duration") if _empty(df) else None
        show(df, fmt, title="GPU time breakdown", run=ref, top=top, out=out, empty=empty)


@app.command()
def ranks(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option("Compare the ranks of this run's job instance (default: the latest run): a run_id prefix, KEY=VALUE, latest."),
    job: str | None = typer.Option(None, "--job", metavar="JOB", help="A job name (runs.job) instead of --run: its latest instance."),
    view: str = typer.Option(RanksOptions.view, "--view", metavar="|".join(RANK_VIEWS), help="imbalance (per kernel), kernels (per rank) or stragglers (per step)."),
    top: int | None = top_option(RanksOptions.top),
    fmt: str = format_option(),
    out: Path | None = out_option(),
) -> None:
    """The same kernels across the ranks of one job instance: imbalance and stragglers.

    The instance is the distinct ranks of one workload in the job (unrelated traces that
    share the folder are other workloads, never ranks).

    Example: tracewh ranks --run model=dit --view stragglers
    """
    with handle_errors():
        check_format(fmt)
        result = results.ranks(open_warehouse(warehouse), run=selector(run) if run else None, job=job,
                               view=view)
        ref, ids, df = result.run, result.run_ids, result.frame
        what = f"job {job!r}" if job is not None else "the job instance of this run"
        notes = [f"{what}: {len(ids)} rank(s) of one job instance"]
        if view == "stragglers":
            from tracewh.analysis.collectives import arrival_alerts

            notes += [f"alert: {line}" for line in arrival_alerts(df)]
        if view == "imbalance":
            notes.append("imbalance = max_rank_total_ns ÷ median_rank_total_ns (the slowest rank's "
                         "GPU time in the kernel over the median rank's; 1.0: balanced)")
        empty = f"no GPU ops in the runs of {what}" if df.is_empty() else None
        title = "ranks: imbalance (max ÷ median rank)" if view == "imbalance" else f"ranks: {view}"
        show(df, fmt, title=title, run=ref, top=top, out=out, notes=notes, empty=empty)
