"""Writing tables: appends, Delta ``add`` commits, the ``runs`` row, deletes (:class:`Writes`, a part of :class:`~tracewh.storage.store.Store`).

Visibility: child tables first, the ``runs`` row last (see :mod:`tracewh.storage.store`); every
commit is retried on a concurrent-commit conflict, and on object stores a ``runs`` row is inserted
only when no concurrent commit wrote the same ``run_id`` (:class:`DuplicateRunError`).
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracewh.core.errors import (
    WarehouseError,
)
from tracewh.storage import deltalog

# deltalake and pyarrow are imported where they are used (a query command needs neither)
if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable, WriterProperties


ReaderFactory = Callable[[], "pa.RecordBatchReader | pa.Table"]

COMMIT_RETRIES = 20
_RUN_ID = re.compile(r"^[0-9a-f]{1,64}$")


def write_deltalake(*args: Any, **kwargs: Any) -> None:
    """delta-rs's ``write_deltalake``, imported on first use (a module name tests can patch)."""
    from deltalake import write_deltalake as write

    write(*args, **kwargs)


def writer_properties() -> WriterProperties:
    """Parquet writer settings of every table: zstd, 128k-row row groups.

    delta-rs buffers a whole row group before writing it: 128k rows keep an
    ingest's memory flat whatever the trace size.
    """
    from deltalake import WriterProperties

    return WriterProperties(compression="ZSTD", compression_level=3, max_row_group_size=1 << 17)


def _as_os_error(table: str, exc: Exception) -> OSError | None:
    """The :class:`OSError` behind a failed table write, from delta-rs's message; else None."""
    text = " ".join(str(exc).split())
    found = re.search(r"\(os error (\d+)\)", text)
    if found is None:
        return None
    return OSError(int(found.group(1)), f"cannot write table {table}: {text[:300]}")


def _conform(data: Any, schema: pa.Schema) -> Any:
    """``data`` (an Arrow table or record batch reader) with exactly ``schema``'s columns."""
    import pyarrow as pa

    if isinstance(data, pa.Table):
        return data.select(schema.names).cast(schema)
    return data.cast(schema)


