"""Multi-run commands: `tracewh diff`, `tracewh history`, `tracewh check`.

`check` exits 1 when something regressed, 0 when nothing did, and 0 with a note
when the run has too few comparable earlier runs to be checked (a new model's
first nights must not fail a nightly job); usage errors and unknown runs exit 2.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tracewh import results
from tracewh.api import Warehouse
from tracewh.cli.common import (
    app,
    check_format,
    format_option,
    handle_errors,
    open_warehouse,
    out_option,
    parse_pairs,
    run_option,
    selector,
    top_option,
    warehouse_option,
    where_option,
)
from tracewh.cli.layout import fit_names
from tracewh.cli.output import rank_text, selection_note, show, terminal_width
from tracewh.core.textsafe import escape_lines
from tracewh.history.options import CheckOptions
from tracewh.query.macros import DIFF_LEVELS as LEVELS

if TYPE_CHECKING:  # Polars, history and check are imported where they are used
    import polars as pl

    from tracewh.api import Warehouse
    from tracewh.history.check import CheckReport, Finding


def _ms(ns: float | None) -> str:
    return "n/a" if ns is None else f"{ns / 1e6:.3f} ms"


def bytes_text(nbytes: float) -> str:
    """Bytes for people: ``6.630 GB``, ``38.5 MB`` (1000-based, as the tables)."""
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(nbytes) >= div:
            return f"{nbytes / div:.3f} {unit}"
    return f"{nbytes:.0f} bytes"


def _where(pairs: list[str] | None) -> dict[str, str]:
    return parse_pairs(pairs)


@app.command()
def diff(
    a: str = typer.Argument(..., metavar="A", help="Run A (the reference): a selector (run_id prefix, latest, KEY=VALUE, terms joined by commas)."),
    b: str = typer.Argument(..., metavar="B", help="Run B (compared with A): a selector."),
    warehouse: str = warehouse_option(),
    level: str = typer.Option("kernel", "--level", "-l", metavar="|".join(LEVELS), help="Compare per kernel (GPU op name), short_name, category, or op (CPU operator and input shapes: across hardware, where kernel names differ)."),
    tolerance: float = typer.Option(5.0, "--tolerance", metavar="PCT", help="Changes within PCT percent count as unchanged."),
    top: int | None = top_option(20, "Show the N groups with the largest impact (0: all)."),
    fmt: str = format_option(),
    out: Path | None = out_option("Also write the per-group rows shown to PATH (.csv, .json or .parquet)."),
) -> None:
    """Compare two runs per step: run-level metrics side by side, then per kernel/category/op.

    Example: tracewh diff hw=h100 hw=mi300 --level op
    """
    with handle_errors():
        check_format(fmt)
        result = results.diff(open_warehouse(warehouse), a, b, level=level, tolerance=tolerance / 100.0)
        ra, rb, groups, runs = result.a, result.b, result.groups, result.runs
        if fmt == "json":
            if out is not None:
                show(groups, "json", title="", top=top, out=out)
            typer.echo(json.dumps(result.document(top=top)))
            for ref in (ra, rb):
                note = selection_note(ref)
                if note:
                    typer.echo(f"note: {note}", err=True)
            return
        pair = (("A", ra), ("B", rb))
        if fmt in ("table", "markdown"):
            show(_readable_compare(runs), fmt, title="A vs B, per step", runs=pair)
            typer.echo("")
        empty = f"no GPU ops with a duration in either run at level {level}"
        show(groups, fmt, title=f"by {level}: B - A per step, by absolute impact",
             runs=pair if fmt in ("table", "markdown") else (), top=top, out=out, empty=empty)


def _readable_compare(df: pl.DataFrame) -> pl.DataFrame:
    """Run-level rows for people: one unit per quantity (times in ms, fractions in %)."""
    import polars as pl

    rows = []
    for r in df.iter_rows(named=True):
        metric = r["metric"]
        if metric.endswith("_ns"):
            scale, name = 1e6, f"{metric[:-3]} (ms)"
        elif metric.endswith("_fraction"):
            scale, name = 0.01, f"{metric} (%)"
        else:
            scale, name = 1.0, metric
        conv = [None if r[c] is None else r[c] / scale for c in ("value_a", "value_b", "delta")]
        rows.append({"metric": name, "A": conv[0], "B": conv[1], "B - A": conv[2], "ratio": r["ratio"]})
    return pl.DataFrame(rows, schema={"metric": pl.String, "A": pl.Float64, "B": pl.Float64, "B - A": pl.Float64, "ratio": pl.Float64})


@app.command()
def history(
    warehouse: str = warehouse_option(),
    kernel: str | None = typer.Option(None, "--kernel", "-k", metavar="PATTERN", help="GPU op name pattern (case-insensitive; glob with * ? [, else substring)."),
    category: str | None = typer.Option(None, "--category", "-c", metavar="CATEGORY", help="A kernel category (gemm, attention, communication, ...)."),
    op: str | None = typer.Option(None, "--op", metavar="PATTERN", help="Follow CPU operators matching this pattern instead: achieved TFLOP/s, TB/s and % of peak per run (see `tracewh roofline`)."),
    kernel_key: str | None = typer.Option(None, "--kernel-key", metavar="KEY", help="A kernel key (the key of a `tracewh changes` kernel line): every op name under it."),
    critical_path: bool = typer.Option(False, "--critical-path", help="Instead: the critical path's shares by bound per run (each bound's share of the paths of the run's first steps, 0-1; the series `changes --critical-path` analyses)."),
    since: str | None = typer.Option(None, "--since", metavar="WHEN", help="90d, 12w (counted back from the latest run's day) or YYYY-MM-DD (default: all runs)."),
    where: list[str] | None = where_option(),
    top: int | None = top_option(None, "Show the N first rows (oldest first; 0: all)."),
    fmt: str = format_option(),
    out: Path | None = out_option(),
) -> None:
    """Time series per run: step time, GPU idle fraction, and time per step of chosen ops.

    With --op, the achieved TFLOP/s, TB/s and % of peak of the CPU operators matching it
    (the modelled ones, as in `tracewh roofline`), one row per run.
    With --critical-path, each bound's share of the critical path of the run's first steps.

    Example: tracewh history --kernel flash_fwd --since 90d --where model=dit-xl-2
    """
    with handle_errors():
        check_format(fmt)
        wh = open_warehouse(warehouse)
        filters = _where(where)
        empty = "no run" + (f" matches {filters}" if filters else "") + (f" since {since}" if since else "")
        result = results.history(wh, kernel=kernel, category=category, op=op,
                                 kernel_key=kernel_key, since=since, where=filters,
                                 critical_path=critical_path)  # fmt: skip
        df, first = result.frame, result.first
        if since is not None and since.strip().lower() == "all":
            since = None
        window = _window_notes(wh, since, first, filters)
        if critical_path:
            show(df, fmt, title="history: critical-path share by bound (0-1), per run", top=top,
                 out=out, empty=empty, absolute=True, notes=window + _workload_notes(wh, df))
            return
        if op is not None:
            shown = df.drop("labels_json") if fmt in ("table", "markdown") and "labels_json" in df.columns else df
            graph = results.graph_runs_note(wh, df["run_id"].to_list()) if "run_id" in df.columns else None
            graphs = [graph] if graph else []
            show(shown, fmt, title=f"history: operators ~ {op!r}, achieved rates", top=top,
                 out=out, empty=empty, absolute=True, notes=window + graphs)
            return
        what = f"kernel ~ {kernel!r}" if kernel else f"category {category!r}" if category else "all GPU ops"
        if kernel_key:
            what += f", kernel key {kernel_key!r}"
        notes = list(window) + _workload_notes(wh, df)
        if df.height and (kernel or category or kernel_key) and int(df["calls"].sum() or 0) == 0:
            notes.append(f"no GPU op matched {what} in these runs (calls 0 everywhere)")
        shown = df.drop("labels_json") if fmt in ("table", "markdown") and "labels_json" in df.columns else df
        show(shown, fmt, title=f"history: {what}, per step", top=top, out=out, notes=notes,
             empty=empty, absolute=True)


def _workload_notes(wh: Warehouse, df: pl.DataFrame) -> list[str]:
    """A warning when the rows mix workloads (a series is only meaningful within one)."""
    if df.is_empty() or "run_id" not in df.columns:
        return []
    runs = wh.runs()
    if "workload" not in runs.columns:
        return []
    shown = set(df["run_id"].to_list())  # once: per run it cost O(runs x rows), 90 s at 30,000
    names = sorted({str(w) for r, w in zip(runs["run_id"].to_list(), runs["workload"].to_list(),
                                           strict=True) if r in shown})
    if len(names) < 2:
        return []
    return [f"these rows mix {len(names)} workloads ({', '.join(names[:3])}"
            + (", ..." if len(names) > 3 else "") + "): compare values within one; --where model=NAME "
            "(or another label) keeps one"]


def _window_notes(wh: Warehouse, since: str | None, first: dt.date | None,
                  filters: dict[str, str]) -> list[str]:
    """"N runs left out" when ``--since`` (from ``first`` on) leaves runs out."""
    if since is None:
        return []
    runs = wh.runs(where=filters or None)
    if first is None or "day" not in runs.columns:
        return []
    import polars as pl

    before = runs.filter(pl.col("day") < first).height
    if not before:
        return []
    return [f"left out: {before} run(s) before {first.isoformat()} (--since {since}); "
            "--since all, or no --since, includes them"]


def _what(f: Finding) -> str:
    if f.metric_kind == "step":
        return "step time"
    if f.metric_kind == "idle":
        return "GPU idle fraction"
    if f.metric_kind == "memory":
        return f"{f.metric.removeprefix('peak_allocated_').upper()} peak allocated memory"
    if f.metric_kind == "kernel":
        # names are elided in the middle (tracewh.cli.layout.fit_names, in report_text),
        # keeping what tells kernels apart, never cut at a fixed length
        key = f.metric
        short = f.short_name or key
        return f"kernel {short} [{key}]" if key != short else f"kernel {short}"
    if f.metric_kind == "op_tflops":
        return f"operator {f.name} [{f.short_name}] achieved TFLOP/s"
    if f.metric_kind == "critical_path":
        return f"critical-path share {f.metric}"
    return f"{f.metric_kind} {f.metric}"


def _val(f: Finding, v: float | None) -> str:
    if v is None:
        return "n/a"
    if f.metric_kind == "memory":
        return bytes_text(v)
    if f.metric_kind == "op_tflops":
        return f"{v:.2f} TFLOP/s"
    if f.metric_kind == "critical_path":
        return f"{100 * v:.1f}% of the path"
    return f"{v:.3f}" if f.metric_kind == "idle" else _ms(v)


def _finding_line(f: Finding) -> str:
    pct = "" if f.change_fraction is None else f" ({f.change_fraction * 100:+.1f}%)"
    label = f", commit {f.since_commit}" if f.since_commit else ""
    since = f", since run {f.since_run_id} ({f.since_day}{label})" if f.since_run_id else ""
    rank = f"rank {f.rank}: " if f.rank is not None else ""
    prov = "; provisional: seen on fewer than 3 runs" if f.provisional else ""
    per = "" if f.metric_kind in ("op_tflops", "critical_path") else " per step"  # a rate, a share
    return (
        f"{rank}{_what(f)}: {_val(f, f.level_ns)}{per} vs baseline {_val(f, f.baseline_ns)}"
        f"{pct}{since} (p={f.p_value:.1g}{prov})"
    )


def _short_metrics(report: CheckReport, width: int) -> dict[str, str]:
    """Kernel names of the report's findings elided in the middle to fit a line of ``width``."""
    names = [f.metric for f in (*report.regressions, *report.improvements, *report.changes)]
    room = max(30, width - 80)
    return dict(zip(names, fit_names(names, room), strict=True))


