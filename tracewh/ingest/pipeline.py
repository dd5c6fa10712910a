"""Ingest one trace file: hash, lock, stream to staging, derive, commit.

The commit order makes a run atomic across tables: every child table is
appended (one Delta commit each, rows tagged with a fresh ``ingest_id``), then
the ``runs`` row, which is what makes them visible. A failure or a kill before
that leaves only invisible rows, removed by :func:`tracewh.ingest.cleanup.cleanup`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import duckdb

from tracewh import __version__
from tracewh.errors import TraceFormatError, TracewhError
from tracewh.ingest.commit import copy_and_commit
from tracewh.ingest.files import check_unchanged, open_regular, stamp
from tracewh.ingest.memory import parse_size, retry_on_oom, set_limit
from tracewh.ingest.parts import Staged, stage_file
from tracewh.ingest.reader import sha256_file
from tracewh.ingest.rows import I64_MAX, I64_MIN, dumps
from tracewh.ingest.shred import STAGING_TABLES
from tracewh.sqlfiles import SQL_DIR, glob_escaped, sql_string
from tracewh.store import DuplicateRunError, Store

if TYPE_CHECKING:
    from tracewh.ingest.batchcommit import CommitBatch
    from tracewh.ingest.group import TinyGroup
    from tracewh.ingest.shred import StageConnections

INGEST_SQL = SQL_DIR / "ingest"
T = TypeVar("T")
NAMES_SQL = SQL_DIR / "05_names.sql"
KEY_SQL = SQL_DIR / "06_kernel_key.sql"

Outcome = Literal["ingested", "replaced", "skipped", "failed"]

OUT_TABLES = (
    ("events", "20_out_events.sql"),
    ("gpu_ops", "21_out_gpu_ops.sql"),
    ("steps", "22_out_steps.sql"),
    ("instants", "23_out_instants.sql"),
    ("counters", "24_out_counters.sql"),
    ("flows", "25_out_flows.sql"),
    ("flow_args", "28_out_flow_args.sql"),
    ("python", "26_out_python.sql"),
    ("module_spans", "29_out_module_spans.sql"),
    ("annotation_spans", "32_out_annotation_spans.sql"),
    ("graph_nodes", "33_out_graph_nodes.sql"),
    ("collectives", "34_out_collectives.sql"),
    ("threads", "27_out_threads.sql"),
    ("fingerprints", "29_out_fingerprints.sql"),
)


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


def read_sidecar_labels(path: Path) -> dict[str, str]:
    """Labels from a ``run.json`` next to the trace (flat ``{key: value}``); {} if none."""
    sidecar = path.parent / "run.json"
    if not sidecar.exists() and not sidecar.is_symlink():
        return {}
    try:  # a FIFO or device named run.json fails here, at once (never read)
        with open_regular(sidecar) as f:
            data = json.loads(f.read(16 << 20).decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise TraceFormatError(sidecar, f"unreadable run.json: {exc}") from exc
    if not isinstance(data, dict):
        raise TraceFormatError(sidecar, "run.json is not a JSON object")
    labels = data.get("labels") if isinstance(data.get("labels"), dict) else None
    flat: dict[str, str] = {}
    for key, value in {**data, **(labels or {})}.items():
        if key == "labels" or isinstance(value, dict | list):
            continue
        flat[str(key)] = value if isinstance(value, str) else json.dumps(value)
    return flat


#: Folders inference servers write their CUDA/HIP graph capture traces to, beside the
#: traces that replay the graphs (vLLM, SGLang): a trace there belongs to the parent's job.
CAPTURE_FOLDERS = frozenset({"capture_traces"})


def default_job(path: Path) -> str:
    """The job of a trace without ``--job``: its folder (the parent of a capture folder)."""
    folder = path.parent
    return str(folder.parent if folder.name in CAPTURE_FOLDERS else folder)


def _existing_run(store: Store, run_id: str) -> dict[str, Any] | None:
    """The committed ``runs`` row of ``run_id`` (its run_id, ingest_id, source_path), or None."""
    if store.remote:
        import pyarrow.compute as pc

        table = store.read_table("runs", columns=["run_id", "ingest_id", "source_path"])
        rows = table.filter(pc.field("run_id") == run_id).to_pylist()
        return rows[0] if rows else None
    files = store.file_uris("runs")
    if not files:
        return None
    con = duckdb.connect(config={"threads": 1})
    try:
        found = con.execute(
            # hive_partitioning off: a `key=value` folder above the warehouse is no column
            "SELECT run_id, ingest_id, source_path FROM read_parquet(?, hive_partitioning = false) "
            "WHERE run_id = ? LIMIT 1",
            [[glob_escaped(f) for f in files], run_id],
        ).fetchall()
    finally:
        con.close()
    return dict(zip(("run_id", "ingest_id", "source_path"), found[0], strict=True)) if found else None


def _now() -> datetime:
    return datetime.now(UTC)


def ingest_file(
    store: Store, path: Path, options: IngestOptions, *, batch: CommitBatch | None = None,
    group: TinyGroup | None = None,
) -> FileResult:
    """Ingest one trace file into ``store``; never raises for a bad file.

    Returns a :class:`FileResult` whose ``outcome`` is ``ingested``,
    ``replaced`` (``--force`` over an existing run), ``skipped`` (same bytes
    already ingested) or ``failed`` (``error`` names the file and the problem).
    With ``batch`` (a local warehouse), the file's commits wait for the batch's
    flush (:mod:`tracewh.ingest.batchcommit`): the final results come from
    ``batch.take()`` / ``batch.close()``, this one is provisional. With ``group`` too
    (the batch's :class:`~tracewh.ingest.group.TinyGroup`), a tiny trace, once staged,
    is linked and written with the group's other tiny traces when the group runs.
    """
    started = _now()
    t0 = time.perf_counter()
    path = Path(os.path.abspath(path))
    ingest_id: str | None = None
    sha: str | None = None
    size = 0
    run_id: str | None = None
    try:
        try:
            before = stamp(path)
            sha, size = sha256_file(path)
        except OSError as exc:
            raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from exc
        run_id = sha[:16]
        if batch is not None:
            batch.begin_file()
        # writers (shared): a `compact --retain-hours 0` (exclusive) waits for this ingest
        with _held(store, batch, "writers", shared=True), _held(store, batch, f"run-{run_id}"):
            existing = _existing_run(store, run_id)
            if existing is None and batch is not None and (
                run_id in batch.run_ids or (group is not None and run_id in group.run_ids)
            ):
                # the same bytes twice in one batch (even with --force): once is enough
                existing = {"source_path": "an earlier file of this batch"}
            if existing is not None and (not options.force or "ingest_id" not in existing):
                result = FileResult(
                    str(path), "skipped", run_id,
                    error=f"already ingested (run {run_id} from {existing['source_path']})",
                    bytes=size, seconds=time.perf_counter() - t0,
                )
            else:
                ingest_id = uuid.uuid4().hex
                defer = None if group is None else group.taker(
                    path=path, run_id=run_id, ingest_id=ingest_id, sha=sha, size=size,
                    replace=existing is not None, started=started, t0=t0,
                )
                with _held(store, batch, f"ingest-{ingest_id}"):
                    done = _ingest_locked(
                        store, path, options,
                        run_id=run_id, ingest_id=ingest_id, sha=sha, size=size,
                        replace=existing is not None, batch=batch, before=before, defer=defer,
                        connections=None if group is None else group.connections,
                    )
                if done is None:  # the group writes it and gives its result to the batch
                    return FileResult(str(path), "ingested", run_id, bytes=size)
                n_events, anomalies, row, warnings = done
                result = FileResult(
                    str(path), "replaced" if existing is not None else "ingested", run_id,
                    events=n_events, bytes=size, seconds=time.perf_counter() - t0,
                    anomalies=anomalies, steps_found=row["n_steps"],
                    steps_kept=json.loads(row["rows_json"]).get("steps", 0),
                    dropped=row["n_dropped"], warnings=tuple(warnings),
                )
    except DuplicateRunError:  # object stores: the same bytes, committed concurrently
        result = FileResult(
            str(path), "skipped", run_id,
            error=f"already ingested by a concurrent ingest (run {run_id})",
            bytes=size, seconds=time.perf_counter() - t0,
        )
    except BaseException as exc:
        failed = error_result(exc, path, run_id, size, t0)
        if failed is None:
            raise
        result = failed
    return finish(store, batch, result, ingest_id, sha, started)


def error_result(
    exc: BaseException, path: Path, run_id: str | None, size: int, t0: float
) -> FileResult | None:
    """The failed :class:`FileResult` of a file whose ingest raised ``exc``; None: re-raise it."""
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


def finish(
    store: Store, batch: CommitBatch | None, result: FileResult, ingest_id: str | None,
    sha: str | None, started: datetime,
) -> FileResult:
    """Log one file's result (or hand it to the batch, which logs it at its flush)."""
    if batch is not None:
        ingest = ingest_id if result.outcome in ("ingested", "replaced") else None
        batch.done(result, functools.partial(_log_row, sha=sha, started=started), ingest_id=ingest)
        return result
    try:  # the log is best effort; the run is committed or not
        _log(store, result, sha, started)
    except Exception:
        pass
    except BaseException as exc:  # delta-rs panics (a read-only file system): not our batch's end
        if type(exc).__name__ != "PanicException":
            raise
    return result


@contextlib.contextmanager
def _held(store: Store, batch: CommitBatch | None, key: str, *, shared: bool = False) -> Iterator[None]:
    """Lock ``key`` for this block, or, in a batch, until the batch's flush."""
    if batch is None:
        with store.lock(key, shared=shared):
            yield
    else:
        batch.hold(key, shared=shared)
        yield


def _ingest_locked(
    store: Store,
    path: Path,
    options: IngestOptions,
    *,
    run_id: str,
    ingest_id: str,
    sha: str,
    size: int,
    replace: bool,
    before: tuple[int, int, int, int],
    batch: CommitBatch | None = None,
    defer: Callable[[Staged, Path, dict[str, str], Callable[[], None]], bool] | None = None,
    connections: StageConnections | None = None,
) -> tuple[int, dict[str, int], dict[str, Any], list[str]] | None:
    """Stage, link and write one file; None when ``defer`` took it, once staged (a group's)."""
    labels = {**read_sidecar_labels(path), **options.labels}
    staging = store.new_staging(ingest_id)
    deferred = False
    try:
        staged = stage_file(
            path, staging, parts=options.parts, skip_python=options.skip_python,
            memory_limit=options.stage_memory_limit, min_split_bytes=options.min_split_bytes,
            native=options.native, connections=connections,
        )
        unchanged = functools.partial(
            check_unchanged, path, before, sha, (staged.file_sha256, staged.file_bytes)
        )
        unchanged()
        if staged.events == 0:
            raise TraceFormatError(path, "traceEvents is empty: nothing to ingest")
        if defer is not None and defer(staged, staging, labels, unchanged):
            deferred = True  # its staging folder is the group's now
            return None
        con = _connect(staging, staged, options)
        try:
            row, warnings = _derive_and_commit(
                store, con, staged.metadata, options,
                run_id=run_id, ingest_id=ingest_id, replace=replace,
                base=dict(path=path, sha=sha, size=size, labels=labels,
                          n_events=staged.events, anomalies=staged.anomalies),
                parts=staged.parts, batch=batch, before_commit=unchanged,
            )
        finally:
            con.close()
        return staged.events, dict(staged.anomalies), row, warnings
    except BaseException:
        if batch is not None:
            batch.drop(ingest_id)  # nothing of it is committed: its written files go
        else:
            _discard(store, ingest_id)
        raise
    finally:
        if not deferred:
            store.remove_staging(staging)


def _discard(store: Store, ingest_id: str) -> None:
    """Best-effort removal of the child rows of a failed ingest (cleanup does it otherwise)."""
    from tracewh.ingest.cleanup import delete_ingest

    with contextlib.suppress(Exception):
        delete_ingest(store, ingest_id)


def _connect(staging: Path, staged: Staged, options: IngestOptions) -> Any:
    """DuckDB over the staged parts: ``s_*`` views with global event indices, linkage."""
    tmp = staging / "duckdb_tmp"
    tmp.mkdir(exist_ok=True)
    con = duckdb.connect(
        config={"memory_limit": options.memory_limit, "threads": max(1, options.threads)}
    )
    try:
        con.execute("SET temp_directory = ?", [str(tmp)])
        con.execute("SET preserve_insertion_order = false")
        for name in STAGING_TABLES:
            # s_ev: every `ph: X` row but python_function, the GPU ops' (gev) included
            tables = ("ev", "gev") if name == "ev" else (name,)
            selects = [
                _part_select(  # thr: no event_index
                    folder, name, 0 if name == "thr" else off,
                    [p for t in tables for p in (Path(folder) / t).glob("*.parquet")],
                )
                for folder, off in staged.parts
            ]
            con.execute(f"CREATE TEMP VIEW s_{name} AS {' UNION ALL '.join(selects)}")
        link_setup(con, options)
        link = (INGEST_SQL / "10_link.sql").read_text(encoding="utf-8")
        _, limit = retry_on_oom(con, lambda: con.execute(link), parse_size(options.memory_limit))
        retry_on_oom(con, functools.partial(_write_link, con, staging), limit)
    except BaseException:
        con.close()
        raise
    return con


def link_setup(con: Any, options: IngestOptions) -> None:
    """What ``10_link.sql`` needs besides the staged rows: the name and key macros, ``t_opts``."""
    con.execute(NAMES_SQL.read_text(encoding="utf-8"))
    con.execute(KEY_SQL.read_text(encoding="utf-8"))
    con.execute("CREATE OR REPLACE TEMP TABLE t_opts (step_marker VARCHAR)")
    con.execute("INSERT INTO t_opts VALUES (?)", [options.step_marker])


def _write_link(con: Any, folder: Path) -> None:
    """Write the GPU ops' linkage and their operators to Parquet in ``folder``.

    ``11_link_out.sql`` and ``12_op_out.sql``, in event order (row groups of
    :data:`GPU_SLICE_ROWS`, so a ``gpu_ops`` slice reads one or two of each),
    then drops the tables they read and defines the views ``t_gpu_link`` and
    ``t_op`` over the files: no linkage table stays in DuckDB's memory (held
    there, the output queries paged them back in up to the memory limit).
    Safe to repeat (the files are written again from their start).
    """
    con.execute("SET preserve_insertion_order = true")  # the files in event order
    try:
        for name, sql_file in (("gpu_link", "11_link_out.sql"), ("op", "12_op_out.sql")):
            query = (INGEST_SQL / sql_file).read_text(encoding="utf-8")
            con.execute(
                f"COPY ({query}) TO $out (FORMAT parquet, COMPRESSION lz4, "
                f"ROW_GROUP_SIZE {GPU_SLICE_ROWS})",
                {"out": str(folder / f"{name}.parquet")},
            )
    finally:
        con.execute("SET preserve_insertion_order = false")
    con.execute("DROP TABLE IF EXISTS t_gpu_link1")
    con.execute("DROP TABLE IF EXISTS t_op")
    for name in ("gpu_link", "op"):
        files = _parquet_files([folder / f"{name}.parquet"])
        con.execute(f"CREATE OR REPLACE TEMP VIEW t_{name} AS SELECT * FROM {files}")


def _part_select(
    folder: str, table: str, off: int, files: list[Path] | None = None, file_no: int = 0
) -> str:
    """``SELECT`` of one part's staged ``table`` (or of ``files`` of it), event indices + ``off``.

    Every row gets ``file_no``, the trace's key in the ingest SQL (``sql/ingest``: a
    single trace is 0; see :mod:`tracewh.ingest.group` for many at once).
    """
    rel = _parquet_files(files if files is not None else list((Path(folder) / table).glob("*.parquet")))
    key = f"CAST({int(file_no)} AS INTEGER) AS file_no"
    if off == 0:
        return f"SELECT *, {key} FROM {rel}"
    return f"SELECT * REPLACE (event_index + {int(off)} AS event_index), {key} FROM {rel}"


def _parquet_files(files: list[Path]) -> str:
    """``read_parquet([...])`` of ``files``, largest first.

    DuckDB estimates the rows of a multi-file scan from its first file: a small
    first file (the few events the compiled path handed back, an empty schema
    file) made it build hash joins on the large side and spill.
    """
    ordered = sorted(files, key=lambda p: (-p.stat().st_size, p.name))
    quoted = ", ".join(sql_string(glob_escaped(str(p))) for p in ordered)
    return f"read_parquet([{quoted}], hive_partitioning = false)"


class _FileRanges:
    """The ``event_index`` range of each staged Parquet file, from its statistics, read once.

    A ``gpu_ops`` slice then opens only the files that overlap it (each open reads
    the file's footer; with every file listed, a 1 GB trace's 32 slices opened
    ~60 files each).
    """

    def __init__(self, con: Any = None) -> None:
        # the connection that reads the files' Parquet footers: the ingest's (default: one of
        # its own, opened on first use)
        self._con = con
        self._cache: dict[Path, tuple[int, int] | None] = {}

    def _range(self, path: Path) -> tuple[int, int] | None:
        if path not in self._cache:
            if self._con is None:
                self._con = duckdb.connect(config={"threads": 1})
            # one row per row group: its rows and event_index's min/max (NULL: unknown)
            groups = self._con.execute(
                "SELECT g.num_rows, c.stats_min_value, c.stats_max_value "
                "FROM (SELECT DISTINCT row_group_id, row_group_num_rows AS num_rows "
                "      FROM parquet_metadata($f)) g "
                "LEFT JOIN (FROM parquet_metadata($f) WHERE path_in_schema = 'event_index') c "
                "USING (row_group_id)",
                {"f": glob_escaped(str(path))},
            ).fetchall()
            span: tuple[int, int] | None = (0, -1)  # no rows: overlaps nothing
            for num_rows, lo_text, hi_text in groups:
                if not num_rows:
                    continue
                if lo_text is None or hi_text is None or span is None:
                    span = None  # unknown: always read
                    break
                lo, hi = int(lo_text), int(hi_text)
                span = (lo, hi) if span[1] < span[0] else (min(span[0], lo), max(span[1], hi))
            self._cache[path] = span
        return self._cache[path]

    def overlapping(self, folder: Path, lo: int, hi: int) -> list[Path]:
        """Files of ``folder`` that may hold an ``event_index`` in ``[lo, hi)``."""
        keep = []
        for path in folder.glob("*.parquet"):
            span = self._range(path)
            if span is None or (span[0] < hi and span[1] >= lo):
                keep.append(path)
        return keep or [folder / "schema.parquet"]  # none: its columns, no rows


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, ArithmeticError):
        return None


