"""Merge a table's small files, safely beside concurrent ingests and compactions.

delta-rs's ``optimize.compact`` commits its removes with ``dataChange=false``,
and the delta-rs conflict checker lets two concurrent ``dataChange=false``
removes of the same file both commit (delta-io/delta-rs#3982): two processes
compacting the same files each added a merged copy, and every row of those
files was then listed twice (issue 18: 99 ``runs`` rows for 50 runs after four
concurrent ingest batches each compacted ``runs``). Compaction here writes the
merged files itself and commits them with ``create_write_transaction``: one
``RemoveAction(data_change=True)`` per merged file plus the new ``AddAction``\\ s,
in one commit on the snapshot the files were chosen from. Removes that change
data are checked: of two rewrites of the same file (a compaction, a delete of
orphan rows, a ``--force`` replace) only the first commits, the other gets
``CommitFailedError`` and its merged files are deleted unreferenced. A
concurrent append removes nothing and never conflicts. This holds on an object
store too (no lock is involved in correctness); a local lock ``rewrite-<table>``
only keeps two processes of one machine from doing the same work twice.

Visibility: the merged file holds exactly the rows of the files it replaces
(child rows keep their ``ingest_id``), so a reader sees the same rows before
and after; ``runs`` stays committed after its child rows.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import AddAction, RemoveAction

from tracewh.core.errors import WarehouseError
from tracewh.schema.arrow import TABLES
from tracewh.storage.confined import TableBounds
from tracewh.storage.store import Store

#: Files at least this large are left alone; smaller ones are merged into files of about it.
TARGET_BYTES = 128 << 20
#: Values (rows x columns) per row group of a merged file, as the ingest writer sizes them.
_ROW_GROUP_CELLS = 500_000


@dataclass(frozen=True)
class _File:
    path: str  # relative to the table root, as in the log
    size: int
    day: str | None


@dataclass(frozen=True)
class CompactResult:
    """What one table's compaction did."""

    files_before: int
    files_after: int
    merged: int  # files replaced by merged ones
    committed: bool  # False: nothing to do, or a concurrent rewrite won (nothing changed)


