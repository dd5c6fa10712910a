"""Ingest many files: discover them, fan them out to an executor, gather the results.

A local pool of ``--jobs N`` processes pulls the files one at a time from a shared
queue (:func:`tracewh.ingest.pool.pulled`). Otherwise an executor runs tasks: its interface is small on
purpose, something that maps a picklable function over items and yields results as
they complete (this process: one task of every file; a Dask cluster: tasks of several
files, :mod:`tracewh.ingest.cluster`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tracewh.core.errors import UsageError
from tracewh.ingest.cleanup import CleanupReport, cleanup
from tracewh.ingest.cluster import committed_runs, cost_chunks
from tracewh.ingest.dask_executor import parse_dask
from tracewh.ingest.files import not_regular
from tracewh.ingest.options import DEFAULT_JOBS, FileResult, IngestOptions
from tracewh.ingest.pool import Lost, lost, pulled
from tracewh.ingest.tasks import Task, TaskStrategy, choose, run_task
from tracewh.storage.store import Store

T = TypeVar("T")
R = TypeVar("R")

#: Files that are never traces even though they end in .json.
SIDECARS = frozenset({"run.json"})

#: ``jobs="auto"`` runs files side by side from this many files on, or from this much
#: JSON (a ``.gz`` counted as 10x its size): below, starting worker processes (~1 s,
#: spawned, each importing the pipeline) costs more than it saves.
AUTO_MIN_FILES = 16
#: ``runs`` and ``ingest_log`` are compacted after an ingest once they have more files.
COMPACT_ABOVE_FILES = 8
AUTO_MIN_BYTES = 100 << 20


def available_cores() -> int:
    """CPU cores this process may run on (its affinity mask; ``os.cpu_count()`` elsewhere)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def resolve_jobs(jobs: int | str, files: Sequence[Path]) -> int:
    """The number of processes for ``jobs`` (an int, or ``"auto"``) over ``files``.

    ``auto``: one file gets every core (a big one is split across them, a small one
    is parsed in one process anyway); many files run side by side, one process per
    core, when there are at least :data:`AUTO_MIN_FILES` of them or
    :data:`AUTO_MIN_BYTES` of JSON; a few small files run in this process.
    """
    if jobs != "auto":
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise UsageError(f"--jobs must be at least 1 or auto, not {jobs!r}")
        return jobs
    cores = available_cores()
    if len(files) <= 1:
        return cores
    json_bytes = 0
    for p in files:
        try:
            size = p.stat().st_size
        except OSError:
            continue
        json_bytes += size * 10 if p.name.endswith(".gz") else size
    if len(files) >= AUTO_MIN_FILES or json_bytes >= AUTO_MIN_BYTES:
        return min(cores, len(files))
    return 1


def _is_trace_name(name: str) -> bool:
    return (name.endswith(".json") or name.endswith(".json.gz")) and name not in SIDECARS


def is_warehouse(folder: Path) -> bool:
    """Whether ``folder`` is a tracewh warehouse (``tables/runs/_delta_log``) or a Delta table."""
    try:
        return (folder / "tables" / "runs" / "_delta_log").is_dir() or (folder / "_delta_log").is_dir()
    except OSError:
        return False


def _inside(path: Path, real_root: str) -> bool:
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