class DuplicateRunError(WarehouseError):
    """A concurrent ingest committed the same run first (object stores only)."""

    def __init__(self, root: Path | str, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(root, f"run {run_id} was committed by a concurrent ingest")


class Writes:
    """The writes of a :class:`~tracewh.storage.store.Store` (see the module docstring)."""

    if TYPE_CHECKING:
        @contextlib.contextmanager
        def lock(self, key: str, *, blocking: bool = True, shared: bool = False) -> Iterator[bool]: ...
        @property
        def options(self) -> dict[str, str] | None: ...
        def read_table(
            self, name: str, *, columns: list[str] | None = None, version: int | None = None
        ) -> pa.Table: ...
        @property
        def remote(self) -> bool: ...
        root: Path | str
        def table(self, name: str, *, version: int | None = None) -> DeltaTable: ...
        def table_uri(self, name: str) -> str: ...

    # ---------------------------------------------------------------- writes
    def append(
        self,
        name: str,
        data: ReaderFactory,
        *,
        replace_predicate: str | None = None,
    ) -> None:
        """Append rows to a table in one commit (retried on concurrent-commit conflicts).

        ``data`` is a factory so a retried commit gets a fresh stream. With
        ``replace_predicate``, rows matching it are replaced by ``data`` in the
        same commit (Delta ``replaceWhere``).
        """
        from deltalake.exceptions import CommitFailedError, DeltaError

        from tracewh.schema.arrow import TABLES

        spec = TABLES[name]
        uri = self.table_uri(name)
        if self.remote and name == "runs" and not replace_predicate:
            self._insert_runs(data)
            return
        for attempt in range(COMMIT_RETRIES):
            source = _conform(data(), spec.schema)
            partition_by = list(spec.partition_by) or None
            try:
                if replace_predicate:
                    write_deltalake(
                        uri, source, mode="overwrite", predicate=replace_predicate,
                        partition_by=partition_by, writer_properties=writer_properties(),
                        storage_options=self.options,
                    )
                else:
                    write_deltalake(
                        uri, source, mode="append",
                        partition_by=partition_by, writer_properties=writer_properties(),
                        storage_options=self.options,
                    )
                return
            except CommitFailedError:
                if attempt == COMMIT_RETRIES - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
            except DeltaError as exc:
                # an I/O failure inside delta-rs (disk full, EIO, EFBIG...) arrives as a
                # generic DeltaError: raise it as the OSError it is, with its errno
                os_error = _as_os_error(name, exc)
                if os_error is None:
                    raise
                raise os_error from exc
    def add_files(self, name: str, adds: Sequence[deltalog.Add]) -> None:
        """Add written data files to ``name`` in one Delta commit (an append).

        A local table is committed by :func:`tracewh.storage.deltalog.commit` (a commit file
        created if absent: the next free version), followed by a checkpoint (delta-rs)
        at every :data:`~tracewh.storage.deltalog.CHECKPOINT_INTERVAL`-th version; an object
        store's by delta-rs (retried on conflicts).
        """
        if not adds:
            return
        if not self.remote:
            try:
                version = deltalog.commit(self.table_uri(name), [a.action() for a in adds])
            except deltalog.CommitConflict as exc:
                raise WarehouseError(self.root, str(exc)) from exc
            if version % deltalog.CHECKPOINT_INTERVAL == 0:
                self._checkpoint(name)
            return
        from deltalake.exceptions import CommitFailedError
        from deltalake.transaction import AddAction, RemoveAction

        from tracewh.schema.arrow import TABLES

        spec = TABLES[name]
        actions: list[AddAction | RemoveAction] = [
            AddAction(path=a.path, size=a.size, partition_values=a.partition_values,
                      modification_time=a.modification_time, data_change=a.data_change,
                      stats=a.stats or json.dumps({}))
            for a in adds
        ]
        for attempt in range(COMMIT_RETRIES):
            try:
                self.table(name).create_write_transaction(
                    actions, mode="append", schema=spec.schema,
                    partition_by=list(spec.partition_by) or None,
                )
                return
            except CommitFailedError:
                if attempt == COMMIT_RETRIES - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
    def _checkpoint(self, name: str) -> None:
        """Write a checkpoint of a local table's latest version (best effort, delta-rs)."""
        with contextlib.suppress(Exception):  # a missing checkpoint only slows replays
            table = self.table(name)
            table.create_checkpoint()
            table.cleanup_metadata()  # commits past the log retention (30 days) go
    def append_rows(
        self, name: str, rows: Sequence[Mapping[str, Any]], *, replace_run: str | None = None,
        con: Any = None,
    ) -> None:
        """Append plain rows (``{column: value}``) to the unpartitioned table ``name``.

        Locally the rows are written by DuckDB into one Parquet file and committed by
        :meth:`add_files` (no pyarrow, no delta-rs): by ``con`` where given (a
        :meth:`rows_connection` the caller keeps for several appends: a new DuckDB costs
        ~10 ms), else by one opened for this append. With ``replace_run`` (``--force``:
        the rows of that run_id are replaced in the same commit) or on an object store,
        they go through :meth:`append` (delta-rs).
        """
        if not rows:
            return
        if self.remote or replace_run is not None:
            import pyarrow as pa

            from tracewh.schema.arrow import TABLES

            table = pa.Table.from_pylist([dict(r) for r in rows], schema=TABLES[name].schema)
            self.append(
                name, lambda: table,
                replace_predicate=f"run_id = '{replace_run}'" if replace_run is not None else None,
            )
            return
        self.add_files(name, [self._write_rows(name, rows, con)])
    @staticmethod
    def rows_connection() -> Any:
        """A DuckDB connection for :meth:`append_rows` (one thread; the caller closes it)."""
        import duckdb

        return duckdb.connect(config={"threads": 1})
    def _write_rows(self, name: str, rows: Sequence[Mapping[str, Any]], con: Any = None) -> deltalog.Add:
        import uuid

        from tracewh.schema.plain import tables
        from tracewh.storage.bulk import insert_rows

        spec = tables()[name]
        if spec.partition_by:
            raise ValueError(f"append_rows writes unpartitioned tables, not {name}")
        cols = [c for c, _ in spec.columns]
        rel = f"part-{uuid.uuid4().hex}-c000.zstd.parquet"
        out = Path(self.table_uri(name)) / rel
        own = con is None
        if own:
            con = self.rows_connection()
        try:
            con.execute(f"CREATE OR REPLACE TEMP TABLE t ({spec.column_defs()})")
            insert_rows(con, "t", spec.columns, rows)
            try:
                con.execute(
                    f"COPY (SELECT {spec.select_list()} FROM t) TO $out "
                    "(FORMAT parquet, COMPRESSION zstd)", {"out": str(out)},
                )
                size = out.stat().st_size
            except BaseException:
                out.unlink(missing_ok=True)
                raise
        finally:
            if own:
                con.close()
            else:
                with contextlib.suppress(Exception):  # the caller's: its next append replaces t
                    con.execute("DROP TABLE IF EXISTS temp.t")
        stats: dict[str, Any] = {"numRecords": len(rows)}
        keys = [k for k in ("run_id", "ingest_id") if k in cols]
        if keys and all(row.get(k) is not None for row in rows for k in keys):
            stats["minValues"] = {k: min(str(row[k]) for row in rows) for k in keys}
            stats["maxValues"] = {k: max(str(row[k]) for row in rows) for k in keys}
            stats["nullCount"] = dict.fromkeys(keys, 0)
        return deltalog.Add(
            path=rel, size=size, partition_values={},
            modification_time=int(time.time() * 1000), stats=json.dumps(stats),
        )
    def _insert_runs(self, data: ReaderFactory) -> None:
        """Insert ``runs`` rows unless a concurrent commit wrote one of their run_ids.

        Without a lock service, the insert is an overwrite of ``run_id = X`` on
        a snapshot checked not to hold X: delta-rs rejects it when a commit
        after that snapshot added an X row, and the retry then finds X.
        """
        import pyarrow as pa
        import pyarrow.compute as pc
        from deltalake.exceptions import CommitFailedError

        from tracewh.schema.arrow import TABLES

        for attempt in range(COMMIT_RETRIES):
            source = _conform(pa.table(data()), TABLES["runs"].schema)
            ids = sorted({str(r) for r in source.column("run_id").to_pylist()})
            if not all(_RUN_ID.match(r) for r in ids):
                raise WarehouseError(self.root, f"not a run id in {ids!r}")
            snapshot = self.table("runs")
            found = self.read_table("runs", columns=["run_id"], version=snapshot.version())
            found = found.filter(pc.field("run_id").isin(ids))
            if found.num_rows:
                raise DuplicateRunError(self.root, str(found.column("run_id")[0]))
            try:
                write_deltalake(
                    snapshot, source, mode="overwrite",
                    predicate=" OR ".join(f"run_id = '{r}'" for r in ids),
                    writer_properties=writer_properties(),
                )
                return
            except CommitFailedError:
                if attempt == COMMIT_RETRIES - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
    def delete(self, name: str, predicate: str) -> dict[str, Any]:
        """Delete rows matching a Delta predicate (retried on conflicts).

        The rewrite removes files with ``dataChange=true``: a concurrent rewrite of
        the same files (a compaction) makes this commit fail, and the retry works on
        the new snapshot.
        """
        from deltalake.exceptions import CommitFailedError

        with self.lock("writers", shared=True):
            for attempt in range(COMMIT_RETRIES):
                try:
                    return self.table(name).delete(predicate)
                except CommitFailedError:
                    if attempt == COMMIT_RETRIES - 1:
                        raise
                    time.sleep(0.05 * (attempt + 1))
        return {}