def _live_files(store: Store, name: str, snapshot: Any) -> list[_File]:
    actions = pa.table(snapshot.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return []
    days = (
        actions.column("partition.day").to_pylist()
        if "partition.day" in actions.column_names else [None] * actions.num_rows
    )
    return [
        _File(str(p), int(s), None if d is None else str(d))
        for p, s, d in zip(
            actions.column("path").to_pylist(), actions.column("size_bytes").to_pylist(),
            days, strict=True,
        )
    ]


def _bins(files: list[_File], target: int) -> list[list[_File]]:
    """Groups of two or more small files of one partition, each about ``target`` bytes."""
    by_day: dict[str | None, list[_File]] = defaultdict(list)
    for f in files:
        if f.size < target:
            by_day[f.day].append(f)
    out: list[list[_File]] = []
    for day in sorted(by_day, key=lambda d: d or ""):
        current: list[_File] = []
        total = 0
        for f in sorted(by_day[day], key=lambda f: f.path):
            if current and total + f.size > target:
                out.append(current)
                current, total = [], 0
            current.append(f)
            total += f.size
        out.append(current)
    return [b for b in out if len(b) >= 2]


def _batches(store: Store, name: str, files: list[_File]) -> Iterator[pa.RecordBatch]:
    root = store.table_uri(name)
    for f in files:
        uri = f"{root}/{f.path}"
        with contextlib.ExitStack() as stack:
            source: Any = stack.enter_context(store.filesystem().open(uri, "rb")) if store.remote else uri
            yield from pq.ParquetFile(source).iter_batches(batch_size=1 << 16)


def _merge(store: Store, name: str, files: list[_File], staging: Path) -> AddAction:
    """Write the rows of ``files`` into one new file of the table; its add action."""
    spec = TABLES[name]
    schema = pa.schema([f for f in spec.schema if f.name not in spec.partition_by])
    day = files[0].day
    rel = (f"day={day}/" if day is not None else "") + f"part-{uuid.uuid4().hex}-c000.zstd.parquet"
    out = staging / rel if store.remote else Path(store.table_uri(name)) / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    row_group = max(16_384, min(131_072, _ROW_GROUP_CELLS // len(spec.schema)))
    n = 0
    keys = [k for k in ("run_id", "ingest_id") if k in schema.names]
    lo: dict[str, Any] = {}
    hi: dict[str, Any] = {}
    # small files' rows are gathered into full row groups: a row group per input file
    # would carry every column's chunk metadata and dictionary once per file (five one-row
    # runs files merged that way were larger than the five files)
    pending: list[pa.Table] = []
    pending_rows = 0

    def flush(writer: pq.ParquetWriter) -> None:
        nonlocal pending, pending_rows
        if pending:
            writer.write_table(pa.concat_tables(pending), row_group_size=row_group)
        pending, pending_rows = [], 0

    try:
        with pq.ParquetWriter(out, schema, compression="zstd", compression_level=3) as writer:
            for batch in _batches(store, name, files):
                if not batch.num_rows:
                    continue
                table = pa.Table.from_batches([batch])
                for field in schema:  # a file written before the column was added: NULL
                    if field.name not in table.column_names:
                        table = table.append_column(field, pa.nulls(table.num_rows, field.type))
                typed = table.select(schema.names).cast(schema)
                pending.append(typed)
                pending_rows += typed.num_rows
                if pending_rows >= row_group:
                    flush(writer)
                n += typed.num_rows
                for k in keys:
                    mm = pc.min_max(typed.column(k)).as_py()
                    lo[k] = mm["min"] if k not in lo else min(lo[k], mm["min"])
                    hi[k] = mm["max"] if k not in hi else max(hi[k], mm["max"])
            flush(writer)
        size = out.stat().st_size
        if store.remote:
            store.filesystem().put_file(str(out), f"{store.table_uri(name)}/{rel}")
            out.unlink()
    except BaseException:
        out.unlink(missing_ok=True)
        raise
    stats = {"numRecords": n, "minValues": lo, "maxValues": hi, "nullCount": dict.fromkeys(keys, 0)}
    return AddAction(
        path=rel, size=size,
        partition_values={"day": day} if spec.partition_by else {},
        modification_time=int(time.time() * 1000), data_change=True, stats=json.dumps(stats),
    )


def _discard(store: Store, name: str, adds: list[AddAction]) -> None:
    """Delete merged files that were never committed (best effort; vacuum would later)."""
    for add in adds:
        with contextlib.suppress(Exception):
            uri = f"{store.table_uri(name)}/{add.path}"
            if store.remote:
                store.filesystem().rm_file(uri)
            else:
                Path(uri).unlink(missing_ok=True)


def compact_table(
    store: Store, name: str, *, max_files: int = 1, target_bytes: int = TARGET_BYTES,
    blocking: bool = True,
) -> CompactResult:
    """Merge the small files of ``name`` when it has more than ``max_files`` files.

    Commits one transaction on the snapshot it read (see the module docstring);
    when a concurrent rewrite of the same files commits first, nothing changes
    and ``committed`` is False. With ``blocking=False`` it returns at once when
    another process of this machine is compacting the table.
    """
    with (
        store.lock("writers", shared=True),
        store.lock(f"rewrite-{name}", blocking=blocking) as held,
    ):
        snapshot = store.table(name)
        files = _live_files(store, name, snapshot)
        bounds = TableBounds(store.table_uri(name), remote=store.remote)
        for f in files:  # never merge (read) a file the log names outside the table
            why = bounds.problem(f"{store.table_uri(name)}/{f.path}")
            if why is not None:
                raise WarehouseError(
                    store.root, f"table {name}: its log names a data file that {why}: {f.path} "
                    "(nothing was compacted; run `tracewh verify`)")
        if not held or len(files) <= max_files:
            return CompactResult(len(files), len(files), 0, False)
        bins = _bins(files, target_bytes)
        if not bins:
            return CompactResult(len(files), len(files), 0, False)
        spec = TABLES[name]
        # an object store: merged files are written in a private local folder, then uploaded
        staging = Path(tempfile.mkdtemp(prefix="tracewh-compact-")) if store.remote else Path()
        adds: list[AddAction] = []
        try:
            for group in bins:
                adds.append(_merge(store, name, group, staging))
            now = int(time.time() * 1000)
            removes = [
                RemoveAction(
                    f.path, True, now, size=f.size,
                    partition_values={"day": f.day} if spec.partition_by else None,
                )
                for group in bins for f in group
            ]
            snapshot.create_write_transaction(
                [*removes, *adds], mode="append", schema=spec.schema,
                partition_by=list(spec.partition_by) or None,
            )
        except CommitFailedError:
            _discard(store, name, adds)
            return CompactResult(len(files), len(files), 0, False)
        except BaseException:
            _discard(store, name, adds)
            raise
        finally:
            if store.remote:
                shutil.rmtree(staging, ignore_errors=True)
        merged = sum(len(b) for b in bins)
        return CompactResult(len(files), len(files) - merged + len(adds), merged, True)
