"""`tracewh changes`: change points over the whole history, one alert per group."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer

from tracewh.api import Warehouse
from tracewh.cli.common import app, handle_errors, warehouse_option
from tracewh.cli.history_cmds import _parse_threshold as parse_threshold
from tracewh.cli.history_cmds import _where, bytes_text
from tracewh.errors import UsageError

if TYPE_CHECKING:  # the change-point modules (Polars, numpy) load when the command runs
    from tracewh.alerts import ChangesReport


def _short(r: dict[str, object], width: int = 60) -> str:
    """A change's metric for people: short name and kernel key for kernels."""
    metric, key = str(r["metric"]), str(r["key"])
    if metric == "step":
        return "step time"
    if metric == "idle":
        return "GPU idle fraction"
    if metric == "memory":
        return f"{key.removeprefix('peak_allocated_').upper()} peak allocated per step"
    if metric == "kernel":
        short = str(r["short_name"] or key)
        k = key if len(key) <= width else key[: width - 1] + "…"
        return f"kernel {short} [{k}]" if k != short else f"kernel {short}"
    return f"{metric} {key}"


def _value(r: dict[str, object], v: float) -> str:
    if r["metric"] == "memory":
        return bytes_text(v)
    return f"{v:.3f}" if r["metric"] == "idle" else f"{v:.3f} ms"


def report_text(report: ChangesReport) -> str:
    """The changes, one block per alert group, largest contributors first."""
    rows = report.to_dicts()
    p = report.params
    since = f"since {p['since']}" if p["since"] else "all history"
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
            f"  {rank}{_short(r)}: {_value(r, float(r['before']))} -> "
            f"{_value(r, float(r['after']))} ({pct}; p={r['p_value']:.1g}, noise "
            f"{r['noise_pct']:.1f}%; {r['runs_before']} run(s) before, {r['runs_after']} after{prov})"
        )
    if not rows:
        lines += ["", "no change found"]
    return "\n".join(lines) + "\n"


@app.command()
def changes(
    warehouse: str = warehouse_option(),
    since: str = typer.Option("90d", "--since", help="90d, 12w (before today, UTC), YYYY-MM-DD, or 'all'."),
    kernel: str | None = typer.Option(None, "--kernel", "-k", help="Only GPU ops matching this pattern (glob with * ? [, else substring)."),
    category: str | None = typer.Option(None, "--category", "-c", help="Only GPU ops of this category."),
    module: str | None = typer.Option(None, "--module", "-m", help="Only GPU ops under this module path (Root/child/...)."),
    where: list[str] | None = typer.Option(None, "--where", help="KEY=VALUE on a label or run field (repeatable)."),
    alpha: float = typer.Option(0.01, "--alpha", help="Significance of a change (per split, after the correction for the search)."),
    min_change: str = typer.Option("0%", "--min-change", help="Smallest relative change reported, e.g. 2%."),
    min_ms: float = typer.Option(0.1, "--min-ms", help="Analyse kernels, categories and modules reaching this many ms per step."),
    include_unusable: bool = typer.Option(False, "--include-unusable", help="Keep runs flagged unusable for comparison (capture-only, truncated, far-out timestamps, duplicated events)."),
    fmt: str = typer.Option("text", "--format", "-f", help="text or json (one object per change)."),
) -> None:
    """Find where each series changed over its whole history, grouped into alerts.

    Example: tracewh changes --since 90d --category gemm --where model=dit-xl-2 --format json
    """
    with handle_errors():
        if fmt not in ("text", "json"):
            raise UsageError(f"--format must be text or json, not {fmt!r}")
        mc = 0.0 if min_change.strip() in ("0", "0%") else parse_threshold(min_change)
        report = Warehouse(warehouse).changes(
            since=None if since.strip().lower() == "all" else since, kernel=kernel,
            category=category, module=module, where=_where(where), alpha=alpha,
            min_change=mc, min_ms=min_ms, include_unusable=include_unusable,
        )  # fmt: skip
    if fmt == "json":
        typer.echo(json.dumps(report.to_dicts(), indent=2, default=str))
        if not report.excluded.is_empty():
            typer.echo(f"note: {report.excluded.height} run(s) unusable for comparison left out", err=True)
    else:
        typer.echo(report_text(report), nl=False)
