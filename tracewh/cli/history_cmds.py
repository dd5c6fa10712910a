"""Multi-run commands: `tracewh diff`, `tracewh history`, `tracewh check` (`tracewh changes`: changes_cmds).

`check` exits 1 when something regressed, 0 when nothing did, and 0 with a note
when the run has too few comparable earlier runs to be checked (a new model's
first nights must not fail a nightly job); usage errors and unknown runs exit 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tracewh.api import Warehouse
from tracewh.cli.common import app, format_option, handle_errors, run_option, warehouse_option
from tracewh.cli.output import emit, write_out
from tracewh.errors import UsageError

if TYPE_CHECKING:  # Polars, history and check are imported where they are used
    import polars as pl

    from tracewh.check import CheckReport, Finding

_OUT_HELP = "Also write the result to FILE (.csv, .json or .parquet)."


def _ms(ns: float | None) -> str:
    return "n/a" if ns is None else f"{ns / 1e6:.3f} ms"


def bytes_text(nbytes: float) -> str:
    """Bytes for people: ``6.630 GB``, ``38.5 MB`` (1000-based, as the tables)."""
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(nbytes) >= div:
            return f"{nbytes / div:.3f} {unit}"
    return f"{nbytes:.0f} bytes"


def _where(pairs: list[str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--where expects KEY=VALUE, not {pair!r}")
        out[key.strip()] = value.strip()
    return out


@app.command()
def diff(
    a: str = typer.Argument(..., help="Run A (the reference): run_id prefix, 'latest' or KEY=VALUE."),
    b: str = typer.Argument(..., help="Run B (compared with A)."),
    warehouse: str = warehouse_option(),
    level: str = typer.Option("kernel", "--level", "-l", help="kernel, short_name or category (use short_name/category across hardware)."),
    tolerance: float = typer.Option(5.0, "--tolerance", help="Changes within this many percent count as unchanged."),
    top: int | None = typer.Option(20, "--top", "-n", help="Show the N groups with the largest impact."),
    fmt: str = format_option(),
    out: Path | None = typer.Option(None, "--out", "-o", help=_OUT_HELP + " (the per-group rows)"),
) -> None:
    """Compare two runs per step: run-level metrics side by side, then per kernel/category.

    Example: tracewh diff night=2025-01-01 latest --level category
    """
    with handle_errors():
        wh = Warehouse(warehouse)
        if top is not None and top < 1:
            raise UsageError("--top must be at least 1")
        groups = wh.diff(a, b, level=level, tolerance=tolerance / 100.0)
        runs = wh.compare(a, b)
        if out is not None:
            write_out(groups, out)
        shown = groups.head(top) if top else groups
        if fmt == "json":
            typer.echo(json.dumps({"runs": runs.to_dicts(), "groups": shown.to_dicts()}, default=str))
            return
        if fmt == "table":
            emit(_readable_compare(runs), fmt, title=f"{a} (A) vs {b} (B), per step")
        emit(shown, fmt, title=f"by {level}: B - A per step, by absolute impact")


def _readable_compare(df: pl.DataFrame) -> pl.DataFrame:
    import polars as pl

    """Run-level rows for people: ns metrics in ms, fractions in %."""
    rows = []
    for r in df.iter_rows(named=True):
        metric = r["metric"]
        if metric.endswith("_ns"):
            scale, name = 1e6, f"{metric[:-3]} (ms)"
        elif metric.endswith("_fraction"):
            scale, name = 0.01, f"{metric} (%)"
        else:
            scale, name = 1.0, metric
        conv = [None if r[c] is None else round(r[c] / scale, 3) for c in ("value_a", "value_b", "delta")]
        rows.append({"metric": name, "A": conv[0], "B": conv[1], "B - A": conv[2],
                     "ratio": None if r["ratio"] is None else round(r["ratio"], 3)})
    return pl.DataFrame(rows, schema={"metric": pl.String, "A": pl.Float64, "B": pl.Float64, "B - A": pl.Float64, "ratio": pl.Float64})


@app.command()
def history(
    warehouse: str = warehouse_option(),
    kernel: str | None = typer.Option(None, "--kernel", "-k", help="GPU op name pattern (case-insensitive; glob with * ? [, else substring)."),
    category: str | None = typer.Option(None, "--category", "-c", help="A kernel category (gemm, attention, communication, ...)."),
    op: str | None = typer.Option(None, "--op", help="Follow CPU operators matching this pattern instead: achieved TFLOP/s, TB/s and % of peak per run (see `tracewh roofline`)."),
    kernel_key: str | None = typer.Option(None, "--kernel-key", help="A kernel key (the key of a `tracewh changes` kernel line): every op name under it."),
    since: str | None = typer.Option(None, "--since", help="90d, 12w (before today, UTC) or YYYY-MM-DD."),
    where: list[str] | None = typer.Option(None, "--where", help="KEY=VALUE on a label or run field (repeatable)."),
    fmt: str = format_option(),
    out: Path | None = typer.Option(None, "--out", "-o", help=_OUT_HELP),
) -> None:
    """Time series per run: step time, GPU idle fraction, and time per step of chosen ops.

    With --op, the achieved TFLOP/s, TB/s and % of peak of the CPU operators matching it
    (the modelled ones, as in `tracewh roofline`), one row per run.

    Example: tracewh history --kernel flash_fwd --since 90d --where model=dit-xl-2
    """
    with handle_errors():
        if sum(x is not None for x in (kernel, category, op)) > 1:
            raise UsageError("give one of --kernel, --category or --op")
        if op is not None and kernel_key is not None:
            raise UsageError("--kernel-key follows GPU ops: not with --op")
        if op is not None:
            df = Warehouse(warehouse).roofline_history(op=op, since=since, where=_where(where))
            if out is not None:
                write_out(df, out)
            emit(df.drop("labels_json"), fmt, title=f"history: operators ~ {op!r}, achieved rates")
            return
        df = Warehouse(warehouse).history(kernel=kernel, category=category, since=since, where=_where(where), kernel_key=kernel_key)
        if out is not None:
            write_out(df, out)
        what = f"kernel ~ {kernel!r}" if kernel else f"category {category!r}" if category else "all GPU ops"
        if kernel_key:
            what += f", kernel key {kernel_key!r}"
        emit(df.drop("labels_json"), fmt, title=f"history: {what}, per step")


def _what(f: Finding) -> str:
    if f.metric_kind == "step":
        return "step time"
    if f.metric_kind == "idle":
        return "GPU idle fraction"
    if f.metric_kind == "memory":
        return f"{f.metric.removeprefix('peak_allocated_').upper()} peak allocated memory"
    if f.metric_kind == "kernel":
        key = f.metric if len(f.metric) <= 60 else f.metric[:59] + "…"
        short = f.short_name or key
        return f"kernel {short} [{key}]" if key != short else f"kernel {short}"
    return f"{f.metric_kind} {f.metric}"


def _val(f: Finding, v: float | None) -> str:
    if v is None:
        return "n/a"
    if f.metric_kind == "memory":
        return bytes_text(v)
    return f"{v:.3f}" if f.metric_kind == "idle" else _ms(v)


def _finding_line(f: Finding) -> str:
    pct = "" if f.change_fraction is None else f" ({f.change_fraction * 100:+.1f}%)"
    label = f", commit {f.since_commit}" if f.since_commit else ""
    since = f", since run {f.since_run_id} ({f.since_day}{label})" if f.since_run_id else ""
    rank = f"rank {f.rank}: " if f.rank is not None else ""
    prov = "; provisional: seen on fewer than 3 runs" if f.provisional else ""
    return (
        f"{rank}{_what(f)}: {_val(f, f.level_ns)} per step vs baseline {_val(f, f.baseline_ns)}"
        f"{pct}{since} (p={f.p_value:.1g}{prov})"
    )


def report_text(report: CheckReport, *, markdown: bool = False) -> str:
    """The check report for people (plain text or Markdown), one block per alert group."""
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
        lines.append(f"{bullet}checked rank {c.rank} run {c.run_id}: {c.baseline_runs} comparable earlier run(s), workload {c.workload} (by {c.tied_by})")
    need = p["min_runs"]
    for c in report.insufficient:
        why = f"unusable for comparison ({c.unusable})" if c.unusable else f"{c.baseline_runs} comparable earlier run(s), need {need}"
        lines.append(f"{bullet}NOT CHECKED run {c.run_id}: {why}")
    if not report.excluded.is_empty():
        reasons = ", ".join(sorted({str(r) for r in report.excluded["reasons"].to_list()}))
        lines.append(f"{bullet}left out of the baselines: {report.excluded.height} unusable run(s) ({reasons})")
    lines.append("")
    if report.regressions:
        lines.append(f"{head}REGRESSION: {len(report.regressions)} metric(s) got worse (slower, or more memory)")
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
    run: str = run_option(),
    baseline: int | None = typer.Option(None, "--baseline", help="Baseline: at most the N last runs of the segment before the change (default: all of it)."),
    threshold: str = typer.Option("10%", "--threshold", help="Relative change that counts, e.g. 10%."),
    min_ms: float = typer.Option(0.1, "--min-ms", help="Check kernels, categories and modules of at least this many ms per step."),
    k_mad: float = typer.Option(3.0, "--k-mad", help="A change must also exceed K x the noise the change-point test measured."),
    min_runs: int = typer.Option(3, "--min-runs", help="Fewest comparable earlier runs to check at all."),
    alpha: float = typer.Option(0.01, "--alpha", help="Significance of a change point."),
    key: list[str] | None = typer.Option(None, "--key", help="Labels that name a workload (repeatable; default model, branch)."),
    include_unusable: bool = typer.Option(False, "--include-unusable", help="Keep runs flagged unusable for comparison in the baselines."),
    fmt: str = typer.Option("text", "--format", "-f", help="text, markdown or json."),
) -> None:
    """Check a run (default: the latest, with its other ranks) for a regression in force.

    Exit 1 when something regressed, 0 when nothing did or when there are too few
    comparable earlier runs to check (said in the report), 2 on bad usage.

    Example: tracewh check --threshold 10% --min-ms 0.1 --format json
    """
    with handle_errors():
        if fmt not in ("text", "markdown", "json"):
            raise UsageError(f"--format must be text, markdown or json, not {fmt!r}")
        report = Warehouse(warehouse).check(
            run, baseline=baseline, threshold=_parse_threshold(threshold), min_ms=min_ms,
            k_mad=k_mad, min_runs=min_runs, alpha=alpha,
            keys=tuple(key) if key else ("model", "branch"), include_unusable=include_unusable,
        )
    if fmt == "json":
        typer.echo(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        typer.echo(report_text(report, markdown=fmt == "markdown"), nl=False)
    raise typer.Exit(1 if report.regressed else 0)


def _parse_threshold(text: str) -> float:
    from tracewh.history import parse_threshold

    return parse_threshold(text)
