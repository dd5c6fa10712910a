"""Write a child table's rows with DuckDB and commit them to Delta in one transaction.

``write_deltalake`` buffers far more than a row group when fed a stream (about
250 MB for a 250 MB trace's ``events``), so child tables are written by
DuckDB's Parquet writer instead (streaming, bounded by DuckDB's memory limit,
zstd, row groups of at most 128k rows sized by width) straight into the table's partition folder, then
added to the Delta log with one ``create_write_transaction``. On an object store
DuckDB writes into the ingest's local staging folder and the file is uploaded
(fsspec) to the same relative path before the commit. A crash between the
write and the commit leaves an unreferenced file, invisible to readers and
removed by vacuum.

A table whose rows come from a wide join (``gpu_ops``) is written in slices of
``event_index`` instead: each slice's query streams Arrow batches into one
``pyarrow`` Parquet writer, so the join's memory is bounded by the slice while
the run still gets one file per table.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import AddAction

from tracewh.schema import TABLES
from tracewh.store import Store

if TYPE_CHECKING:
    from tracewh.ingest.batchcommit import CommitBatch

_RETRIES = 20
# values per row group (rows x columns): DuckDB's writer holds a row group per thread
# (at 1.5M, a 1 GB trace's instants peaked ~50 MB higher and events were written slower)
_ROW_GROUP_CELLS = 500_000
_SQL_TYPES = {pa.int64(): "BIGINT", pa.string(): "VARCHAR", pa.float64(): "DOUBLE",
              pa.int32(): "INTEGER", pa.bool_(): "BOOLEAN", pa.list_(pa.int64()): "BIGINT[]"}


def _select_list(table: str) -> str:
    spec = TABLES[table]
    cols = []
    for f in spec.schema:
        if f.name in spec.partition_by:
            continue
        sql_type = _SQL_TYPES.get(f.type)
        if sql_type is None:
            raise TypeError(f"{table}.{f.name}: no DuckDB type for {f.type}")
        ident = '"' + f.name.replace('"', '""') + '"'
        cols.append(f"CAST({ident} AS {sql_type}) AS {ident}")
    return ", ".join(cols)


def _write_slices(
    con: Any,
    table: str,
    query: str,
    params: dict[str, Any],
    slices: Sequence[tuple[int, int]],
    out: Path,
    row_group: int,
    on_slice: Callable[[int, int], None] | None,
) -> int:
    """Write the rows of each slice of ``query`` into one Parquet file; their count.

    A batch is encoded and compressed (pyarrow, without the GIL) in a background
    thread while DuckDB computes the next: one batch in flight.
    """
    spec = TABLES[table]
    schema = pa.schema([f for f in spec.schema if f.name not in spec.partition_by])
    sql = f"SELECT {_select_list(table)} FROM ({query})"
    n = 0
    pending: Future[None] | None = None
    with (
        pq.ParquetWriter(out, schema, compression="zstd") as writer,
        ThreadPoolExecutor(1, thread_name_prefix="tracewh-write") as pool,
    ):
        for lo, hi in slices:
            if on_slice is not None:
                on_slice(lo, hi)
            reader = con.sql(sql, params={**params, "slice_lo": lo, "slice_hi": hi})
            for batch in reader.to_arrow_reader(row_group):
                if batch.num_rows:
                    typed = batch.cast(schema)
                    if pending is not None:
                        pending.result()
                    pending = pool.submit(writer.write_batch, typed, row_group_size=row_group)
                    n += batch.num_rows
        if pending is not None:
            pending.result()
    return n


def copy_and_commit(
    store: Store,
    con: Any,
    table: str,
    query: str,
    params: dict[str, Any],
    *,
    day: date,
    run_id: str,
    ingest_id: str,
    slices: Sequence[tuple[int, int]] | None = None,
    on_slice: Callable[[int, int], None] | None = None,
    batch: CommitBatch | None = None,
) -> int:
    """Append the rows of ``query`` (all in partition ``day``) to ``table``; their count.

    With ``slices``, ``query`` takes ``$slice_lo``/``$slice_hi`` and is run once
    per (lo, hi), its rows written in that order into the same file;
    ``on_slice(lo, hi)`` runs before each slice's query. With ``batch``, the file
    is written but its commit is left to :meth:`CommitBatch.flush` (one commit per
    table for the batch's ingests).
    """
    spec = TABLES[table]
    part = f"day={day.isoformat()}"
    name = f"part-{uuid.uuid4().hex}-c000.zstd.parquet"
    rel = f"{part}/{name}"
    # an object store: write in the ingest's local staging folder, then upload
    out = (
        store.staging_root / ingest_id / "out" / table / name
        if store.remote
        else Path(store.table_uri(table)) / part / name
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    # DuckDB's Parquet writer buffers a row group per thread: size them by width
    row_group = max(16_384, min(131_072, _ROW_GROUP_CELLS // len(spec.schema)))
    try:
        if slices is None:
            sql = (
                f"COPY (SELECT {_select_list(table)} FROM ({query})) TO $tw_out "
                f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE {row_group})"
            )
            n = int(con.execute(sql, {**params, "tw_out": str(out)}).fetchall()[0][0])
        else:
            n = _write_slices(con, table, query, params, slices, out, row_group, on_slice)
    except BaseException:  # no partial file left in the table's folder
        out.unlink(missing_ok=True)
        raise
    if n == 0:
        out.unlink(missing_ok=True)
        return 0
    size = out.stat().st_size
    if store.remote:  # a partial file left by a failure goes with the staging folder
        try:
            store.filesystem().put_file(str(out), f"{store.table_uri(table)}/{rel}")
        finally:
            out.unlink(missing_ok=True)
    ids = {"run_id": run_id, "ingest_id": ingest_id}
    stats = {"numRecords": n, "minValues": ids, "maxValues": ids,
             "nullCount": dict.fromkeys(ids, 0)}
    action = AddAction(
        path=rel,
        size=size,
        partition_values={"day": day.isoformat()},
        modification_time=int(time.time() * 1000),
        data_change=True,
        stats=json.dumps(stats),
    )
    if batch is not None:
        batch.add_file(ingest_id, table, action)
        return n
    try:
        commit_adds(store, table, [action])
    except BaseException:  # not committed: the file would only wait for a vacuum
        remove_uncommitted(store, table, [rel])
        raise
    return n


def commit_adds(store: Store, table: str, actions: Sequence[AddAction]) -> None:
    """Add ``actions``' files to ``table`` in one Delta commit (retried on conflicts)."""
    spec = TABLES[table]
    for attempt in range(_RETRIES):
        try:
            store.table(table).create_write_transaction(
                list(actions), mode="append", schema=spec.schema,
                partition_by=list(spec.partition_by) or None,
            )
            return
        except CommitFailedError:
            if attempt == _RETRIES - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


def remove_uncommitted(store: Store, table: str, rels: Sequence[str]) -> None:
    """Best-effort removal of written files no commit references (they would wait for a vacuum)."""
    for rel in rels:
        with contextlib.suppress(Exception):
            if store.remote:
                store.filesystem().rm_file(f"{store.table_uri(table)}/{rel}")
            else:
                (Path(store.table_uri(table)) / rel).unlink(missing_ok=True)