def _i(value: Any) -> int | None:
    """An int64 from a metadata value; None when it is not one."""
    out = _int(value)
    return out if out is not None and I64_MIN <= out <= I64_MAX else None


def _base_time(value: Any, summary: Mapping[str, Any], anomalies: Counter[str]) -> int | None:
    """``baseTimeNanoseconds`` as added to every timestamp; None when absent or unusable.

    A value that is not an integer counts ``mistyped_base_time``; one that is
    outside int64, or would take a timestamp (or the run's end) outside it,
    counts ``base_time_out_of_range``: timestamps then stay relative.
    """
    if value is None:
        return None
    base_ns = _int(value)
    if base_ns is None:
        anomalies["mistyped_base_time"] += 1
        return None
    lo = summary["min_ts_ns"] if summary["min_ts_ns"] is not None else 0
    hi = max(summary["max_ts_ns"] or 0, summary["end_ns"] or 0)
    if not (I64_MIN <= base_ns <= I64_MAX and lo + base_ns >= I64_MIN and hi + base_ns <= I64_MAX):
        anomalies["base_time_out_of_range"] += 1
        return None
    return base_ns


def _device_names(meta: Mapping[str, Any]) -> list[str]:
    props = meta.get("deviceProperties")
    if isinstance(props, str):
        try:
            props = json.loads(props)
        except ValueError:
            return []
    if isinstance(props, dict):
        props = [props]
    if not isinstance(props, list):
        return []
    # a blank name ("" in some traces) is no name: device_name is NULL then, never ''
    names = (str(p.get("name") or "").strip() for p in props if isinstance(p, dict))
    return [n for n in names if n]