def report_text(report: CheckReport, *, markdown: bool = False, width: int | None = None) -> str:
    """The check report for people (plain text or Markdown), one block per alert group.

    Kernel names are elided in the middle to fit ``width`` (default 120 for Markdown, the
    terminal's for text), keeping the short name and what tells them apart; JSON keeps them
    whole.
    """
    import dataclasses

    width = width or (120 if markdown else terminal_width())
    short = _short_metrics(report, width)

    def fitted(fs: tuple[Finding, ...]) -> tuple[Finding, ...]:
        return tuple(dataclasses.replace(f, metric=short.get(f.metric, f.metric)) for f in fs)

    report = dataclasses.replace(report, regressions=fitted(report.regressions),
                                 improvements=fitted(report.improvements),
                                 changes=fitted(report.changes))
    bullet = "- " if markdown else "  "
    head = "## " if markdown else ""
    p = report.params
    base = "the segment before the change" if p["baseline"] is None else f"the last {p['baseline']} runs of the segment before the change"
    lines = [
        f"{head}tracewh check: run {report.run_id} ({report.day}, job {report.job})",
        "",
        f"change points over each series' whole history of comparable usable runs (same workload, "
        f"device, backend, rank, world size); regression: a change in force at or before the run, "
        f"> {p['threshold'] * 100:g}% and > {p['k_mad']:g} x noise and > {p['floor_ms']:g} ms per "
        f"step against {base}; ops of at least {p['min_ms']:g} ms per step",
        "",
    ]
    for c in report.checked:
        lines.append(f"{bullet}checked {rank_text(c.rank)} run {c.run_id}: {c.baseline_runs} comparable earlier run(s), workload {c.workload} (by {c.tied_by})")
    need = p["min_runs"]
    for c in report.insufficient:
        why = f"unusable for comparison ({c.unusable})" if c.unusable else f"{c.baseline_runs} comparable earlier run(s), need {need}"
        lines.append(f"{bullet}NOT CHECKED run {c.run_id}: {why}")
    if not report.excluded.is_empty():
        reasons = ", ".join(sorted({str(r) for r in report.excluded["reasons"].to_list()}))
        lines.append(f"{bullet}left out of the baselines: {report.excluded.height} unusable run(s) ({reasons})")
    if report.fingerprinted:
        lines.append(f"{bullet}{report.fingerprinted} run(s) ingested before fingerprints existed: "
                     "fingerprinted from their tables (`tracewh compact` stores them)")
    lines.append("")
    if report.regressions:
        lines.append(f"{head}REGRESSION: {len(report.regressions)} metric(s) got worse (slower, more memory, or fewer TFLOP/s)")
        group = None
        for f in report.regressions:
            if f.group != group:
                group = f.group
                lines.append(f"{bullet}group {group}:")
            lines.append(bullet + "  " + _finding_line(f))
    elif len(report.insufficient) == len(report.checked):
        lines.append("not checked: too few comparable earlier runs (exit 0)")
    else:
        lines.append("OK: nothing regressed")
    if report.improvements:
        lines += ["", f"{head}improved: {len(report.improvements)} metric(s)"]
        lines += [bullet + _finding_line(f) for f in report.improvements]
    if report.changes:
        lines += ["", f"{head}ops that appeared or vanished"]
        lines += [f"{bullet}{f.status}: {_what(f)} ({_val(f, f.level_ns)} per step, baseline {_val(f, f.baseline_ns)})" for f in report.changes]
    return "\n".join(lines) + "\n"