def _scan(root: Path) -> tuple[list[Path], list[FileResult]]:
    """Trace-named entries under ``root`` (hidden ones and symlinked folders not entered).

    Regular files (or links to one inside ``root``) are returned; every other entry with
    a trace's name (a dangling link, a link out of ``root``, a FIFO, a device, a
    socket...) becomes a skipped :class:`FileResult` saying what it is. A tracewh
    warehouse (or a Delta table) found under ``root``, or ``root`` itself, is not
    scanned: one skipped result says so. Nothing is opened.
    """
    found: list[Path] = []
    skipped: list[FileResult] = []
    real_root = os.path.realpath(root)
    if is_warehouse(root):
        return [], [FileResult(os.path.abspath(root), "skipped",
                               error=f"{root}: a tracewh warehouse, not scanned for traces")]

    def walk_error(exc: OSError) -> None:
        skipped.append(FileResult(
            str(exc.filename or root), "skipped",
            error=f"{exc.filename or root}: not scanned ({exc.strerror or exc})",
        ))

    for folder, dirs, names in os.walk(root, onerror=walk_error, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for d in [d for d in dirs if is_warehouse(Path(folder) / d)]:
            dirs.remove(d)  # its own files are no traces (`ingest . -w ./wh`)
            skipped.append(FileResult(os.path.abspath(Path(folder) / d), "skipped",
                                      error=f"{Path(folder) / d}: a tracewh warehouse, not scanned for traces"))
        for name in sorted(names):
            if name.startswith(".") or not _is_trace_name(name):
                continue
            path = Path(folder) / name
            kind = not_regular(path)
            if kind is None and path.is_symlink() and not _inside(path, real_root):
                kind = f"a symbolic link out of {root}, not followed (give the file itself to ingest it)"
            if kind is None:
                found.append(path)
            else:
                skipped.append(FileResult(os.path.abspath(path), "skipped", error=f"{path}: {kind}"))
    return sorted(found), skipped


def discover(paths: Iterable[Path | str]) -> tuple[list[Path], list[FileResult]]:
    """Trace files under ``paths`` (files as given; directories recursively).

    Directories contribute ``*.json`` and ``*.json.gz`` files (``run.json``
    sidecars and hidden files excluded), sorted; an entry there with a trace's
    name that is not a regular file (a dangling symbolic link, a FIFO, a device,
    a socket) is a skipped :class:`FileResult` saying what it is, and is never
    opened. A path given that does not exist, or is not a regular file, is a
    failed one.
    """
    found: list[Path] = []
    others: list[FileResult] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            candidates, skipped = _scan(path)
            others += skipped
        else:
            kind = not_regular(path)
            if kind is not None:
                others.append(FileResult(os.path.abspath(path), "failed", error=f"{path}: {kind}"))
                continue
            candidates = [path]
        for p in candidates:
            key = p.resolve()
            if key not in seen:
                seen.add(key)
                found.append(p)
    return found, others


class Executor(Protocol):
    """Maps ``fn`` over ``items``, yielding results in completion order."""

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]: ...


class SerialExecutor:
    """Runs everything in this process, one item after another."""

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[R]:
        for item in items:
            yield fn(item)


def _task_failed(task: Task, exc: BaseException) -> list[FileResult]:
    """The results of a task its executor lost (a killed worker, a lost connection): the
    files this ingest committed before the loss as ingested, the others as failed."""
    done = committed_runs(task.store, task.paths, task.options.ingested_at)
    return [done.get(r.path, r) for r in lost(task.paths, exc)]


def _chunks(paths: list[str], executor: Executor | None) -> list[tuple[str, ...]]:
    """Files per task: all of them in this process; on a cluster, tasks of several files
    by their cost (:func:`~tracewh.ingest.cluster.cost_chunks`). (A local pool's workers
    pull files one at a time: :func:`~tracewh.ingest.pool.pulled`.)"""
    if executor is not None and not isinstance(executor, SerialExecutor):
        slots = getattr(executor, "slots", None)
        return cost_chunks(paths, slots() if callable(slots) else None)
    return [tuple(paths)] if paths else []


def build_executor(*, dask: str | None = None) -> Executor | None:
    """The executor for ``--dask SPEC``, or None (:func:`ingest_paths` then picks by ``jobs``).

    ``dask`` is ``local``, ``local:N`` or a scheduler address (see
    :func:`~tracewh.ingest.dask_executor.parse_dask`); a task lost on the
    cluster becomes a failed :class:`FileResult`, like a bad file.
    """
    if dask is None:
        return None
    return parse_dask(dask, on_error=_task_failed)