def _windows(con: Any, steps: int | None) -> dict[int, tuple[int | None, int | None]]:
    """Per ``file_no``, the ``--steps N`` window [first step start, last kept step end); ``t_kept``.

    ``t_kept`` holds the first N steps of each file in time order; a file absent from the
    result (or every file, without a limit) keeps everything: (None, None).
    """
    con.execute(
        "CREATE OR REPLACE TEMP TABLE t_kept AS SELECT file_no, step FROM t_steps "
        "QUALIFY row_number() OVER (PARTITION BY file_no ORDER BY ts_ns, step) <= ?",
        [steps if steps is not None else I64_MAX],
    )
    if steps is None:
        return {}
    rows = con.execute(
        "SELECT s.file_no, min(s.ts_ns), max(s.ts_ns + s.dur_ns) FROM t_steps s "
        "SEMI JOIN t_kept k ON k.file_no = s.file_no AND k.step = s.step GROUP BY s.file_no"
    ).fetchall()
    return {int(f): (lo, hi) for f, lo, hi in rows}


#: The columns of ``t_files``: per staged trace (file_no), what its output rows carry.
_FILES_COLUMNS = (
    "file_no INTEGER, run_id VARCHAR, ingest_id VARCHAR, day DATE, base_ns BIGINT, "
    "lo_ns BIGINT, hi_ns BIGINT, ev_off BIGINT"
)


