"""Stage one part of a trace as Parquet files, one folder per staging table, fast.

The parse (ijson's C backend) is the floor; on top of it each event gets only
the small fix-up of :func:`tracewh.ingest.rows.prepare_events`. Batches of
fixed-up events are encoded with orjson into a chunk file (a JSON array);
every ``chunk_events`` events the chunk is handed to a background thread in
which DuckDB (C++, without the GIL) types and routes it
(``sql/ingest/02_shred.sql``) into the staging tables' files. At most one chunk is being
shredded while the next is written, so memory and scratch disk are bounded by
the chunk size, never by the file size.

Each chunk is routed straight into Parquet files, one per staging table
(``<folder>/<table>/chunk-<n>.parquet``, lz4; the tables of
``00_stage_tables.sql`` only give their columns, as an empty
``schema.parquet`` each). Staged rows are thus columnar and compressed on disk
as soon as they are shredded: memory stays bounded by the chunk, nothing is
spilled or written twice (a DuckDB database file writes every row to its WAL
and again at checkpoint; an in-memory one spills uncompressed once it is
full), and the linkage step reads only the columns it needs with
``read_parquet`` (:mod:`tracewh.ingest.pipeline`).
"""

from __future__ import annotations

import gc
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb

from tracewh.core.errors import TraceFormatError
from tracewh.ingest import fast
from tracewh.ingest.chunks import INGEST_SQL as INGEST_SQL
from tracewh.ingest.chunks import STAGING_TABLES as STAGING_TABLES
from tracewh.ingest.chunks import Chunks
from tracewh.ingest.chunks import shred_statements as shred_statements
from tracewh.ingest.memory import parse_size
from tracewh.ingest.reader import c_backend, close_stream, finish, open_trace
from tracewh.ingest.rows import prepare_events
from tracewh.ingest.schemafiles import connect_stage as connect_stage
from tracewh.ingest.schemafiles import copy_schema_files


@dataclass
class PartResult:
    """What staging one part of a trace produced (picklable, returned by workers)."""

    part: int
    db: str  # folder holding ``<table>/*.parquet``
    events: int = 0
    anomalies: dict[str, int] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    start_offset: int | None = None
    cut_offset: int | None = None
    reached_eof: bool = False
    trailer_offset: int | None = None
    decompressed_bytes: int = 0
    error: str | None = None
    file_sha256: str | None = None  # of the file's bytes, when this part read them all
    file_bytes: int = 0
    #: a small whole document staged by the scanner alone: its chunks, held in memory
    #: (``fast.HOLD_EVENTS``), in place of ``db``'s files; None when it has files. Only
    #: in the process that staged it (tiny traces joining a linkage group read it there).
    held: fast.Held | None = None


DEFER_EVENTS = 20_000

#: A part of at most this many events gives its staging connection back for the next one.
REUSE_EVENTS = fast.KEEP_EVENTS  # the one threshold of both kept connections


class StageConnections:
    """A staging DuckDB connection kept between the small parts one process stages in turn.

    Opening one (:func:`connect_stage`: ~15 statements) and writing the schema files
    cost ~40 ms of CPU, more than staging a tiny trace's few unusual events. A part
    takes the kept connection (pointed at its own spill folder, its ``anom`` rows
    cleared); a part that ends well and is small gives it back; one that fails, or a
    large one (its buffers), closes it; the staging writer's connection is kept alike
    (:attr:`writer`). ``close`` closes both.
    """

    def __init__(self) -> None:
        self._con: Any = None
        #: the staging writer's connection, kept the same way (:class:`fast.KeptWriter`)
        self.writer = fast.KeptWriter()

    def take(self, folder: Path, *, memory_limit: str) -> Any:
        con, self._con = self._con, None
        if con is not None:
            try:
                tmp = folder / "duckdb_tmp"
                tmp.mkdir(exist_ok=True)
                con.execute("SET temp_directory = ?", [str(tmp)])
                con.execute("SET memory_limit = ?", [memory_limit])
                con.execute("DELETE FROM anom")
                return con
            except duckdb.Error:  # e.g. its spill folder was used: a fresh one
                con.close()
        return connect_stage(folder, memory_limit=memory_limit)

    def give(self, con: Any) -> None:
        try:
            con.execute("DROP TABLE IF EXISTS c")
            con.execute("DROP TABLE IF EXISTS g")
        except duckdb.Error:
            con.close()
            return
        old, self._con = self._con, con
        if old is not None:
            old.close()

    def close(self) -> None:
        """Close the kept connections."""
        con, self._con = self._con, None
        try:
            if con is not None:
                con.close()
        finally:
            self.writer.close()


