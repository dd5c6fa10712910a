"""`tracewh report`, `tracewh export` and `tracewh flame`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from tracewh.api import Warehouse
from tracewh.cli.common import (
    RUN_HELP,
    app,
    check_format,
    format_option,
    handle_errors,
    open_warehouse,
    run_option,
    selector,
    warehouse_option,
)
from tracewh.cli.conventions import renamed_option
from tracewh.cli.output import note, run_title, selection_note
from tracewh.core.errors import MissingExtraError, UsageError
from tracewh.core.outdir import check_output_dir
from tracewh.query.macros import DIFF_LEVELS as LEVELS

# tracewh.report's modules are imported by the commands that use them: `report` needs the
# report extra (vl-convert); `export` and `flame` need none (Polars, of the base install)
#: The modules of the report extra (tracewh[report]) that the report's charts import.
REPORT_MODULES = ("vl_convert",)
#: The image formats of `tracewh report --chart-format` (tracewh.report.render.CHART_FORMATS).
CHART_FORMATS = ("svg", "png")
#: What `tracewh flame --format` writes (tracewh.report.flame.FORMATS).
FLAME_FORMATS = ("folded", "speedscope")


@app.command()
def report(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option("Run selector (default: latest). With --site, each --run adds the runs it matches; without --site, repeated terms combine (a run must match all)."),
    compare: str | None = typer.Option(None, "--compare", metavar="SEL", help="Also compare the run (A) with this run (B): a diff section read as `tracewh diff A B` (deltas B - A), each side named with its device."),
    level: str = typer.Option("short_name", "--level", "-l", metavar="|".join(LEVELS), help="What the --compare section compares: kernel, short_name, category or op (CPU operator and input shapes)."),
    since: str | None = typer.Option(None, "--since", metavar="WHEN", help="History window: 90d, 12w (counted back from the latest run's day, as history and changes) or YYYY-MM-DD (default: all runs). The runs it leaves out are counted in the output and the history section."),
    out: Path | None = typer.Option(None, "--out", "-o", metavar="PATH", help="Write report.md, report.html and charts/ into the folder PATH."),
    site: Path | None = typer.Option(None, "--site", metavar="PATH", help="Write a static site (index, a page per run, history, diff) into the folder PATH."),
    limit: int = typer.Option(20, "--limit", metavar="N", help="Runs in the --site when no --run is given (latest first)."),
    chart_format: str = typer.Option("svg", "--chart-format", metavar="|".join(CHART_FORMATS), help="Image format of the --out report's charts (charts/ and report.html): svg (vector, the default) or png (2x pixels, for tools that take no SVG)."),
) -> None:
    """Charts and tables of a run as Markdown + self-contained HTML, or a static site of many runs.

    Example: tracewh report --out reports/latest --compare 'night=2025-01-01' --level op
    """
    with handle_errors():
        require_report_extra("report")
        if out is None and site is None:
            raise UsageError("give --out PATH (a report) and/or --site PATH (a static site)")
        if level not in LEVELS:
            raise UsageError(f"--level must be one of {', '.join(LEVELS)}, not {level!r}")
        if chart_format not in CHART_FORMATS:
            raise UsageError(f"--chart-format must be one of {', '.join(CHART_FORMATS)}, not {chart_format!r}")
        # one snapshot and one connection for every query of the report(s)
        from tracewh.report import REPORT_QUERY_THREADS

        with open_warehouse(warehouse).session(query_threads=REPORT_QUERY_THREADS) as wh:
            _report(wh, out=out, site=site, run=run, compare=compare, since=since,
                    limit=limit, level=level, chart_format=chart_format)


def _report(
    wh: Warehouse, *, out: Path | None, site: Path | None, run: list[str] | None,
    compare: str | None, since: str | None, limit: int, level: str, chart_format: str = "svg",
) -> None:
    if out is not None:
        t0 = time.perf_counter()
        check_output_dir(out, kind="report")  # refused before any work, nothing started
        ref = wh.resolve_run(selector(run))
        if selection_note(ref):
            note(selection_note(ref) or "")
        # the chart process starts before the report's modules are imported (~0.2 s), so its
        # engine's start overlaps them (tracewh.report.render_process)
        from tracewh.report.render_process import RenderProcess

        with RenderProcess(chart_format) as renderer:
            from tracewh.report import build_report

            result = build_report(wh, out, run=ref, compare=compare, since=since, level=level,
                                  chart_format=chart_format, renderer=renderer)
        typer.echo(f"wrote {result.folder / 'report.html'} and report.md for {run_title(ref)}: "
                   f"{len(result.charts)} charts in {time.perf_counter() - t0:.1f} s")
        if result.empty:
            typer.echo(f"  no data for: {', '.join(result.empty)}")
        for line in result.notes:
            note(line)
    if site is not None:
        from tracewh.report.site import build_site

        t0 = time.perf_counter()
        built = build_site(wh, site, runs=run or None, limit=limit, since=since)
        typer.echo(f"wrote {built.folder / 'index.html'}: {len(built.pages)} pages, {built.charts} charts "
                   f"in {time.perf_counter() - t0:.1f} s")


def require_report_extra(command: str) -> None:
    """:class:`MissingExtraError` unless the report extra's modules can be imported."""
    import importlib.util

    missing = [m for m in REPORT_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise MissingExtraError("report", missing, feature=f"tracewh {command}")


def _csv(text: str | None) -> list[str] | None:
    return [p.strip() for p in text.split(",") if p.strip()] if text else None


def _summary(fmt: str, text: str, data: dict[str, object]) -> None:
    if fmt == "json":
        typer.echo(json.dumps(data, default=str))
    else:
        typer.echo(text)


@app.command()
def export(
    run_arg: str | None = typer.Argument(None, metavar="[SEL]", help="Run selector (or --run)."),
    run: list[str] | None = run_option(RUN_HELP),
    out: Path = typer.Option(..., "--out", "-o", metavar="PATH", help="Trace file to write (.json or .json.gz)."),
    warehouse: str = warehouse_option(),
    steps: str | None = typer.Option(None, "--steps", metavar="A-B", help="Only ProfilerSteps A-B (inclusive) and the GPU ops they launched."),
    streams: str | None = typer.Option(None, "--streams", metavar="N,...", help="Comma-separated GPU streams to keep (other GPU ops are dropped)."),
    cat: str | None = typer.Option(None, "--cat", metavar="CAT,...", help="Comma-separated categories to keep (launch flows always kept)."),
    fmt: str = format_option("text", ("text", "json")),
) -> None:
    """Export a run back to Chrome/Perfetto trace JSON (ui.perfetto.dev, chrome://tracing).

    --format says how to report what was written (text, or one JSON object).

    Example: tracewh export --run latest --out run.json.gz --steps 3-4
    """
    with handle_errors():
        from tracewh.report.export import ExportFilter, export_trace, parse_steps

        check_format(fmt, ("text", "json"))
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
        wh = open_warehouse(warehouse)
        ref = wh.resolve_run(selector(run_arg, run))
        if selection_note(ref):
            note(selection_note(ref) or "")
        result = export_trace(wh, ref, out, where=where)
        _summary(fmt, f"wrote {result.path}: {run_title(ref)}, {result.events:,} events "
                      f"({result.flows:,} flow events, {result.overlap_lanes} overlap lanes)",
                 {"path": str(result.path), "run_id": result.run_id, "events": result.events,
                  "flows": result.flows, "overlap_lanes": result.overlap_lanes})
        if result.events == 0:
            note(f"nothing matched the filters (--steps {steps}, --streams {streams}, --cat {cat}): "
                 "the file holds no event")


@app.command()
def flame(
    run_arg: str | None = typer.Argument(None, metavar="[SEL]", help="Run selector (or --run)."),
    run: list[str] | None = run_option(RUN_HELP),
    out: Path = typer.Option(..., "--out", "-o", metavar="PATH", help="File to write."),
    warehouse: str = warehouse_option(),
    file_format: str | None = typer.Option(None, "--file-format", metavar="|".join(FLAME_FORMATS), help="What the file holds: folded stacks (flamegraph.pl, inferno; the default) or speedscope JSON.", show_default=False),
    legacy_format: str | None = typer.Option(None, "--format", "-f", hidden=True, metavar="|".join(FLAME_FORMATS), help="Deprecated spelling of --file-format."),
) -> None:
    """GPU time as flame-graph stacks (module; cpu ops; kernel): folded or speedscope JSON.

    Example: tracewh flame --run latest --out gpu.folded && flamegraph.pl gpu.folded > gpu.svg
    Example: tracewh flame --out gpu.speedscope.json --file-format speedscope
    """
    with handle_errors():
        from tracewh.report.flame import write_flame

        fmt = renamed_option(legacy_format, file_format, old="--format", new="--file-format",
                             default="folded", command="flame")
        if fmt not in FLAME_FORMATS:
            raise UsageError(f"--file-format must be one of {', '.join(FLAME_FORMATS)}, not {fmt!r}")
        wh = open_warehouse(warehouse)
        ref = wh.resolve_run(selector(run_arg, run))
        if selection_note(ref):
            note(selection_note(ref) or "")
        path = write_flame(wh, ref, out, fmt=fmt)
        typer.echo(f"wrote {path}: {run_title(ref)}")