def set_files(con: Any, rows: list[tuple[Any, ...]]) -> None:
    """(Re)fill ``t_files``: (file_no, run_id, ingest_id, day, base_ns, lo_ns, hi_ns, ev_off)."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE t_files ({_FILES_COLUMNS})")
    if rows:
        marks = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?)"] * len(rows))
        con.execute(f"INSERT INTO t_files VALUES {marks}", [v for r in rows for v in r])


def _step_warnings(options: IngestOptions, found: int) -> list[str]:
    """What the user should know about the steps: none found, or fewer than asked for."""
    what = (f"no span matches --step-marker {options.step_marker!r}"
            if options.step_marker is not None else "no ProfilerStep#N span in the trace")
    if found == 0 and (options.steps is not None or options.step_marker is not None):
        if options.steps is not None:
            return [f"--steps {options.steps}: {what}; nothing was dropped"]
        return [f"{what}: the run has no steps"]
    if options.steps is not None and options.steps > found:
        return [f"--steps {options.steps}: the trace has only {found} step(s); kept them all"]
    return []


#: GPU ops per slice of the ``gpu_ops`` output (bounds the output join's memory, which
#: grows faster than the slice: on the 1 GB real H100 tile a slice's COPY added ~100 MB of
#: RSS at 8192, ~25 MB at 2048; at 4096 the output stays under the linkage's peak, same
#: CPU as at 8192; at 16k it peaked ~45 MB higher than at 8192, 0.3 s faster).
GPU_SLICE_ROWS = 4_096


@dataclass(frozen=True)
class _Slices:
    """The ``gpu_ops`` output slices: ``event_index`` ranges, each with its operators' range."""

    ranges: list[tuple[int, int]]  # [lo, hi) of about GPU_SLICE_ROWS GPU ops each, in order
    ops: dict[int, tuple[int, int] | None]  # lo -> enclosing operators' [first, last] index