class PythonStager:
    """Stage every event through ijson and the Python rows (:func:`tracewh.ingest.rows.prepare_events`).

    The reference path: where the C extension is not built, and what the C stager falls
    back to for a document it gives up on. Holds nothing (picklable: parts are staged in
    worker processes with it).
    """

    name = "python"

    def stage_part(self, path: Path, folder: Path, **kw: Any) -> PartResult:
        """Stage one part of ``path`` into ``folder`` (see :func:`stage_part`)."""
        return _stage_part(path, folder, None, scan=False, **kw)


class CStager:
    """Stage the ordinary events with the C extension (:mod:`tracewh.ingest.fast`).

    The direct scanner reads the bytes; a document it gives up on (malformed, unusual at
    the top level, a decompression error...) is staged again from scratch through ijson
    and the compiled shredder, which reports its errors. The unusual events go through
    the Python rows either way: both stagers stage the same rows
    (``tests/ingest/test_fast.py``, ``test_scan.py``).
    """

    name = "c"

    def stage_part(self, path: Path, folder: Path, **kw: Any) -> PartResult:
        """Stage one part of ``path`` into ``folder`` (see :func:`stage_part`)."""
        module = fast.native()
        if fast.scanner(module):
            try:
                return _stage_part(path, folder, module, scan=True, **kw)
            except (fast.Fallback, TraceFormatError):
                empty_folder(folder)  # the ijson path below stages it again and says what is wrong
        return _stage_part(path, folder, module, scan=False, **kw)


Stager = PythonStager | CStager


def stager_for(native: bool) -> Stager:
    """The staging strategy: C where asked for (``native``) and built, else Python."""
    return CStager() if native and fast.native() is not None else PythonStager()


def stage_part(
    path: Path,
    folder: Path,
    *,
    stager: Stager,
    part: int = 0,
    start_at: int | None = None,
    stop_at: int | None = None,
    skip_python: bool = False,
    memory_limit: str = "128MB",
    chunk_events: int = 65_536,
    connections: StageConnections | None = None,
) -> PartResult:
    """Parse the part of ``path`` between ``start_at`` and ``stop_at`` into ``folder``
    with ``stager`` (:class:`CStager` or :class:`PythonStager`, see :func:`stager_for`).

    Every staging table gets at least one (possibly empty) file, so readers always find
    its columns, unless the part is held in memory (:attr:`PartResult.held`: a small whole
    document of a batch, ``connections`` given, that the scanner staged alone). Raises
    :class:`~tracewh.core.errors.TraceFormatError` for an unreadable part.
    """
    return stager.stage_part(
        path, folder, part=part, start_at=start_at, stop_at=stop_at, skip_python=skip_python,
        memory_limit=memory_limit, chunk_events=chunk_events, connections=connections,
    )


def empty_folder(folder: Path) -> None:
    """Remove what ``folder`` holds (a part staged again from its start)."""
    for child in folder.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()


