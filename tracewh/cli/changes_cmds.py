"""`tracewh changes`: change points over the whole history, one alert per group."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from tracewh import results
from tracewh.cli.common import (
    app,
    check_format,
    format_option,
    handle_errors,
    open_warehouse,
    out_option,
    parse_pairs,
    run_option,
    top_option,
    warehouse_option,
    where_option,
)
from tracewh.cli.history_cmds import bytes_text, threshold_of
from tracewh.cli.layout import fit_names
from tracewh.cli.output import note, run_title, selection_note, show, terminal_width, write_out
from tracewh.history.options import ChangesOptions

if TYPE_CHECKING:  # the change-point modules (Polars, numpy) load when the command runs
    from tracewh.history.alerts import ChangesReport


#: Said when runs ingested before fingerprints were fingerprinted from their tables.
FINGERPRINTED_NOTE = (
    "note: {n} run(s) ingested before fingerprints existed were fingerprinted from their "
    "tables (`tracewh compact` stores them)"
)


def _short(r: dict[str, object], fitted: dict[str, str] | None = None) -> str:
    """A change's metric for people: short name and kernel key (elided in the middle) for kernels."""
    metric, key = str(r["metric"]), str(r["key"])
    if metric == "step":
        return "step time"
    if metric == "idle":
        return "GPU idle fraction"
    if metric == "memory":
        return f"{key.removeprefix('peak_allocated_').upper()} peak allocated per step"
    if metric == "kernel":
        short = str(r["short_name"] or key)
        k = (fitted or {}).get(key, key)
        return f"kernel {short} [{k}]" if k != short else f"kernel {short}"
    if metric == "op_tflops":
        return f"operator {r['name']} [{r['short_name']}] achieved TFLOP/s"
    if metric == "critical_path":
        return f"critical-path share {key}"
    return f"{metric} {key}"


def _value(r: dict[str, object], v: float) -> str:
    if r["metric"] == "memory":
        return bytes_text(v)
    if r["metric"] == "op_tflops":
        return f"{v:.2f} TFLOP/s"
    if r["metric"] == "critical_path":
        return f"{100 * v:.1f}%"
    return f"{v:.3f}" if r["metric"] == "idle" else f"{v:.3f} ms"


def report_text(report: ChangesReport, *, rows: list[dict[str, Any]] | None = None,
                width: int | None = None) -> str:
    """The changes, one block per alert group, largest contributors first.

    Kernel keys are elided in the middle to fit ``width`` (the terminal's), keeping what
    tells them apart.
    """
    rows = report.to_dicts() if rows is None else rows
    keys = [str(r["key"]) for r in rows if r["metric"] == "kernel"]
    fitted = dict(zip(keys, fit_names(keys, max(40, (width or terminal_width()) - 110)), strict=True))
    p = report.params
    since = f"since {p['since']}" if p["since"] else "all history"
    if p.get("latest_day"):
        since += f", counted back from the latest run ({p['latest_day']})"
    lines = [
        f"tracewh changes: {report.series} series over {report.runs} runs ({since}); "
        f"{len(rows)} change(s) in {len({r['group'] for r in rows})} group(s)",
        "E-divisive means, t-test corrected for the search (alpha "
        f"{p['alpha']:g}), runs' own step spread as the noise floor; per step",
    ]
    if not report.excluded.is_empty():
        lines.append(
            f"left out: {report.excluded.height} run(s) unusable for comparison ("
            + ", ".join(sorted({str(x) for x in report.excluded["reasons"].to_list()}))
            + "); --include-unusable keeps them"
        )
    if report.window_note():
        lines.append(report.window_note() or "")
    if report.fingerprinted:
        lines.append(FINGERPRINTED_NOTE.format(n=report.fingerprinted))
    group = None
    for r in rows:
        if r["group"] != group:
            group = r["group"]
            commit = f", commit {r['commit']}" if r["commit"] else ""
            lines += ["", f"group {group}: since run {r['run_id']} ({r['day']}{commit}), "
                      f"workload {r['workload']}, job {r['job']}: {r['group_size']} change(s)"]  # fmt: skip
        pct = "n/a" if r["change_pct"] is None else f"{r['change_pct']:+.1f}%"
        prov = ", provisional" if r["provisional"] else ""
        rank = f"rank {r['rank']}: " if r["rank"] is not None else ""
        lines.append(
            f"  {rank}{_short(r, fitted)}: {_value(r, float(r['before']))} -> "
            f"{_value(r, float(r['after']))} ({pct}; p={r['p_value']:.1g}, noise "
            f"{r['noise_pct']:.1f}%; {r['runs_before']} run(s) before, {r['runs_after']} after{prov})"
        )
    if not rows:
        lines += ["", "no change found"]
    return "\n".join(lines) + "\n"


