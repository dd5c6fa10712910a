"""Single-run analysis commands and `tracewh sql`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tracewh import macros
from tracewh.api import Warehouse
from tracewh.cli.common import app, format_option, handle_errors, run_option, warehouse_option
from tracewh.cli.output import emit, render_rows, write_out
from tracewh.errors import UsageError

if TYPE_CHECKING:  # a terminal table needs no Polars: only CSV/JSON output and --out load it
    import polars as pl

_OUT_HELP = "Also write the result to FILE (.csv, .json or .parquet)."
_THRESHOLD_HELP = "Kernel-wait threshold in microseconds (gaps shorter than this are launch overhead)."


def _finish(df: pl.DataFrame, fmt: str, out: Path | None, *, title: str, top: int | None = None) -> None:
    if top is not None:
        if top < 0:
            raise UsageError("--top must be positive")
        df = df.head(top)
    if out is not None:
        write_out(df, out)
    emit(df, fmt, title=title)


def _show(
    warehouse: str, call: macros.MacroCall, run: str, fmt: str, out: Path | None, *,
    title: str, top: int | None = None,
) -> None:
    """Run one analysis macro for a run and print it (a table from plain rows: no Polars)."""
    if top is not None and top < 0:
        raise UsageError("--top must be positive")
    wh = Warehouse(warehouse)
    if fmt == "table" and out is None:
        render_rows(wh.macro_rows(call.name, run, **call.params), title=title, top=top)
        return
    _finish(wh.macro(call.name, run, **call.params), fmt, out, title=title, top=top)


def _threshold_ns(threshold_us: float) -> int:
    if threshold_us < 0:
        raise UsageError("--threshold-us must be >= 0")
    return round(threshold_us * 1000)


@app.command()
def sql(
    query: str = typer.Argument(..., help="A DuckDB SQL query over the warehouse views."),
    warehouse: str = warehouse_option(),
    fmt: str = format_option(),
    out: Path | None = typer.Option(None, "--out", "-o", help=_OUT_HELP),
) -> None:
    """Run a SQL query over the warehouse tables and views.

    Example: tracewh sql "SELECT name, count(*) FROM gpu_ops GROUP BY 1 ORDER BY 2 DESC LIMIT 5"
    """
    with handle_errors():
        if fmt == "table" and out is None:
            render_rows(Warehouse(warehouse).query(query), title="sql")
        else:
            _finish(Warehouse(warehouse).sql(query), fmt, out, title="sql")


@app.command()
def kernels(
    warehouse: str = warehouse_option(),
    run: str = run_option(),
    cat: str | None = typer.Option(None, "--cat", help="Comma-separated trace categories (default: all GPU ops), e.g. kernel,gpu_memcpy."),
    group_by: str = typer.Option("name", "--group-by", help="name, short_name or category."),
    by: str = typer.Option("total", "--by", help="Sort by total, mean, max or calls."),
    top: int | None = typer.Option(20, "--top", "-n", help="Show the N first rows."),
    fmt: str = format_option(),
    out: Path | None = typer.Option(None, "--out", "-o", help=_OUT_HELP),
) -> None:
    """Rank GPU kernels (and copies) of a run by time.

    Example: tracewh kernels --cat kernel,gpu_memcpy --by total --top 10
    """
    with handle_errors():
        cats = [c.strip() for c in cat.split(",") if c.strip()] if cat else None
        call = macros.kernels(cats=cats, group_by=group_by, by=by)
        _show(warehouse, call, run, fmt, out, title=f"kernels by {by}", top=top)


@app.command()
def gaps(
    warehouse: str = warehouse_option(),
    run: str = run_option(),
    largest: int | None = typer.Option(None, "--largest", help="List the N largest gaps with the ops on either side."),
    breakdown: bool = typer.Option(False, "--breakdown", help="Idle breakdown per stream and per device."),
    threshold_us: float = typer.Option(30.0, "--threshold-us", help=_THRESHOLD_HELP),
    fmt: str = format_option(),
    out: Path | None = typer.Option(None, "--out", "-o", help=_OUT_HELP),
) -> None:
    """GPU idle gaps per (device, stream), classified as host wait, kernel wait or other.

    Example: tracewh gaps --largest 10
    """
    with handle_errors():
        threshold = _threshold_ns(threshold_us)
        if largest is not None:
            call = macros.largest_gaps(n=largest, threshold_ns=threshold)
            title = f"{largest} largest gaps"
        elif breakdown:
            call = macros.idle_breakdown(threshold_ns=threshold)
            title = "idle breakdown"
        else:
            call = macros.gaps(threshold_ns=threshold)
            title = "stream gaps"
        _show(warehouse, call, run, fmt, out, title=title)


@app.command()
def launches(
    warehouse: str = warehouse_option(),
    run: str = run_option(),
    by: str = typer.Option("kernel", "--by", help="kernel (per kernel name), step, op (one row per GPU op) or linkage."),
    top: int | None = typer.Option(20, "--top", "-n", help="Show the N first rows."),
    fmt: str = format_option(),
    out: Path | None = typer.Option(None, "--out", "-o", help=_OUT_HELP),
) -> None:
    """Launch latency: runtime-call time, queueing before the GPU start, unlinked ops.

    Example: tracewh launches --by step
    """
    with handle_errors():
        _show(warehouse, macros.launches(by=by), run, fmt, out, title=f"launch latency by {by}", top=top)


@app.command()
def queue(
    warehouse: str = warehouse_option(),
    run: str = run_option(),
    fmt: str = format_option(),
    out: Path | None = typer.Option(None, "--out", "-o", help=_OUT_HELP),
) -> None:
    """Launch-queue depth per stream: time-weighted mean, max, time at >= 1024 outstanding.

    Example: tracewh queue --run latest
    """
    with handle_errors():
        _show(warehouse, macros.queue_depth(), run, fmt, out, title="queue depth")


@app.command()
def steps(
    warehouse: str = warehouse_option(),
    run: str = run_option(),
    threshold_us: float = typer.Option(30.0, "--threshold-us", help=_THRESHOLD_HELP),
    fmt: str = format_option(),
    out: Path | None = typer.Option(None, "--out", "-o", help=_OUT_HELP),
) -> None:
    """Per ProfilerStep: wall time, GPU busy and idle, top kernel, CPU- or GPU-bound.

    Example: tracewh steps --format csv
    """
    with handle_errors():
        call = macros.steps(threshold_ns=_threshold_ns(threshold_us))
        _show(warehouse, call, run, fmt, out, title="steps")


@app.command()
def ops(
    warehouse: str = warehouse_option(),
    run: str = run_option(),
    cpu: bool = typer.Option(False, "--cpu", help="CPU-side operator time (self and total) instead of GPU time."),
    top: int | None = typer.Option(20, "--top", "-n", help="Show the N first rows."),
    fmt: str = format_option(),
    out: Path | None = typer.Option(None, "--out", "-o", help=_OUT_HELP),
) -> None:
    """GPU time per CPU operator and input shapes (kernel -> operator attribution).

    Example: tracewh ops --top 15
    """
    with handle_errors():
        title = "CPU op time" if cpu else "GPU time by operator"
        _show(warehouse, macros.ops(cpu=cpu), run, fmt, out, title=title, top=top)


@app.command()
def memcpy(
    warehouse: str = warehouse_option(),
    run: str = run_option(),
    fmt: str = format_option(),
    out: Path | None = typer.Option(None, "--out", "-o", help=_OUT_HELP),
) -> None:
    """Memory copies per kind (HtoD, DtoH, DtoD, PtoP): count, bytes, time, GB/s.

    Example: tracewh memcpy
    """
    with handle_errors():
        _show(warehouse, macros.memcpy(), run, fmt, out, title="memory copies")


@app.command()
def breakdown(
    warehouse: str = warehouse_option(),
    run: str = run_option(),
    fmt: str = format_option(),
    out: Path | None = typer.Option(None, "--out", "-o", help=_OUT_HELP),
) -> None:
    """GPU time per device: computation, communication (overlapped/exposed), memcpy, idle.

    Example: tracewh breakdown
    """
    with handle_errors():
        _show(warehouse, macros.breakdown(), run, fmt, out, title="GPU time breakdown")


@app.command()
def ranks(
    warehouse: str = warehouse_option(),
    job: str | None = typer.Option(None, "--job", help="Job name, or a run selector whose job to use (default: the latest run's job)."),
    view: str = typer.Option("imbalance", "--view", help="imbalance (per kernel), kernels (per rank) or stragglers (per step)."),
    top: int | None = typer.Option(20, "--top", "-n", help="Show the N first rows."),
    fmt: str = format_option(),
    out: Path | None = typer.Option(None, "--out", "-o", help=_OUT_HELP),
) -> None:
    """The same kernels across the ranks of one job instance: imbalance and stragglers.

    The instance is the distinct ranks of one workload in the job (unrelated traces that
    share the folder are other workloads, never ranks).

    Example: tracewh ranks --view stragglers
    """
    with handle_errors():
        wh = Warehouse(warehouse)
        ids = wh.rank_runs(job)
        df = wh.ranks(job, view=view)
        _finish(df, fmt, out, title=f"ranks: {view} ({len(ids)} rank(s) of one job instance)", top=top)