def _gpu_slices(con: Any) -> _Slices:
    """The slices of :data:`GPU_SLICE_ROWS` GPU ops (``13_gpu_slices.sql``)."""
    rows = con.execute(
        (INGEST_SQL / "13_gpu_slices.sql").read_text(encoding="utf-8"), {"n": GPU_SLICE_ROWS}
    ).fetchall()
    edges = [int(r[0]) for r in rows]
    return _Slices(
        ranges=list(zip(edges, [*edges[1:], I64_MAX], strict=False)),
        ops={int(lo): (int(a), int(b)) if a is not None else None for lo, a, b in rows},
    )


def _slice_view(
    con: Any,
    parts: list[tuple[str, int]],
    lo: int,
    hi: int,
    ops: tuple[int, int] | None,
    ranges: _FileRanges,
) -> None:
    """(Re)define the views of one ``gpu_ops`` slice (``21_out_gpu_ops.sql``).

    ``s_gev_slice`` / ``s_gpu_slice``: the GPU ops' staged base rows (``gev``) and
    typed args with ``lo <= event_index < hi``;
    ``s_op_slice``: the operators in ``ops`` (first, last event_index). The bounds
    are literals (relative to each part for staged rows), so DuckDB prunes the
    Parquet files and row groups outside the slice.
    """
    ends = [off for _, off in parts[1:]] + [I64_MAX]
    for view, table in (("s_gev_slice", "gev"), ("s_gpu_slice", "gpu")):
        selects = []
        for (folder, off), end in zip(parts, ends, strict=True):
            if hi <= off or lo >= end:
                continue
            plo, phi = lo - off, min(hi, end) - off
            files = ranges.overlapping(Path(folder) / table, plo, phi)
            selects.append(
                _part_select(folder, table, off, files)
                + f" WHERE event_index >= {int(plo)} AND event_index < {int(phi)}"
            )
        if not selects:  # no part overlaps: an empty slice
            selects.append(f"SELECT * FROM s_{table} WHERE false")
        con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS {' UNION ALL '.join(selects)}")
    where = (
        f"event_index >= {int(ops[0])} AND event_index <= {int(ops[1])}" if ops else "false"
    )
    con.execute(f"CREATE OR REPLACE TEMP VIEW s_op_slice AS SELECT * FROM t_op WHERE {where}")