@dataclass
class IngestReport:
    """Results of a batch, in input order."""

    results: list[FileResult] = field(default_factory=list)
    cleanup: CleanupReport | None = None

    @property
    def ingested(self) -> list[FileResult]:
        return [r for r in self.results if r.outcome in ("ingested", "replaced")]

    @property
    def skipped(self) -> list[FileResult]:
        return [r for r in self.results if r.outcome == "skipped"]

    @property
    def failed(self) -> list[FileResult]:
        return [r for r in self.results if r.outcome == "failed"]

    @property
    def ok(self) -> bool:
        return not self.failed

    def to_dict(self) -> dict[str, Any]:
        """``{"ingested": [...], "skipped": [...], "failed": [{"path", "error"}]}``."""
        return {
            "ingested": [r.to_dict() for r in self.ingested],
            "skipped": [r.to_dict() for r in self.skipped],
            "failed": [r.to_dict() for r in self.failed],
        }


def _results(
    store: Store, wanted: list[str], options: IngestOptions, strategy: TaskStrategy,
    jobs: int, executor: Executor | None,
) -> Iterator[list[FileResult]]:
    """The files' results, as they come: from pulling workers (a local pool), or from the
    executor's tasks (this process: one task; a cluster: tasks of several files)."""
    if executor is None and jobs > 1 and len(wanted) > 1:
        with contextlib.suppress(Lost):  # its files' failed results were yielded
            yield from pulled(Task(store, (), options, strategy), wanted, jobs)
        return
    tasks = [Task(store, chunk, options, strategy) for chunk in _chunks(wanted, executor)]
    yield from (executor or SerialExecutor()).map_unordered(run_task, tasks)


def ingest_paths(
    store: Store,
    paths: Iterable[Path | str],
    options: IngestOptions,
    *,
    jobs: int | str = DEFAULT_JOBS,
    executor: Executor | None = None,
    on_result: Callable[[FileResult], None] | None = None,
) -> IngestReport:
    """Ingest every trace under ``paths`` into ``store``.

    Cleans up leftovers of dead ingests first, then ingests files with
    ``jobs`` processes (an int, or ``"auto"``: see :func:`resolve_jobs`), or
    with the given ``executor``. A bad file never stops the batch: it becomes
    a failed result. With no trace file to ingest (every path given is missing, or
    holds no trace), nothing is created or written: the warehouse is left as it was
    (not created when it did not exist) and the report holds the failed paths only.
    """
    files, missing = discover(paths)  # first: a path that does not exist creates nothing
    if not files:
        report = IngestReport()
        report.results = missing
        for r in missing:
            if on_result:
                on_result(r)
        return report
    store.create()
    store.check_writable()
    if options.ingested_at is None:
        # one ingested_at per ingest command: its runs count as one ingest for `latest`
        options = replace(options, ingested_at=datetime.now(UTC))
    report = IngestReport(cleanup=cleanup(store))
    # an executor of its own (Dask) sets the parallelism: jobs only splits files there
    jobs = resolve_jobs(jobs, files) if executor is None else (
        1 if jobs == "auto" else resolve_jobs(jobs, []))
    for r in missing:
        if on_result:
            on_result(r)
    if options.parts == 1 and jobs > 1 and 0 < len(files) < jobs:
        options = replace(options, parts=max(1, jobs // len(files)))
    else:
        # processes sharing this machine's cores: more DuckDB threads each only contend
        procs = jobs if executor is None else getattr(executor, "local_processes", None)
        if procs is not None and procs > 1:
            options = replace(options, threads=max(1, available_cores() // procs))
    wanted = [os.path.abspath(p) for p in files]
    strategy = choose(store, options)  # the variants, once (tracewh.ingest.tasks)
    by_path: dict[str, FileResult] = {}
    for results in _results(store, wanted, options, strategy, jobs, executor):
        for result in results:
            by_path[result.path] = result
            if on_result:
                on_result(result)
    report.results = [by_path[p] for p in wanted] + missing
    if report.ingested or report.failed:
        # best effort: a concurrent compaction of the same files makes this one a no-op
        for name in ("runs", "run_series", "ingest_log"):
            # a local table's files are counted from its log first (no delta-rs for that)
            if store.remote or len(store.file_uris(name)) > COMPACT_ABOVE_FILES:
                from tracewh.ingest.compaction import compact_table

                compact_table(store, name, max_files=COMPACT_ABOVE_FILES, blocking=False)
    return report