def _stage_part(
    path: Path,
    folder: Path,
    module: ModuleType | None,
    *,
    scan: bool,
    part: int,
    start_at: int | None,
    stop_at: int | None,
    skip_python: bool,
    memory_limit: str,
    chunk_events: int,
    connections: StageConnections | None,
) -> PartResult:
    anomalies: Counter[str] = Counter()
    kept = None if connections is None else connections.writer
    stream, tee = open_trace(path, start_at=start_at, stop_at=stop_at)
    # a whole document staged in a batch (connections) may be held in memory if small
    held: fast.Held | None = (
        fast.Held() if connections is not None and start_at is None and stop_at is None else None
    )
    # DuckDB (the pure path's shredding, the schema files) is opened when first needed:
    # scanned, a part's few unusual events wait until the scan is done (up to
    # DEFER_EVENTS of them), so its buffers and the scanner's are not held at once
    opened: list[tuple[Any, Chunks]] = []
    deferred: list[tuple[int, Any]] = []

    def sink() -> tuple[Any, Chunks]:
        if not opened:
            con = (connect_stage(folder, memory_limit=memory_limit) if connections is None
                   else connections.take(folder, memory_limit=memory_limit))
            opened.append((con, Chunks(
                con, folder, chunk_events=chunk_events, anomalies=anomalies,
                limit=parse_size(memory_limit),
            )))
        return opened[0]

    def pure(pairs: list[tuple[int, Any]]) -> object:
        return prepare_events(
            pairs, sink()[1], skip_python=skip_python, anomalies=anomalies, indexed=True
        )

    def slow_path(pairs: list[tuple[int, Any]]) -> object:
        if not scan:
            return pure(pairs)
        deferred.extend(pairs)
        if len(deferred) >= DEFER_EVENTS:
            pure(deferred)
            deferred.clear()
        return None

    def stop_head() -> None:
        tee.recording_head = False

    gc_was_enabled = gc.isenabled()
    gc.disable()  # events are acyclic; the collector only slows the parse down
    # a small part's buffers are small: the allocators' trim (~2 ms a call, a walk of the
    # whole heap) is for the parts whose buffers would sit under the linkage's budget
    small = False
    try:
        if module is None:
            n = prepare_events(
                stream.events, sink()[1], skip_python=skip_python, anomalies=anomalies
            )
        elif scan:
            try:
                n, skipped, is_array, events_end = fast.scan_events(
                    module, c_backend(), tee.read, folder, slow_path,
                    skip_python=skip_python, chunk_events=chunk_events, first_event=stop_head,
                    kept=kept, held=held,
                )
            finally:
                close_stream(stream, tee)
            finish(path, tee, stream, n, is_array=is_array, events_end=events_end)
            small = n <= REUSE_EVENTS
            if not small:
                fast.release_memory()
            if deferred:
                pure(deferred)
                deferred.clear()
        else:
            n, skipped = fast.stage_events(
                module, stream.events, folder, slow_path,
                skip_python=skip_python, chunk_events=chunk_events, kept=kept,
            )
        if module is not None and skipped:
            anomalies["skipped_python"] += skipped
        anomalies.update(stream.anomalies)
        if held and opened:  # the pure path wrote files: the held chunks join them
            fast.write_held(folder, held, kept)
            held = None
        if opened:
            con, chunks = opened[0]
            chunks.finish()
            for key, count in con.execute("SELECT key, sum(n) FROM anom GROUP BY key").fetchall():
                anomalies[key] += int(count)
            copy_schema_files(folder, con)
        elif not held:  # every event went through the extension: no staging DuckDB at all
            held = None
            copy_schema_files(folder)
        # else: held in memory, every event by the extension: no file, no DuckDB at all
        small = n <= REUSE_EVENTS
        if opened and connections is not None and small:
            connections.give(opened.pop()[0])  # for the next small part
    except BaseException:
        if opened:
            opened[0][1].abort()
        raise
    finally:
        if gc_was_enabled:
            gc.enable()
        if opened:
            opened[0][0].close()
        if not small:
            fast.release_memory()
    return PartResult(
        part=part,
        db=str(folder),
        events=n,
        anomalies=dict(anomalies),
        metadata=stream.metadata,
        start_offset=tee.start_offset,
        cut_offset=tee.cut_offset,
        reached_eof=tee.reached_eof,
        trailer_offset=stream.trailer_offset,
        decompressed_bytes=stream.decompressed_bytes,
        file_sha256=stream.file_sha256,
        file_bytes=stream.file_bytes,
        held=held or None,
    )
