"""The compiled staging path: ordinary events straight into Parquet, no JSON round trip.

:func:`scan_events` is the default: :mod:`tracewh.ingest._fastshred`'s scanner
(``_fastscan.c``) reads the decompressed bytes itself, without ijson, and stages the
ordinary events; the elements it leaves are parsed by ijson (their bytes only) and
go through the pure path; a document it is not sure of raises :class:`Fallback`,
and the caller stages it again with :func:`stage_events`.

:func:`stage_events`: :mod:`tracewh.ingest._fastshred` (C, built by ``setup.py`` when a compiler is
there) takes the events ijson yields and appends the ordinary ones (``ph``
X, s/t/f, i/I with the expected field types) to Arrow column buffers of the
staging tables ``ev``, ``py``, ``gpu``, ``flow`` and ``inst``; this module
writes those buffers as Parquet files beside the ones the pure path writes
(``<part>/<table>/fast-<n>.parquet``), one chunk in flight in a background
thread: the buffers go to DuckDB through the Arrow C stream interface
(``take_arrow()``, no copy, no pyarrow) and DuckDB writes them without the GIL. Every other event comes back with its
index and goes through the pure path (:func:`tracewh.ingest.rows.prepare_events`,
orjson, DuckDB), which types, counts and reports the unusual. Both paths
stage the same rows; ``tests/ingest/test_fast.py`` compares them.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb

from tracewh.core.categories import GPU_OP_CATEGORIES, PYTHON_CATEGORY

#: scan() results
_MORE, _DONE, _GIVE_UP = 0, 1, 2


class Fallback(Exception):
    """The scanner cannot stage this document: stage it again through ijson."""

#: DuckDB memory limit of the staging writer's connection (it holds about one chunk).
WRITER_MEMORY = "64MB"
#: Events taken from the parser per call (the handed-back ones are fixed up in between).
_BATCH = 8192
#: Staged column bytes that make a chunk (a Parquet file per table) besides ``chunk_events``
#: (a cap for traces with very long args; smaller chunks mean more staged files, and the
#: linkage over more files peaked higher: 1 GB real trace, 8 MB chunks 400 MB, 65 536 events
#: ~30 MB 366 MB):
#: python_function-heavy traces carry long args, and every chunk is held about twice
#: (the one being written, the one being filled).
CHUNK_BYTES = 32 << 20


def native() -> ModuleType | None:
    """The compiled extension, or None where it was not built (pure-Python staging)."""
    try:
        return importlib.import_module("tracewh.ingest._fastshred")
    except ImportError:
        return None


def release_memory() -> None:
    """Give freed memory back to the system: Arrow's pool (where pyarrow is loaded) and
    (glibc) the C heap.

    Staging frees its buffers, but the allocators keep the pages; the linkage that
    follows would add its DuckDB budget on top of them.
    """
    pa = sys.modules.get("pyarrow")
    if pa is not None:
        pa.default_memory_pool().release_unused()
    module = native()
    if module is not None:
        module.trim()


def _writer_connection() -> Any:
    return duckdb.connect(config={
        "threads": 1, "memory_limit": WRITER_MEMORY, "preserve_insertion_order": True,
    })


#: A part of at most this many events gives its kept connections back: the writer's
#: (:class:`KeptWriter`) and the staging one (``tracewh.ingest.shred.REUSE_EVENTS``).
KEEP_EVENTS = 20_000


class KeptWriter:
    """The staging writer's DuckDB connection, kept between the small parts one process
    stages in turn (:class:`tracewh.ingest.shred.StageConnections` holds one).

    Opening a DuckDB database and closing it costs ~20 ms of CPU, more than writing a
    tiny trace's staged rows. A part's writer takes the kept connection; a part of at
    most :data:`KEEP_EVENTS` events gives it back, a larger one (its buffers) or a
    failed one closes it. Used by one part at a time (a connection moves between writer
    threads, never shared).
    """

    def __init__(self) -> None:
        self._con: Any = None

    def take(self) -> Any:
        con, self._con = self._con, None
        return con if con is not None else _writer_connection()

    def give(self, con: Any) -> None:
        self.close()
        self._con = con

    def close(self) -> None:
        con, self._con = self._con, None
        if con is not None:
            con.close()


#: A whole-document part is held in memory (its Arrow chunks kept, no Parquet file written)
#: while it has at most this many events and :data:`HOLD_BYTES` of buffers: a tiny trace
#: that joins a linkage group (:mod:`tracewh.ingest.group`) is read from memory there.
HOLD_EVENTS = KEEP_EVENTS
HOLD_BYTES = 16 << 20


class Held(list[dict[str, Any]]):
    """A small part's staged chunks, held in memory in order (each a ``{table: ArrowChunk}``),
    with :attr:`nbytes`, their buffers' bytes (a linkage group bounds its members' sum)."""

    nbytes: int = 0


def _write_tables(con: Any, folder: Path, tables: dict[str, Any], seq: int) -> None:
    """Each table's chunk of ``tables`` to ``<folder>/<table>/fast-<seq>.parquet``; the
    chunks leave ``tables`` as they are written (their buffers freed with the relation)."""
    for name in list(tables):
        out = folder / name / f"fast-{seq:06d}.parquet"
        out.parent.mkdir(exist_ok=True)
        rel = con.from_arrow(tables.pop(name))
        rel.write_parquet(str(out), compression="lz4")
        del rel


def write_held(folder: Path, held: list[dict[str, Any]], kept: KeptWriter | None = None) -> None:
    """Write a held part's chunks as the staging writer would have: ``<folder>/<table>/
    fast-<n>.parquet`` (each dict of ``held`` is emptied as it goes)."""
    con = _writer_connection() if kept is None else kept.take()
    try:
        for seq, tables in enumerate(held):
            _write_tables(con, folder, tables, seq)
    except BaseException:
        con.close()
        raise
    if kept is not None:
        kept.give(con)
    else:
        con.close()


class _Writer:
    """Staged chunks -> ``<folder>/<table>/fast-<n>.parquet``, one chunk in flight.

    The extension hands each table's buffers over as an ``ArrowChunk`` (Arrow C
    stream interface, no copy) and DuckDB writes it (one thread, releasing the GIL
    while the scanner fills the next chunk): no pyarrow in the process. Its DuckDB
    connection comes from ``kept`` when given (and goes back to it after a part of one
    chunk), else it is opened for this part.
    """

    def __init__(self, folder: Path, kept: KeptWriter | None = None, *, hold: bool = False) -> None:
        self._folder = folder
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="tracewh-fast")
        self._pending: Future[None] | None = None
        self._seq = 0
        self._con: Any = None
        self._kept = kept
        self._failed = False
        #: whether the part was small enough to give the connection back (set by the caller)
        self.small = False
        #: the chunks held in memory, in order, while the part is small (``hold``); None
        #: once they went to files (or never held)
        self.held: list[dict[str, Any]] | None = [] if hold else None
        self._held_events = self.held_bytes = 0

    def submit(self, tables: dict[str, Any], events: int = 0, nbytes: int = 0) -> None:
        """Write ``tables`` (a chunk of ``events`` events, ``nbytes`` of buffers), or hold
        it while the part stays within :data:`HOLD_EVENTS` and :data:`HOLD_BYTES`."""
        if not tables:
            return
        if self.held is not None:
            if (self._held_events + events <= HOLD_EVENTS
                    and self.held_bytes + nbytes <= HOLD_BYTES):
                self.held.append(tables)
                self._held_events += events
                self.held_bytes += nbytes
                return
            held, self.held = self.held, None  # too large: every chunk to files
            for chunk in held:
                self._submit(chunk)
        self._submit(tables)

    def _submit(self, tables: dict[str, Any]) -> None:
        self.wait()
        seq, self._seq = self._seq, self._seq + 1
        self._pending = self._pool.submit(self._write, tables, seq)

    def _write(self, tables: dict[str, Any], seq: int) -> None:
        if self._con is None:
            self._con = _writer_connection() if self._kept is None else self._kept.take()
        _write_tables(self._con, self._folder, tables, seq)

    def wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def close(self) -> None:
        try:
            self.wait()
        except BaseException:
            self._failed = True
            raise
        finally:
            self._shutdown()

    def abort(self) -> None:
        self._failed = True
        with contextlib.suppress(Exception):  # the part failed already; folder discarded
            self.wait()
        self._shutdown()

    def _shutdown(self) -> None:
        self._pool.shutdown()
        if self._con is not None:
            con, self._con = self._con, None
            if self._kept is not None and not self._failed and self.small:
                self._kept.give(con)  # a small part: for the next one
            else:
                con.close()


def stage_events(
    module: ModuleType,
    events: Iterator[Any],
    folder: Path,
    slow_path: Callable[[list[tuple[int, Any]]], object],
    *,
    skip_python: bool,
    chunk_events: int,
    kept: KeptWriter | None = None,
) -> tuple[int, int]:
    """Stage ``events`` into ``folder``; the unusual ones go to ``slow_path`` with their index.

    Returns (events taken, ``python_function`` events skipped here).
    """
    shredder = module.Shredder(
        Decimal, frozenset(GPU_OP_CATEGORIES), PYTHON_CATEGORY, skip_python
    )
    writer = _Writer(folder, kept)
    slow: list[tuple[int, Any]] = []
    try:
        while True:
            taken = shredder.shred(events, _BATCH, slow)
            if slow:
                slow_path(slow)
                slow = []
            if shredder.pending >= chunk_events or shredder.pending_bytes >= CHUNK_BYTES:
                writer.submit(shredder.take_arrow())
            if taken < _BATCH:
                break
        writer.submit(shredder.take_arrow())
        writer.small = shredder.index <= KEEP_EVENTS
        writer.close()
    except BaseException:
        writer.abort()
        raise
    return int(shredder.index), int(shredder.skipped_python)


def _take(shredder: Any) -> tuple[dict[str, Any], int, int]:
    """The shredder's staged chunk, its events and its bytes."""
    events, nbytes = int(shredder.pending), int(shredder.pending_bytes)
    return shredder.take_arrow(), events, nbytes


