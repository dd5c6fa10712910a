"""`tracewh ingest`, `runs`, `verify` and `compact`."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tracewh.cli.common import (
    app,
    check_format,
    format_option,
    handle_errors,
    open_warehouse,
    parse_pairs,
    top_option,
    warehouse_option,
    where_option,
)
from tracewh.cli.output import note, show
from tracewh.cli.readprogress import ReadProgress
from tracewh.core.errors import UsageError
from tracewh.core.textsafe import escape_control
from tracewh.ingest.options import DEFAULT_JOBS, IngestOptions

if TYPE_CHECKING:  # the ingest pipeline, rich and Polars are imported by the commands that use them
    import polars as pl
    from rich.console import Console

    from tracewh.ingest.batch import IngestReport
    from tracewh.ingest.options import FileResult


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # gone meanwhile: the ingest reports it
        return 0


def parse_labels(values: list[str] | None) -> dict[str, str]:
    """``KEY=VALUE`` strings to a dict; :class:`UsageError` on a malformed one."""
    return parse_pairs(values, "--label")


def _parse_jobs(text: str | None) -> int | str:
    """``--jobs``: a positive integer, or ``auto`` (the default)."""
    if text is None or text.strip().lower() == "auto":
        return DEFAULT_JOBS
    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"--jobs must be at least 1 or auto, not {text!r}") from None
    if n < 1:
        raise UsageError(f"--jobs must be at least 1 or auto, not {text!r}")
    return n


def _summary(report: IngestReport, console: Console, *, step_marker: str | None = None) -> None:
    """The batch in words; paths, errors and anomalies printed literally (never as markup).

    With ``step_marker``, each file's line says which marker defined its steps and how many
    it found."""
    from rich.text import Text

    n_in, n_fail = len(report.ingested), len(report.failed)
    n_already = sum(1 for r in report.skipped if r.run_id)
    n_other = len(report.skipped) - n_already  # not regular files, links out, warehouses
    events = sum(r.events for r in report.ingested)
    mb = sum(r.bytes for r in report.ingested) / 1e6
    n_changed = sum(1 for r in report.skipped if r.run_id and "options differ" in (r.error or ""))
    console.print(
        f"ingested {n_in} file(s) ({events:,} events, {mb:.1f} MB), "
        f"already ingested {n_already}, failed {n_fail}"
        + (f", skipped {n_other} (not regular files, links out, warehouses)" if n_other else "")
        + (f"; {n_changed} already-ingested file(s) were asked for with different options and "
           "skipped: --force re-ingests them with the new options" if n_changed else "")
    )
    if report.cleanup and (report.cleanup.orphan_ingests or report.cleanup.staging_removed):
        console.print(
            f"cleaned up {len(report.cleanup.orphan_ingests)} leftover ingest(s) and "
            f"{report.cleanup.staging_removed} staging folder(s) of earlier crashed ingests"
        )

    def line(*parts: tuple[str, str] | str) -> None:
        console.print(Text.assemble(*(
            (escape_control(p[0]), p[1]) if isinstance(p, tuple) else escape_control(p)
            for p in parts
        )))

    for r in report.ingested:
        extra = f"  anomalies: {json.dumps(dict(r.anomalies))}" if r.anomalies else ""
        verb = "replaced" if r.outcome == "replaced" else "ingested"
        steps = ""
        marker = f" by --step-marker {step_marker!r}" if step_marker else ""
        if r.steps_found is not None and (r.steps_kept != r.steps_found or r.dropped):
            steps = (f"; steps: {r.steps_found} found{marker}, {r.steps_kept} kept, "
                     f"{r.dropped:,} events dropped")
        elif step_marker:
            steps = f"; steps: {r.steps_found or 0} found{marker}"
        line(f"  {verb:9} {r.run_id}  {r.path}  ({r.events:,} events{steps}){extra}")
        for w in r.warnings:
            line("  ", ("warning", "yellow"), f": {r.path}: {w}")
    for r in report.skipped:
        line(f"  skipped   {r.run_id}  {r.path}: {r.error}" if r.run_id else f"  skipped   {r.error}")
    for r in report.failed:
        line("  ", ("FAILED", "red"), f"    {r.error}")


#: Said once per `tracewh ingest` where the C staging extension was not built.
NO_NATIVE_NOTE = ("the C staging extension (tracewh.ingest._fastshred) is not built, no C "
                  "compiler at install: ingest uses the pure-Python path (same rows, slower)")


@app.command()
def ingest(
    paths: list[Path] = typer.Argument(..., metavar="PATH", help="Trace files or directories (recursive *.json, *.json.gz)."),
    warehouse: str = warehouse_option(),
    label: list[str] | None = typer.Option(None, "--label", "-l", metavar="K=V", help="KEY=VALUE label for every run (repeatable)."),
    jobs: str | None = typer.Option(
        None, "--jobs", "-j", metavar="N|auto",
        help="Parallel processes: files at once; with fewer files, parts of each file. "
        "Default auto: one per core for one big file or many files, one for a few small files.",
    ),
    storage_option: list[str] | None = typer.Option(None, "--storage-option", metavar="K=V", help="KEY=VALUE object-store setting for an s3://... warehouse, e.g. aws_endpoint_url=http://127.0.0.1:9000 (repeatable; default: the AWS_* environment)."),
    dask: str | None = typer.Option(None, "--dask", metavar="ADDRESS", help="Ingest on Dask workers: a scheduler address, or local[:N] for a local cluster of N workers (needs tracewh[dask])."),
    steps: int | None = typer.Option(IngestOptions.steps, "--steps", metavar="N", help="Keep only the first N steps (ProfilerStep#N, or --step-marker spans) and exactly the GPU ops they launched."),
    step_marker: str | None = typer.Option(IngestOptions.step_marker, "--step-marker", metavar="PATTERN", help="Steps are the cpu_op / user_annotation spans whose name contains PATTERN or matches it as a glob (e.g. 'Torch-Compiled Region', 'denoise'), for traces without ProfilerStep."),
    skip_python: bool = typer.Option(IngestOptions.skip_python, "--skip-python", help="Drop python_function events but the nn.Module spans."),
    force: bool = typer.Option(IngestOptions.force, "--force", help="Re-ingest files already ingested (atomic replace)."),
    job: str | None = typer.Option(IngestOptions.job, "--job", metavar="NAME", help="Job name for these runs (default: each file's directory)."),
    fmt: str = format_option("text", ("text", "json")),
) -> None:
    """Ingest Kineto traces (files or directories) into the warehouse.

    Exit code 1 if any file failed; the other files are ingested anyway.

    Example: tracewh ingest traces/2025-01-08/ --label model=dit --jobs 2
    """
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn

    from tracewh.ingest.batch import build_executor, discover
    from tracewh.ingest.fast import native

    with handle_errors():
        if fmt not in ("text", "json"):
            raise UsageError(f"--format must be text or json, not {fmt!r}")
        if native() is None:
            note(NO_NATIVE_NOTE)
        if dask is not None and jobs not in (None, "1"):
            raise UsageError("--dask and --jobs exclude each other (Dask sets the parallelism)")
        n_jobs = _parse_jobs(jobs)
        executor = build_executor(dask=dask)
        labels = parse_labels(label)
        if any("=" not in o or not o.partition("=")[0].strip() for o in storage_option or []):
            raise UsageError("--storage-option must be KEY=VALUE")
        options = dict(o.split("=", 1) for o in storage_option or [])
        wh = open_warehouse(warehouse, storage_options=options)
        console = Console(stderr=True, highlight=False)
        show_progress = fmt == "text" and sys.stderr.isatty()
        files, _ = discover(paths)
        total = sum(_size(p) for p in files)
        progress = Progress(
            TextColumn("ingest"), BarColumn(), DownloadColumn(), MofNCompleteColumn(),
            TextColumn("{task.description}"), console=console, disable=not show_progress,
            transient=True,
        )
        reading = ReadProgress({str(p): _size(p) for p in files})
        done_bytes = [0]
        stop = threading.Event()
        with progress:
            task = progress.add_task("", total=max(total, 1))
            files_task = progress.add_task("files", total=len(files), visible=False)

            def on_result(result: FileResult) -> None:
                done_bytes[0] += result.bytes
                reading.finished(result.path)
                if show_progress:  # /proc is read only for a bar someone sees
                    progress.update(task, completed=done_bytes[0] + reading.in_flight_bytes())
                progress.advance(files_task, 1)
                progress.update(task, description=f"{Path(result.path).name} {result.outcome}")

            def poll() -> None:  # the bar moves with the bytes read, not only per file
                while not stop.wait(0.5):
                    progress.update(task, completed=done_bytes[0] + reading.in_flight_bytes())

            watcher = threading.Thread(target=poll, name="tracewh-read-progress", daemon=True)
            if show_progress and reading.available:
                watcher.start()
            try:
                # a signal (handle_errors: SIGTERM/SIGHUP too) kills the workers: nothing committed after
                report = wh.ingest(
                    paths, labels=labels, jobs=n_jobs, steps=steps, step_marker=step_marker,
                    skip_python=skip_python,
                    force=force, job=job, on_result=on_result, executor=executor,
                )
            finally:
                stop.set()
                if watcher.is_alive():
                    watcher.join()
        if fmt == "json":
            typer.echo(json.dumps(report.to_dict(), indent=2))
        else:
            _summary(report, Console(highlight=False, soft_wrap=True), step_marker=step_marker)
        if not report.ok:
            raise typer.Exit(1)


#: The columns ``runs`` shows by default (``--all``: every column).
RUNS_COLUMNS = (
    "run_id", "file_name", "day", "rank", "device_name", "backend", "kind", "n_steps",
    "n_gpu_ops", "workload", "unusable", "labels",
)  # fmt: skip


def _labels_text(df: pl.DataFrame) -> pl.DataFrame:
    """``labels_json`` as ``k=v k=v`` text in a ``labels`` column (sorted by key)."""
    import json as _json

    import polars as pl

    def text(raw: str | None) -> str:
        try:
            labels = _json.loads(raw) if raw else {}
        except ValueError:
            return raw or ""
        if not isinstance(labels, dict):
            return raw or ""
        return " ".join(f"{k}={v}" for k, v in sorted(labels.items()))

    return df.with_columns(
        pl.col("labels_json").map_elements(text, return_dtype=pl.String).alias("labels")
    )


@app.command()
def runs(
    warehouse: str = warehouse_option(),
    where: list[str] | None = where_option(),
    all_columns: bool = typer.Option(False, "--all", "-a", help="Show every column of runs (tables; csv/json always carry all)."),
    top: int | None = top_option(None, "Show at most N runs (latest first; 0: all)."),
    limit: int | None = typer.Option(None, "--limit", metavar="N", help="Same as --top."),
    fmt: str = format_option(),
) -> None:
    """List the runs in the warehouse, latest ingest first (the first one is `latest`).

    Example: tracewh runs --where model=dit --format json
    """
    with handle_errors():
        check_format(fmt)
        wh = open_warehouse(warehouse)
        filters = parse_pairs(where)
        df = wh.runs(where=filters)
        empty = None
        if df.is_empty() and filters:
            hints = []
            for key in list(filters)[:3]:
                values = wh.label_values(key)
                hints.append(f"{key}: {', '.join(values[:8])}" if values else f"no run has {key!r}")
            empty = f"no run matches {', '.join(f'{k}={v}' for k, v in filters.items())} ({'; '.join(hints)})"
        if fmt in ("table", "markdown"):
            df = _labels_text(df)
            if not all_columns:
                df = df.select([c for c in RUNS_COLUMNS if c in df.columns])
        show(df, fmt, title=f"{df.height} run(s), latest ingest first", top=top or limit,
             empty=empty, absolute=True)


@app.command()
def verify(
    warehouse: str = warehouse_option(),
    fmt: str = format_option("text", ("text", "json")),
) -> None:
    """Check the warehouse: every visible run complete, every data file intact.

    Exit code 1 when a problem is found. Leftovers of crashed ingests are reported
    as notes (they are invisible and removed by the next ingest).

    Example: tracewh verify -w warehouse
    """
    with handle_errors():
        report = open_warehouse(warehouse).verify()
        if fmt == "json":
            typer.echo(json.dumps(report.to_dict(), indent=2))
        else:
            status = "OK" if report.ok else "FAILED"
            typer.echo(f"verify {status}: {report.runs} run(s), {report.files} data file(s)")
            for p in report.problems:
                typer.echo(f"  problem: {escape_control(p)}")
            for n in report.notes:
                typer.echo(f"  note: {escape_control(n)}")
        if not report.ok:
            raise typer.Exit(1)


@app.command()
def migrate(
    warehouse: str = warehouse_option(),
    fmt: str = format_option("text", ("text", "json")),
) -> None:
    """Bring a warehouse written by an older tracewh up to date (idempotent, safe to kill).

    Stores each older run's history series (run_series) and fingerprint, computed from
    its tables, then merges the series table's small files. Repeat it to finish an
    interrupted migration; a second run does nothing.

    Example: tracewh migrate -w warehouse
    """
    with handle_errors():
        if fmt not in ("text", "json"):
            raise UsageError(f"--format must be text or json, not {fmt!r}")
        report = open_warehouse(warehouse).migrate()
        if fmt == "json":
            typer.echo(json.dumps(report.to_dict(), indent=2))
            return
        typer.echo(
            f"migrated: history series of {report.series_runs} run(s), fingerprints of "
            f"{report.fingerprints_added} run(s) stored; run_series files "
            f"{report.files_before} -> {report.files_after}"
        )


@app.command()
def compact(
    warehouse: str = warehouse_option(),
    retain_hours: int = typer.Option(
        168, "--retain-hours", metavar="N",
        help="Keep unreferenced files younger than N hours. Below 1, compact waits for "
        "this machine's running ingests and holds new ones off while it vacuums; 0 frees "
        "every superseded file now.",
    ),
    fmt: str = format_option("text", ("text", "json")),
) -> None:
    """Remove leftovers, merge small files per partition and vacuum old files.

    Example: tracewh compact --retain-hours 24
    """
    with handle_errors():
        if fmt not in ("text", "json"):
            raise UsageError(f"--format must be text or json, not {fmt!r}")
        report = open_warehouse(warehouse).compact(retain_hours=retain_hours)
        if fmt == "json":
            typer.echo(json.dumps(report.to_dict(), indent=2))
            return
        typer.echo(
            f"removed {report.orphan_ingests} leftover ingest(s), "
            f"{report.staging_removed} staging folder(s); retention {report.retain_hours} h"
            + (" (writers held off while vacuuming)" if report.exclusive else "")
        )
        if report.clamp:
            typer.echo(f"note: {report.clamp}")
        if report.fingerprints_added:
            typer.echo(
                f"stored the fingerprints of {report.fingerprints_added} run(s) ingested before "
                "fingerprints existed (computed from their tables)"
            )
        for name in report.files_before:
            kept_n, kept_b = report.kept.get(name, (0, 0))
            kept = (
                f", kept {kept_n} younger than {report.retain_hours} h ({kept_b / 1e6:.1f} MB)"
                if kept_n else ""
            )
            typer.echo(
                f"  {name:11} files {report.files_before[name]:5} -> {report.files_after[name]:5}"
                f"  vacuumed {report.vacuumed[name]} "
                f"({report.freed_bytes.get(name, 0) / 1e6:.1f} MB freed){kept}"
            )
        total = sum(report.freed_bytes.values())
        kept_total = sum(b for _, b in report.kept.values())
        typer.echo(
            f"freed {total / 1e6:.1f} MB"
            + (
                f"; {kept_total / 1e6:.1f} MB of superseded or failed-commit files are kept "
                f"until they are {report.retain_hours} h old (--retain-hours 0 frees them now)"
                if kept_total else ""
            )
        )
