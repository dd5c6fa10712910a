"""`tracewh report`, `tracewh export` and `tracewh flame`."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from tracewh.api import Warehouse
from tracewh.cli.common import app, handle_errors, warehouse_option
from tracewh.errors import UsageError

# tracewh.report (Altair, vl-convert, Polars) is imported by the commands that use it


@app.command()
def report(
    warehouse: str = warehouse_option(),
    run: list[str] = typer.Option(["latest"], "--run", "-r", help="Run selector (repeat for several runs in the --site)."),
    compare: str | None = typer.Option(None, "--compare", help="Also compare the run with this run (a diff section)."),
    since: str = typer.Option("90d", "--since", help="History window: 90d, 12w or a date."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write report.md, report.html and charts/ into DIR."),
    site: Path | None = typer.Option(None, "--site", help="Write a static site (index, a page per run, history, diff) into DIR."),
    limit: int = typer.Option(20, "--limit", help="Runs in the --site when no --run is given (newest first)."),
) -> None:
    """Charts and tables of a run as Markdown + self-contained HTML, or a static site of many runs.

    Example: tracewh report --out reports/latest --compare 'night=2025-01-01'
    """
    with handle_errors():
        if out is None and site is None:
            raise UsageError("give --out DIR (a report) and/or --site DIR (a static site)")
        # one snapshot and one connection for every query of the report(s)
        with Warehouse(warehouse).session() as wh:
            _report(wh, out=out, site=site, run=run, compare=compare, since=since, limit=limit)


def _report(
    wh: Warehouse, *, out: Path | None, site: Path | None, run: list[str], compare: str | None,
    since: str, limit: int,
) -> None:
    from tracewh.report import build_report
    from tracewh.report.site import build_site

    if out is not None:
        t0 = time.perf_counter()
        result = build_report(wh, out, run=run[0], compare=compare, since=since)
        typer.echo(f"wrote {result.folder / 'report.html'} and report.md: {len(result.charts)} charts "
                   f"in {time.perf_counter() - t0:.1f} s")
        if result.empty:
            typer.echo(f"  no data for: {', '.join(result.empty)}")
    if site is not None:
        t0 = time.perf_counter()
        selected = None if run == ["latest"] else run
        built = build_site(wh, site, runs=selected, limit=limit, since=since)
        typer.echo(f"wrote {built.folder / 'index.html'}: {len(built.pages)} pages, {built.charts} charts "
                   f"in {time.perf_counter() - t0:.1f} s")


def _csv(text: str | None) -> list[str] | None:
    return [p.strip() for p in text.split(",") if p.strip()] if text else None


@app.command()
def export(
    run: str = typer.Argument(..., help="Run selector: a run_id prefix, 'latest', or KEY=VALUE."),
    out: Path = typer.Option(..., "--out", "-o", help="Trace file to write (.json or .json.gz)."),
    warehouse: str = warehouse_option(),
    steps: str | None = typer.Option(None, "--steps", help="Only ProfilerSteps A-B (inclusive) and the GPU ops they launched."),
    streams: str | None = typer.Option(None, "--streams", help="Comma-separated GPU streams to keep (other GPU ops are dropped)."),
    cat: str | None = typer.Option(None, "--cat", help="Comma-separated categories to keep (launch flows always kept)."),
) -> None:
    """Export a run back to Chrome/Perfetto trace JSON (ui.perfetto.dev, chrome://tracing).

    Example: tracewh export latest --out run.json.gz --steps 3-4
    """
    from tracewh.report.export import ExportFilter, export_trace, parse_steps

    with handle_errors():
        if not out.name.endswith((".json", ".json.gz")):
            raise UsageError(f"--out must end in .json or .json.gz, not {out.name!r}")
        try:
            stream_set = frozenset(int(s) for s in _csv(streams) or []) if streams else None
        except ValueError:
            raise UsageError(f"--streams must be integers, not {streams!r}") from None
        cats = _csv(cat)
        where = ExportFilter(
            steps=parse_steps(steps) if steps else None,
            streams=stream_set,
            cats=frozenset(cats) if cats else None,
        )
        result = export_trace(Warehouse(warehouse), run, out, where=where)
        typer.echo(f"wrote {result.path}: run {result.run_id}, {result.events:,} events "
                   f"({result.flows:,} flow events, {result.overlap_lanes} overlap lanes)")


@app.command()
def flame(
    run: str = typer.Argument(..., help="Run selector: a run_id prefix, 'latest', or KEY=VALUE."),
    out: Path = typer.Option(..., "--out", "-o", help="File to write."),
    warehouse: str = warehouse_option(),
    fmt: str = typer.Option("folded", "--format", "-f", help="folded or speedscope."),
) -> None:
    """GPU time as flame-graph stacks (module; cpu ops; kernel): folded or speedscope JSON.

    Example: tracewh flame latest --out gpu.folded && flamegraph.pl gpu.folded > gpu.svg
    """
    from tracewh.report.flame import write_flame

    with handle_errors():
        path = write_flame(Warehouse(warehouse), run, out, fmt=fmt)
        typer.echo(f"wrote {path}")
