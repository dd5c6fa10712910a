"""Write a child table's rows with DuckDB and commit them to Delta in one transaction.

``write_deltalake`` buffers far more than a row group when fed a stream (about
250 MB for a 250 MB trace's ``events``), so child tables are written by
DuckDB's Parquet writer instead (streaming, bounded by DuckDB's memory limit,
zstd, row groups of at most 128k rows sized by width) straight into the table's partition folder, then
added to the Delta log in one commit (:meth:`tracewh.storage.store.Store.add_files`:
:mod:`tracewh.storage.deltalog` on a local disk, delta-rs on an object store). On an object store
DuckDB writes into the ingest's local staging folder and the file is uploaded
(fsspec) to the same relative path before the commit. A crash between the
write and the commit leaves an unreferenced file, invisible to readers and
removed by vacuum.

A table whose rows come from a wide join (``gpu_ops``) is written in slices of
``event_index`` instead: each slice's query is written by DuckDB to a scratch
file in the ingest's staging folder, and the slices' files are then copied in
order into the table's one file for the run, so the join's memory is bounded by
the slice while the run still gets one file per table. No ingest step imports
pyarrow on a local warehouse.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tracewh.core.sqlfiles import glob_escaped, sql_string
from tracewh.schema.plain import tables
from tracewh.storage.deltalog import Add
from tracewh.storage.store import Store

if TYPE_CHECKING:
    from tracewh.ingest.options import FileResult

# values per row group (rows x columns): DuckDB's writer holds a row group per thread
# (at 1.5M, a 1 GB trace's instants peaked ~50 MB higher and events were written slower)
_ROW_GROUP_CELLS = 500_000


class FileSink(Protocol):
    """Where a written file's ``add`` goes: committed now (:class:`tracewh.ingest.direct.DirectCommit`)
    or held for a batch's commit (:class:`tracewh.ingest.batchcommit.CommitBatch`: it commits
    the adds of many ingests at once)."""

    def add_file(self, ingest_id: str, table: str, action: Add) -> None:
        """Commit (or hold for the batch's commit) ``action``: a written file of ``table`` for ``ingest_id``."""
        ...


class Committer(FileSink, Protocol):
    """How one file's writes become visible: the commit strategy, chosen once per task.

    :class:`~tracewh.ingest.direct.DirectCommit` (each file alone: its locks for the length
    of its ingest, its child files and its ``runs`` row committed as written, its log row
    at once) or :class:`~tracewh.ingest.batchcommit.CommitBatch` (many files: locks held
    and commits deferred until the batch's flush, one commit per table). Either way the
    ``runs`` row is committed after every child file of its run.
    """

    @property
    def run_ids(self) -> set[str]:
        """Runs written but not committed yet (a batch's): the same bytes twice are skipped."""
        ...

    def begin_file(self) -> None:
        """A new file's ingest starts: the locks it takes from now on are its own."""
        ...

    def held(self, key: str, *, shared: bool = False) -> contextlib.AbstractContextManager[None]:
        """Lock ``key`` for the block, or (a batch) until its flush."""
        ...

    def add_run(self, ingest_id: str, row: dict[str, Any], *, replace: bool,
                check: Callable[[], None] | None = None) -> None:
        """``ingest_id``'s ``runs`` row, committed after its child files (what makes it visible)."""
        ...

    def drop(self, ingest_id: str) -> None:
        """A failed ingest: what it wrote goes (uncommitted files, or its committed child rows)."""
        ...

    def finish(self, result: FileResult, *, ingest_id: str | None, sha: str | None,
               started: datetime) -> FileResult:
        """Log ``result`` (its ``ingest_log`` row now, or at the batch's flush); ``result``."""
        ...


#: How the run tables' Parquet files are compressed: zstd at level 1 (DuckDB's default is 3).
#: On the 120-trace nightly folder level 1 wrote 4% fewer bytes (20.1 vs 20.9 MB) and its
#: output ``COPY`` statements took ~13% less CPU (docs/performance.md, ninth pass).
OUTPUT_COMPRESSION = "COMPRESSION zstd, COMPRESSION_LEVEL 1"


def _select_list(table: str) -> str:
    return tables()[table].select_list()


def _write_slices(
    con: Any,
    table: str,
    query: str,
    params: dict[str, Any],
    slices: Sequence[tuple[int, int]],
    out: Path,
    row_group: int,
    on_slice: Callable[[int, int], None] | None,
    scratch: Path,
) -> int:
    """Write the rows of each slice of ``query`` into one Parquet file; their count.

    DuckDB writes each slice's rows to a file of its own in ``scratch`` (the join's
    memory bounded by the slice), then copies those files, in slice order, into
    ``out``: a streaming read and write, one row group at a time. No pyarrow (its
    import and pools were most of a 1 GB trace's peak RSS at this step).
    """
    scratch.mkdir(parents=True, exist_ok=True)
    sql = f"SELECT {_select_list(table)} FROM ({query})"
    files: list[str] = []
    n = 0
    for k, (lo, hi) in enumerate(slices):
        if on_slice is not None:
            on_slice(lo, hi)
        part = scratch / f"slice-{k:05d}.parquet"
        got = con.execute(
            f"COPY ({sql}) TO $tw_out (FORMAT parquet, COMPRESSION lz4_raw, "
            f"ROW_GROUP_SIZE {row_group})",
            {**params, "slice_lo": lo, "slice_hi": hi, "tw_out": str(part)},
        ).fetchall()
        if int(got[0][0]):
            files.append(str(part))
            n += int(got[0][0])
    if not files:
        return 0
    listed = ", ".join(sql_string(glob_escaped(f)) for f in files)
    con.execute("SET preserve_insertion_order = true")  # the slices' rows in slice order
    try:
        con.execute(
            f"COPY (SELECT * FROM read_parquet([{listed}], hive_partitioning = false)) "
            f"TO $tw_out (FORMAT parquet, {OUTPUT_COMPRESSION}, ROW_GROUP_SIZE {row_group})",
            {"tw_out": str(out)},
        )
    finally:
        con.execute("SET preserve_insertion_order = false")
        for f in files:
            Path(f).unlink(missing_ok=True)
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
    sink: FileSink,
) -> int:
    """Append the rows of ``query`` (all in partition ``day``) to ``table``; their count.

    With ``slices``, ``query`` takes ``$slice_lo``/``$slice_hi`` and is run once
    per (lo, hi), its rows written in that order into the same file;
    ``on_slice(lo, hi)`` runs before each slice's query. The written file's ``add`` goes
    to ``sink``: committed at once (:class:`~tracewh.ingest.direct.DirectCommit`), or at
    the batch's flush (:class:`~tracewh.ingest.batchcommit.CommitBatch`: one commit per
    table for the batch's ingests).
    """
    spec = tables()[table]
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
    row_group = max(16_384, min(131_072, _ROW_GROUP_CELLS // len(spec.columns)))
    try:
        if slices is None or len(slices) == 1:
            # one slice (a small trace): DuckDB writes it, as every other table
            if slices is not None:
                if on_slice is not None:
                    on_slice(*slices[0])
                params = {**params, "slice_lo": slices[0][0], "slice_hi": slices[0][1]}
            sql = (
                f"COPY (SELECT {_select_list(table)} FROM ({query})) TO $tw_out "
                f"(FORMAT parquet, {OUTPUT_COMPRESSION}, ROW_GROUP_SIZE {row_group})"
            )
            n = int(con.execute(sql, {**params, "tw_out": str(out)}).fetchall()[0][0])
        else:
            scratch = store.staging_root / ingest_id / "slices" / table
            n = _write_slices(
                con, table, query, params, slices, out, row_group, on_slice, scratch
            )
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
    sink.add_file(ingest_id, table, _add(rel, size, day, run_id, ingest_id, n))
    return n


def _add(rel: str, size: int, day: date, run_id: str, ingest_id: str, n: int) -> Add:
    """The Delta ``add`` of a written file of one run's ``n`` rows."""
    ids = {"run_id": run_id, "ingest_id": ingest_id}
    stats = {"numRecords": n, "minValues": ids, "maxValues": ids,
             "nullCount": dict.fromkeys(ids, 0)}
    return Add(
        path=rel,
        size=size,
        partition_values={"day": day.isoformat()},
        modification_time=int(time.time() * 1000),
        stats=json.dumps(stats),
    )


def copy_runs(
    store: Store,
    con: Any,
    table: str,
    query: str,
    params: dict[str, Any],
    runs: Mapping[str, tuple[date, str]],
    work: Path,
    sink: FileSink,
    *,
    alone: Collection[str] = (),
) -> dict[str, int]:
    """Write the rows of ``query`` for several runs at once: one file per run; rows per ingest.

    ``runs`` maps each ``ingest_id`` the rows may carry to its (day, run_id). DuckDB
    writes one file per ``ingest_id`` (a partitioned ``COPY`` into ``work``, local to the
    warehouse), each moved into the table's folder of its run's day, its commit left to
    ``sink`` as :func:`copy_and_commit`'s is: the same files as one run at a time.

    A partitioned ``COPY`` sorts every row by its partition and makes a folder per run: the
    runs of ``alone`` (big ones), and a single run, are each written by a plain ``COPY`` of
    their own rows (``WHERE ingest_id = ...``), straight into the table's folder.
    """
    spec = tables()[table]
    row_group = max(16_384, min(131_072, _ROW_GROUP_CELLS // len(spec.columns)))
    options = f"FORMAT parquet, {OUTPUT_COMPRESSION}, ROW_GROUP_SIZE {row_group}"
    counts = dict.fromkeys(runs, 0)
    root = Path(store.table_uri(table))
    own = list(runs) if len(runs) == 1 else [i for i in runs if i in alone]
    for ingest_id in own:
        day, run_id = runs[ingest_id]
        rel = f"day={day.isoformat()}/part-{uuid.uuid4().hex}-c000.zstd.parquet"
        out = root / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        where = "" if len(runs) == 1 else " WHERE ingest_id = $tw_run"
        sql = f"COPY (SELECT {_select_list(table)} FROM ({query}){where}) TO $tw_out ({options})"
        run_params = {} if len(runs) == 1 else {"tw_run": ingest_id}
        try:
            n = int(con.execute(sql, {**params, **run_params, "tw_out": str(out)}).fetchall()[0][0])
        except BaseException:  # no partial file left in the table's folder
            out.unlink(missing_ok=True)
            raise
        if n == 0:
            out.unlink(missing_ok=True)
            continue
        sink.add_file(ingest_id, table, _add(rel, out.stat().st_size, day, run_id, ingest_id, n))
        counts[ingest_id] = n
    if len(own) == len(runs):
        return counts
    rest, rest_params = ("", {}) if not own else (
        " WHERE NOT list_contains($tw_own, ingest_id)", {"tw_own": own})
    # files side by side in one folder (HIVE_FILE_PATTERN false: no folder per run to make
    # and remove, each an inode), each one's run from its partition_keys
    sql = (
        f"COPY (SELECT {_select_list(table)} FROM ({query}){rest}) TO $tw_out "
        f"({options}, PARTITION_BY (ingest_id), WRITE_PARTITION_COLUMNS true, "
        "HIVE_FILE_PATTERN false, FILENAME_PATTERN 'part-{uuid}', RETURN_STATS true)"
    )
    out = work / table
    cursor = con.execute(sql, {**params, **rest_params, "tw_out": str(out)})
    names = [d[0] for d in cursor.description]
    got = cursor.fetchall()
    at_file, at_n, at_size, at_keys = (names.index(k) for k in (
        "filename", "count", "file_size_bytes", "partition_keys"))
    for row in got:
        filename, n, size = row[at_file], row[at_n], row[at_size]
        ingest_id = row[at_keys]["ingest_id"]
        day, run_id = runs[ingest_id]
        if not n:
            continue
        rel = f"day={day.isoformat()}/part-{uuid.uuid4().hex}-c000.zstd.parquet"
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        Path(filename).rename(root / rel)
        sink.add_file(ingest_id, table, _add(rel, int(size), day, run_id, ingest_id, int(n)))
        counts[ingest_id] += int(n)
    return counts


def commit_adds(store: Store, table: str, actions: Sequence[Add]) -> None:
    """Add ``actions``' files to ``table`` in one Delta commit (:meth:`Store.add_files`)."""
    store.add_files(table, actions)


def remove_uncommitted(store: Store, table: str, rels: Sequence[str]) -> None:
    """Best-effort removal of written files no commit references (they would wait for a vacuum)."""
    for rel in rels:
        with contextlib.suppress(Exception):
            if store.remote:
                store.filesystem().rm_file(f"{store.table_uri(table)}/{rel}")
            else:
                (Path(store.table_uri(table)) / rel).unlink(missing_ok=True)