@dataclass
class RunPlan:
    """One staged trace's figures before its tables are written (:func:`plan_runs`)."""

    summary: dict[str, Any]
    anomalies: Counter[str]
    base_time: int | None
    base_ns: int
    start_ns: int | None
    end_ns: int | None
    day: date
    window: tuple[int | None, int | None]


def plan_runs(
    con: Any,
    metas: Mapping[int, Mapping[str, Any]],
    anomalies: Mapping[int, Counter[str]],
    options: IngestOptions,
    run: Callable[[Callable[[], Any]], Any] = lambda step: step(),
) -> dict[int, RunPlan]:
    """Per ``file_no`` of ``metas`` (every file of ``t_files``): its summary, anomalies, day, window.

    ``anomalies`` (the staging's, per file) are updated with those found after the
    linkage (``40_anomalies.sql``). ``run`` wraps each query (a memory-limit retry).
    """
    summary_sql = (INGEST_SQL / "30_summary.sql").read_text("utf-8")

    def summaries() -> dict[int, dict[str, Any]]:
        cur = con.execute(summary_sql)
        cols = [d[0] for d in cur.description]
        return {int(r[0]): dict(zip(cols, r, strict=True)) for r in cur.fetchall()}

    by_file = run(summaries)
    found = (INGEST_SQL / "40_anomalies.sql").read_text("utf-8")
    for file_no, key, n in run(lambda: con.execute(found).fetchall()):
        if n:
            anomalies[int(file_no)][str(key)] += int(n)
    windows = run(lambda: _windows(con, options.steps))
    plans: dict[int, RunPlan] = {}
    for file_no, meta in metas.items():
        summary, found_here = by_file[file_no], anomalies[file_no]
        base_time = _base_time(meta.get("baseTimeNanoseconds"), summary, found_here)
        base_ns = base_time or 0
        start_ns = summary["start_ns"] + base_ns if summary["start_ns"] is not None else None
        end_ns = summary["end_ns"] + base_ns if summary["end_ns"] is not None else None
        if end_ns is not None and not I64_MIN <= end_ns <= I64_MAX:
            found_here["end_out_of_range"] += 1
            end_ns = None
        day = (
            datetime.fromtimestamp(start_ns / 1e9, UTC).date()
            if start_ns is not None and 0 <= start_ns < 253402300799 * 10**9
            else date(1970, 1, 1)
        )
        plans[file_no] = RunPlan(
            summary, found_here, base_time, base_ns, start_ns, end_ns, day,
            windows.get(file_no, (None, None)),
        )
    return plans