@app.command()
def changes(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option("Only the series of this run: its workload and rank (a selector: run_id prefix, KEY=VALUE, latest)."),
    since: str = typer.Option(str(ChangesOptions.since), "--since", metavar="WHEN", help="90d, 12w (counted back from the latest run's day), YYYY-MM-DD, or 'all'."),
    kernel: str | None = typer.Option(None, "--kernel", "-k", metavar="PATTERN", help="Only GPU ops matching this pattern (glob with * ? [, else substring)."),
    category: str | None = typer.Option(None, "--category", "-c", metavar="CATEGORY", help="Only GPU ops of this category."),
    module: str | None = typer.Option(None, "--module", "-m", metavar="PATH", help="Only GPU ops under this module path (Root/child/...)."),
    op: str | None = typer.Option(None, "--op", metavar="PATTERN", help="Instead: the achieved TFLOP/s of the CPU operators matching PATTERN (roofline; a drop is the regression)."),
    where: list[str] | None = where_option(),
    alpha: float = typer.Option(ChangesOptions.alpha, "--alpha", metavar="P", help="Significance of a change (per split, after the correction for the search)."),
    min_change: str = typer.Option(f"{ChangesOptions.min_change:.0%}", "--min-change", metavar="PCT", help="Smallest relative change reported, e.g. 2%."),
    min_ms: float = typer.Option(ChangesOptions.min_ms, "--min-ms", metavar="MS", help="Analyse kernels, categories and modules reaching MS ms per step."),
    include_unusable: bool = typer.Option(ChangesOptions.include_unusable, "--include-unusable", help="Keep runs flagged unusable for comparison (capture-only, truncated, far-out timestamps, duplicated events)."),
    critical_path: bool = typer.Option(ChangesOptions.critical_path, "--critical-path", help="Instead: the critical path's shares by bound (one series per bound, its share of the path of each run's first steps; computes those paths for every run)."),
    top: int | None = top_option(None, "Show the first N changes (largest groups and contributors first; 0: all)."),
    fmt: str = format_option("text", ("text", "table", "csv", "json")),
    out: Path | None = out_option("Also write the changes shown to PATH (.csv, .json or .parquet; one row per change, times in ms per step as --format json)."),
) -> None:
    """Find where each series changed over its whole history, grouped into alerts.

    Example: tracewh changes --since 90d --category gemm --where model=dit-xl-2 --format json
    """
    import polars as pl

    with handle_errors():
        check_format(fmt, ("text", "table", "csv", "json"))
        mc = 0.0 if min_change.strip() in ("0", "0%") else threshold_of(min_change)
        wh = open_warehouse(warehouse)
        result = results.changes(
            wh, run=run, top=top, since=since, kernel=kernel,
            category=category, module=module, op=op, where=parse_pairs(where), alpha=alpha,
            min_change=mc, min_ms=min_ms, include_unusable=include_unusable,
            critical_path=critical_path,
        )  # fmt: skip
        report, ref, rows, found = result.report, result.run, result.rows, result.found
        if ref is not None and selection_note(ref):
            note(selection_note(ref) or "")
        notes = [n for n in (report.window_note(),) if n]
        if not report.excluded.is_empty():
            notes.append(f"left out: {report.excluded.height} run(s) unusable for comparison; "
                         "--include-unusable keeps them")
        graph = results.changes_runs_note(wh, op, since=since, where=parse_pairs(where), run=ref) if op else None
        if len(rows) < found:
            notes.append(f"showing {len(rows)} of {found} changes (--top N to change, --top 0: all)")
        if graph:
            notes.insert(0, graph)
        frame = pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()
        if out is not None:
            write_out(frame, out)
    if fmt in ("table", "csv"):
        with handle_errors():
            show(frame, fmt, title="changes (before/after in ms per step; idle: fraction; --op: TFLOP/s; --critical-path: share 0-1)",
                 run=ref, absolute=True, empty="no change found", notes=notes)
        return
    if fmt == "json":
        typer.echo(json.dumps(rows, indent=2, default=str))
        for line in notes:
            typer.echo(f"note: {line}", err=True)
        if report.fingerprinted:
            typer.echo(FINGERPRINTED_NOTE.format(n=report.fingerprinted), err=True)
    else:
        if ref is not None:
            typer.echo(f"series of {run_title(ref)}")
        typer.echo(report_text(report, rows=rows), nl=False)
        if len(rows) < found:
            typer.echo(notes[-1])
        if graph:
            typer.echo(f"note: {graph}")
