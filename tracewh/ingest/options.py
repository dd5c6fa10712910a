"""What one file's ingest is asked to do and what it gave: :class:`IngestOptions`, :class:`FileResult`.

The values every ingest strategy shares (:mod:`tracewh.ingest.pipeline`, :mod:`tracewh.ingest.group`,
:mod:`tracewh.ingest.batchcommit`); no I/O here. The ingest's options are declared once, here:
the API (:meth:`tracewh.api.Warehouse.ingest`) and the CLI (``tracewh ingest``) take their
defaults from :class:`IngestOptions` and :data:`DEFAULT_JOBS` (``tests/ingest/test_options.py``
holds them to it). Plain values only: importing this module imports nothing heavy (the CLI
reads it at start).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tracewh.core.errors import TracewhError, UsageError

if TYPE_CHECKING:
    from collections import Counter


Outcome = Literal["ingested", "replaced", "skipped", "failed"]

#: Processes of an ingest by default: ``auto`` (see :func:`tracewh.ingest.batch.resolve_jobs`).
DEFAULT_JOBS: int | str = "auto"

#: A commit batch's derive hook: (the file to write, the batch's child files by table, its
#: pending ``runs`` rows, a folder it may make and spill into: in the warehouse's staging
#: folder of an ingest whose lock the batch holds, so the next ingest's cleanup removes it
#: if this process dies) -> rows written per run_id (the API passes
#: :func:`tracewh.history.runseries.write_series`; see :class:`~tracewh.ingest.batchcommit.CommitBatch`).
Derive = Callable[
    [Path, Mapping[str, Sequence[str]], Sequence[Mapping[str, Any]], Path], Mapping[str, int]
]


@dataclass(frozen=True)
class IngestOptions:
    """How to ingest files.

    Parameters
    ----------
    labels
        User labels added to every run (override ``run.json`` labels).
    steps
        Keep only the first N steps (``ProfilerStep`` iterations, or step-marker spans):
        the CPU-side events inside [first step start, Nth step end) and exactly the GPU
        ops launched in those N steps.
    step_marker
        Define steps from the ``cpu_op`` / ``user_annotation`` spans whose name contains
        this text or matches it as a glob (outermost ones, numbered from 0 in time order),
        instead of ``ProfilerStep#N``.
    skip_python
        Drop ``python_function`` events.
    force
        Re-ingest files already in the warehouse, replacing their run atomically.
    job
        Job name for every run (default: the directory each file came from).
    batch_rows
        Unused (kept for compatibility); staging is bounded by its chunk size.
    memory_limit
        DuckDB memory limit for the linkage step (it spills beyond).
    output_memory_limit
        DuckDB memory limit while the run's tables are written, after the
        linkage (the output queries need less; a lower limit evicts the
        linkage's tables rather than growing the process).
    stage_memory_limit
        DuckDB memory limit of each parsing process while it stages events.
    parts
        Processes that parse one large file in parallel (files under
        ``min_split_bytes`` decompressed, or in the bare-array layout, are
        parsed in one).
    min_split_bytes
        Smallest decompressed size worth splitting into ``parts``.
    ingested_at
        The ``runs.ingested_at`` of every run written (the batch driver sets it once per
        ingest command, to the time it started, so the runs of one command share it and
        ``latest`` means the newest trace of the latest ingest); ``None``: each file's
        own commit time.
    group_tiny
        In a batch of files, link and write the tiny traces together, once per group
        (:mod:`tracewh.ingest.group`: the same rows, a fraction of the statements);
        False: each file alone.
    derive
        Computes the ``run_series`` rows of a batch's runs before they are committed
        (:class:`~tracewh.ingest.batchcommit.CommitBatch`; the API passes
        :func:`tracewh.history.runseries.write_series`); ``None``: the runs are stored
        without them (their series are then computed from their tables when read).
    """

    labels: Mapping[str, str] = field(default_factory=dict)
    steps: int | None = None
    step_marker: str | None = None
    skip_python: bool = False
    force: bool = False
    job: str | None = None
    batch_rows: int = 50_000
    memory_limit: str = "80MB"
    output_memory_limit: str = "96MB"
    parts: int = 1  # processes that parse one file in parallel (set by the batch driver)
    stage_memory_limit: str = "96MB"
    min_split_bytes: int = 16 << 20
    native: bool = True  # stage ordinary events with the C extension where it is built
    threads: int = 2  # DuckDB threads of the linkage and writing (the batch lowers it per process)
    ingested_at: datetime | None = None
    group_tiny: bool = True  # link and write the tiny traces of a batch together
    derive: Derive | None = None  # writes a batch's run_series file

    @classmethod
    def checked(cls, **options: Any) -> IngestOptions:
        """Options given by a user (the API, the CLI): ``steps`` at least 1, a non-empty marker."""
        steps, marker = options.get("steps"), options.get("step_marker")
        if steps is not None and steps < 1:
            raise UsageError("--steps must be at least 1")
        if marker is not None and not marker.strip():
            raise UsageError("--step-marker must not be empty")
        return cls(**options)


@dataclass(frozen=True)
class FileResult:
    """What happened to one file."""

    path: str
    outcome: Outcome
    run_id: str | None = None
    error: str | None = None
    events: int = 0
    bytes: int = 0
    seconds: float = 0.0
    anomalies: Mapping[str, int] = field(default_factory=dict)
    steps_found: int | None = None  # steps in the trace (ProfilerStep#N or marker spans)
    steps_kept: int | None = None  # steps written (all of them without --steps)
    dropped: int = 0  # duration events outside the --steps window
    warnings: tuple[str, ...] = ()  # e.g. more steps asked for than the trace has

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "outcome": self.outcome,
            "run_id": self.run_id,
            "error": self.error,
            "events": self.events,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
            "anomalies": dict(self.anomalies),
            "steps_found": self.steps_found,
            "steps_kept": self.steps_kept,
            "dropped": self.dropped,
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True)
class FileJob:
    """One file's ingest as the pipeline knows it once hashed and locked: what every link
    strategy (one file alone, or a group of tiny traces) needs to write it and report it."""

    path: Path
    run_id: str
    ingest_id: str
    sha: str
    size: int
    replace: bool  # --force over a committed run of the same bytes
    started: datetime
    t0: float  # perf_counter at its start

    def written(self, events: int, anomalies: Counter[str] | Mapping[str, int],
                row: Mapping[str, Any], warnings: Sequence[str]) -> FileResult:
        """The final :class:`FileResult` of the written run (its ``runs`` row ``row``)."""
        import json

        return FileResult(
            str(self.path), "replaced" if self.replace else "ingested", self.run_id,
            events=events, bytes=self.size, seconds=time.perf_counter() - self.t0,
            anomalies=dict(anomalies), steps_found=row["n_steps"],
            steps_kept=json.loads(row["rows_json"]).get("steps", 0),
            dropped=row["n_dropped"], warnings=tuple(warnings),
        )


def error_result(
    exc: BaseException, path: Path, run_id: str | None, size: int, t0: float
) -> FileResult | None:
    """The failed :class:`FileResult` of a file whose ingest raised ``exc``; None: re-raise it."""
    import duckdb

    seconds = time.perf_counter() - t0
    if isinstance(exc, TracewhError):
        return FileResult(str(path), "failed", run_id, error=str(exc), bytes=size, seconds=seconds)
    if isinstance(exc, Exception):
        if isinstance(exc, (OSError, duckdb.Error, MemoryError, *_arrow_errors())):
            return FileResult(
                str(path), "failed", run_id,
                error=f"{path}: {type(exc).__name__}: {exc}".splitlines()[0][:500],
                bytes=size, seconds=seconds,
            )
        # a bug: report it with its origin, keep the batch going
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return FileResult(
            str(path), "failed", run_id,
            error=f"{path}: internal error {type(exc).__name__}: {exc} "
            f"({Path(where.filename).name}:{where.lineno})"[:500],
            bytes=size, seconds=seconds,
        )
    # a Rust panic in delta-rs surfaces as pyo3's PanicException, a BaseException:
    # one file's failure like any other, not the end of the batch
    if type(exc).__name__ != "PanicException":
        return None
    return FileResult(
        str(path), "failed", run_id,
        error=f"{path}: delta-rs panicked: {exc}".splitlines()[0][:500],
        bytes=size, seconds=seconds,
    )


def _arrow_errors() -> tuple[type[Exception], ...]:
    """pyarrow's error class where pyarrow is loaded (a small local ingest never loads it)."""
    import sys

    pa = sys.modules.get("pyarrow")
    return (pa.ArrowException,) if pa is not None else ()


CAPTURE_FOLDERS = frozenset({"capture_traces"})


def default_job(path: Path) -> str:
    """The job of a trace without ``--job``: its folder (the parent of a capture folder)."""
    folder = path.parent
    return str(folder.parent if folder.name in CAPTURE_FOLDERS else folder)