def category_counts(con: Any) -> dict[int, dict[str, int]]:
    """Per ``file_no``: its events per (phase/category) (``31_category_counts.sql``)."""
    out: dict[int, dict[str, int]] = {}
    for file_no, k, n in con.execute(
        (INGEST_SQL / "31_category_counts.sql").read_text(encoding="utf-8")
    ).fetchall():
        out.setdefault(int(file_no), {})[str(k)] = int(n)
    return out


def _derive_and_commit(
    store: Store,
    con: Any,
    meta: Mapping[str, Any],
    options: IngestOptions,
    *,
    run_id: str,
    ingest_id: str,
    replace: bool,
    base: Mapping[str, Any],
    parts: list[tuple[str, int]],
    batch: CommitBatch | None = None,
    before_commit: Callable[[], None] = lambda: None,
) -> tuple[dict[str, Any], list[str]]:
    """Write the run's tables and its ``runs`` row; the row and the step warnings."""
    limit = parse_size(options.output_memory_limit)
    set_limit(con, limit)

    def run(step: Callable[[], T]) -> T:
        """``step`` under the connection's limit, raised while DuckDB runs out of memory."""
        nonlocal limit
        result, limit = retry_on_oom(con, step, limit)
        return result

    set_files(con, [(0, run_id, ingest_id, None, 0, None, None, 0)])
    plan = plan_runs(con, {0: meta}, {0: base["anomalies"]}, options, run)[0]
    lo, hi = plan.window
    set_files(con, [(0, run_id, ingest_id, plan.day, plan.base_ns, lo, hi, 0)])
    written: dict[str, int] = {}
    ranges = _FileRanges(con)
    for table, sql_file in OUT_TABLES:
        query = (INGEST_SQL / sql_file).read_text(encoding="utf-8")
        slices = run(lambda: _gpu_slices(con)) if table == "gpu_ops" else None
        on_slice = (
            (lambda lo, hi, s=slices: _slice_view(con, parts, lo, hi, s.ops[lo], ranges))
            if slices is not None else None
        )
        # a slice's query is small: one DuckDB thread (the writer thread takes the other
        # core) was faster than two and lower in memory
        con.execute(f"SET threads = {1 if slices is not None else max(1, options.threads)}")
        written[table] = run(functools.partial(
            copy_and_commit, store, con, table, query, {}, day=plan.day, run_id=run_id,
            ingest_id=ingest_id, slices=slices.ranges if slices is not None else None,
            on_slice=on_slice, batch=batch,
        ))
    cat_counts = run(lambda: category_counts(con)).get(0, {})
    row = run_row(
        meta, options, plan, written, cat_counts, run_id=run_id, ingest_id=ingest_id,
        path=base["path"], size=base["size"], sha=base["sha"], labels=base["labels"],
        n_events=base["n_events"],
    )
    warnings = _step_warnings(options, int(plan.summary["n_steps"] or 0))
    before_commit()  # the file is still the one hashed: else nothing becomes visible
    if batch is not None:
        # checked again at the flush, right before the batch's commits
        batch.add_run(ingest_id, row, replace=replace, check=before_commit)
        return row, warnings
    store.append_rows("runs", [row], replace_run=run_id if replace else None)
    return row, warnings