@app.command()
def check(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option(),
    baseline: int | None = typer.Option(CheckOptions.baseline, "--baseline", metavar="N", help="Baseline: at most the N last runs of the segment before the change (default: all of it)."),
    threshold: str = typer.Option(f"{CheckOptions.threshold:.0%}", "--threshold", metavar="PCT", help="Relative change that counts, e.g. 10%."),
    min_ms: float = typer.Option(CheckOptions.min_ms, "--min-ms", metavar="MS", help="Check kernels, categories and modules of at least MS ms per step."),
    k_mad: float = typer.Option(CheckOptions.k_mad, "--k-mad", metavar="K", help="A change must also exceed K x the noise the change-point test measured."),
    min_runs: int = typer.Option(CheckOptions.min_runs, "--min-runs", metavar="N", help="Fewest comparable earlier runs to check at all."),
    alpha: float = typer.Option(CheckOptions.alpha, "--alpha", metavar="P", help="Significance of a change point."),
    key: list[str] | None = typer.Option(None, "--key", metavar="LABEL", help="Labels that name a workload (repeatable; default model, branch)."),
    include_unusable: bool = typer.Option(CheckOptions.include_unusable, "--include-unusable", help="Keep runs flagged unusable for comparison in the baselines."),
    op: str | None = typer.Option(None, "--op", metavar="PATTERN", help="Also check the achieved TFLOP/s of the CPU operators matching PATTERN (roofline; a drop is a regression)."),
    critical_path: bool = typer.Option(CheckOptions.critical_path, "--critical-path", help="Also check the critical path's shares by bound (a rising share of anything but GPU compute is a regression; computes the paths of the first steps of every compared run)."),
    fmt: str = format_option("text", ("text", "markdown", "json")),
) -> None:
    """Check a run (default: the latest, with its other ranks) for a regression in force.

    Exit 1 when something regressed, 0 when nothing did or when there are too few
    comparable earlier runs to check (said in the report), 2 on bad usage.

    Example: tracewh check --threshold 10% --min-ms 0.1 --format json
    """
    with handle_errors():
        check_format(fmt, ("text", "markdown", "json"))
        wh = open_warehouse(warehouse)
        ref = wh.resolve_run(selector(run))
        if selection_note(ref):
            typer.echo(f"note: {selection_note(ref)}", err=True)
        report = wh.check(
            ref, baseline=baseline, threshold=threshold_of(threshold), min_ms=min_ms,
            k_mad=k_mad, min_runs=min_runs, alpha=alpha,
            keys=tuple(key) if key else CheckOptions.keys, include_unusable=include_unusable,
            op=op, critical_path=critical_path,
        )
        graph = results.check_runs_note(wh, report) if op is not None else None
    if fmt == "json":
        typer.echo(json.dumps(results.check_document(report), indent=2))
    else:
        typer.echo(escape_lines(report_text(report, markdown=fmt == "markdown")), nl=False)
    if graph:
        typer.echo(f"note: {graph}", err=fmt == "json")
    raise typer.Exit(1 if report.regressed else 0)


def threshold_of(text: str) -> float:
    from tracewh.history.series import parse_threshold

    return parse_threshold(text)