def scanner(module: ModuleType | None) -> bool:
    """Whether ``module`` (the extension) has the direct scanner."""
    return module is not None and hasattr(module.Shredder, "scan")


def _parse_elements(backend: Any, raws: list[tuple[int, bytes]]) -> list[tuple[int, Any]]:
    """The elements' bytes as ijson builds them (one parse for the batch)."""
    data = b"[" + b",".join(raw for _, raw in raws) + b"]"
    try:
        items = list(backend.items(io.BytesIO(data), "item", use_float=False))
    except Exception as exc:  # any parse problem: the ijson path reports it in context
        raise Fallback(f"element not parsed by ijson: {type(exc).__name__}") from exc
    if len(items) != len(raws):
        raise Fallback("element count differs")
    return [(index, item) for (index, _), item in zip(raws, items, strict=True)]


def scan_events(
    module: ModuleType,
    backend: Any,
    read: Callable[[], bytes],
    folder: Path,
    slow_path: Callable[[list[tuple[int, Any]]], object],
    *,
    skip_python: bool,
    chunk_events: int,
    first_event: Callable[[], None] | None = None,
    kept: KeptWriter | None = None,
    held: Held | None = None,
) -> tuple[int, int, bool, int | None]:
    """Scan the document ``read()`` returns into ``folder``; the unusual elements go
    (parsed by ijson) to ``slow_path`` with their index.

    Returns (elements of traceEvents, ``python_function`` events skipped here,
    whether the document is a bare array, the offset in the bytes ``read()`` returned
    of the ``]`` closing ``traceEvents`` or None). Raises :class:`Fallback` when the document
    is to be staged again through ijson (``folder`` then holds partial output).
    ``first_event`` is called once, after the first call that saw an element.
    ``kept``: the writer's connection kept between parts (:class:`KeptWriter`).
    ``held``: receives the part's chunks (and their bytes) in place of files when it stays within
    :data:`HOLD_EVENTS` and :data:`HOLD_BYTES` (left empty otherwise: files were written).
    """
    shredder = module.Shredder(
        Decimal, frozenset(GPU_OP_CATEGORIES), PYTHON_CATEGORY, skip_python
    )
    writer = _Writer(folder, kept, hold=held is not None)
    raws: list[tuple[int, bytes]] = []
    try:
        while True:
            status = shredder.scan(read, _BATCH, raws)
            if first_event is not None and shredder.index:
                first_event()
                first_event = None
            if status == _GIVE_UP:
                raise Fallback("the scanner gave up on the document")
            if raws:
                slow_path(_parse_elements(backend, raws))
                raws = []
            if shredder.pending >= chunk_events or shredder.pending_bytes >= CHUNK_BYTES:
                writer.submit(*_take(shredder))
            if status == _DONE:
                break
        writer.submit(*_take(shredder))
        writer.small = shredder.index <= KEEP_EVENTS
        writer.close()
        if held is not None and writer.held is not None:
            held.extend(writer.held)
            held.nbytes = writer.held_bytes
    except BaseException:
        writer.abort()
        raise
    end = getattr(shredder, "events_end", None)  # None from an extension built before it
    return (int(shredder.index), int(shredder.skipped_python), bool(shredder.is_array),
            None if end is None else int(end))