def run_row(
    meta: Mapping[str, Any],
    options: IngestOptions,
    plan: RunPlan,
    written: Mapping[str, int],
    cat_counts: Mapping[str, int],
    *,
    run_id: str,
    ingest_id: str,
    path: Path,
    size: int,
    sha: str,
    labels: Mapping[str, str],
    n_events: int,
) -> dict[str, Any]:
    """The ``runs`` row of one written run."""
    summary, anomalies = plan.summary, plan.anomalies
    kept = written["events"] + written["python"]
    dropped = summary["n_duration_events"] + summary["n_python"] - kept
    names = _device_names(meta)
    raw_dist = meta.get("distributedInfo")
    dist: dict[str, Any] = raw_dist if isinstance(raw_dist, dict) else {}
    backend = (
        "mtia" if summary["n_mtia"]
        else "rocm" if summary["n_hip_calls"] or any(
            k in n.upper() for n in names for k in ("AMD", "RADEON", "INSTINCT"))
        else "cuda" if summary["n_gpu_ops"] or names
        else "cpu"
    )
    return {
        "run_id": run_id,
        "ingest_id": ingest_id,
        "day": plan.day,
        "source_path": str(path),
        "file_name": path.name,
        "bytes": size,
        "sha256": sha,
        "ingested_at": options.ingested_at or _now(),
        "start_ns": plan.start_ns,
        "end_ns": plan.end_ns,
        "host": str(meta.get("host_name") or meta.get("hostname") or "") or None,
        "rank": _i(dist.get("rank")),
        "world_size": _i(dist.get("world_size")),
        "device_name": names[0] if names else None,
        "device_names": names,
        "device_count": len(names),
        "backend": backend,
        "dist_backend": str(dist["backend"]) if dist.get("backend") is not None else None,
        "trace_name": str(meta["traceName"]) if meta.get("traceName") is not None else None,
        "trace_id": str(meta["trace_id"]) if meta.get("trace_id") is not None else None,
        "schema_version": _i(meta.get("schemaVersion")),
        "base_time_ns": plan.base_time,
        "job": options.job or default_job(path),
        "labels_json": dumps(dict(sorted(labels.items()))),
        "metadata_json": dumps(dict(meta), anomalies),
        "category_counts_json": dumps(dict(cat_counts)),
        "n_events": n_events,
        "n_duration_events": summary["n_duration_events"],
        "n_gpu_ops": summary["n_gpu_ops"],
        "n_kernels": summary["n_kernels"],
        "n_memcpy": summary["n_memcpy"],
        "n_memset": summary["n_memset"],
        "n_runtime": summary["n_runtime"],
        "n_cpu_ops": summary["n_cpu_ops"],
        "n_python": summary["n_python"],
        "n_instants": summary["n_instants"],
        "n_counters": summary["n_counters"],
        "n_flows": summary["n_flows"],
        "n_steps": summary["n_steps"],
        "n_unlinked_gpu_ops": summary["n_unlinked_gpu_ops"],
        "n_dropped": dropped,
        "rows_json": dumps(dict(written)),
        "steps_limit": options.steps,
        "step_marker": options.step_marker,
        "kind": summary["kind"],
        "skip_python": options.skip_python,
        "anomalies_json": dumps(dict(sorted(anomalies.items()))) if anomalies else None,
        "tracewh_version": __version__,
    }


def _log(store: Store, result: FileResult, sha: str | None, started: datetime) -> None:
    store.append_rows("ingest_log", [_log_row(result, sha=sha, started=started)])


def _log_row(result: FileResult, *, sha: str | None, started: datetime) -> dict[str, Any]:
    """The ``ingest_log`` row of one attempt."""
    return {
        "attempt_id": uuid.uuid4().hex,
        "path": result.path,
        "sha256": sha,
        "run_id": result.run_id,
        "outcome": result.outcome,
        "error": result.error,
        "started_at": started,
        "finished_at": _now(),
        "bytes": result.bytes,
        "n_events": result.events,
        "host": socket.gethostname(),
        "tracewh_version": __version__,
    }
