"""The compiled staging path: ordinary events straight into Parquet, no JSON round trip.

:mod:`tracewh.ingest._fastshred` (C, built by ``setup.py`` when a compiler is
there) takes the events ijson yields and appends the ordinary ones (``ph``
X, s/t/f, i/I with the expected field types) to Arrow column buffers of the
staging tables ``ev``, ``py``, ``gpu``, ``flow`` and ``inst``; this module
writes those buffers as Parquet files beside the ones the pure path writes
(``<part>/<table>/fast-<n>.parquet``), one chunk in flight in a background
thread (pyarrow writes without the GIL). Every other event comes back with its
index and goes through the pure path (:func:`tracewh.ingest.rows.prepare_events`,
orjson, DuckDB), which types, counts and reports the unusual. Both paths
stage the same rows; ``tests/test_ingest_fast.py`` compares them.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tracewh.schema import GPU_OP_CATEGORIES, PYTHON_CATEGORY

#: Arrow types of the extension's column kinds (0 int64, 1 float64, 2 string).
_KINDS: dict[int, pa.DataType] = {0: pa.int64(), 1: pa.float64(), 2: pa.large_string()}
#: Events taken from the parser per call (the handed-back ones are fixed up in between).
_BATCH = 8192


def native() -> ModuleType | None:
    """The compiled extension, or None where it was not built (pure-Python staging)."""
    try:
        return importlib.import_module("tracewh.ingest._fastshred")
    except ImportError:
        return None


def release_memory() -> None:
    """Give freed memory back to the system: Arrow's pool and (glibc) the C heap.

    Staging frees its buffers, but the allocators keep the pages; the linkage that
    follows would add its DuckDB budget on top of them.
    """
    pa.default_memory_pool().release_unused()
    module = native()
    if module is not None:
        module.trim()


def _table(columns: list[tuple[str, int, int, int, bytes, bytes, bytes | None]]) -> pa.Table:
    arrays, names = [], []
    for name, kind, n, nulls, valid, data, offsets in columns:
        bufs = [pa.py_buffer(valid) if nulls else None]
        if offsets is not None:
            bufs.append(pa.py_buffer(offsets))
        bufs.append(pa.py_buffer(data))
        arrays.append(pa.Array.from_buffers(_KINDS[kind], n, bufs, null_count=nulls))
        names.append(name)
    return pa.Table.from_arrays(arrays, names=names)


class _Writer:
    """Column buffers -> ``<folder>/<table>/fast-<n>.parquet``, one chunk in flight."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="tracewh-fast")
        self._pending: Future[None] | None = None
        self._seq = 0

    def submit(self, tables: dict[str, Any]) -> None:
        if not tables:
            return
        self.wait()
        seq, self._seq = self._seq, self._seq + 1
        self._pending = self._pool.submit(self._write, tables, seq)

    def _write(self, tables: dict[str, Any], seq: int) -> None:
        for name, columns in tables.items():
            out = self._folder / name / f"fast-{seq:06d}.parquet"
            pq.write_table(_table(columns), out, compression="lz4", store_schema=False)

    def wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def close(self) -> None:
        try:
            self.wait()
        finally:
            self._pool.shutdown()

    def abort(self) -> None:
        with contextlib.suppress(Exception):  # the part failed already; folder discarded
            self.wait()
        self._pool.shutdown()


def stage_events(
    module: ModuleType,
    events: Iterator[Any],
    folder: Path,
    slow_path: Callable[[list[tuple[int, Any]]], object],
    *,
    skip_python: bool,
    chunk_events: int,
) -> tuple[int, int]:
    """Stage ``events`` into ``folder``; the unusual ones go to ``slow_path`` with their index.

    Returns (events taken, ``python_function`` events skipped here).
    """
    shredder = module.Shredder(
        Decimal, frozenset(GPU_OP_CATEGORIES), PYTHON_CATEGORY, skip_python
    )
    writer = _Writer(folder)
    slow: list[tuple[int, Any]] = []
    try:
        while True:
            taken = shredder.shred(events, _BATCH, slow)
            if slow:
                slow_path(slow)
                slow = []
            if shredder.pending >= chunk_events:
                writer.submit(shredder.take())
            if taken < _BATCH:
                break
        writer.submit(shredder.take())
        writer.close()
    except BaseException:
        writer.abort()
        raise
    return int(shredder.index), int(shredder.skipped_python)
