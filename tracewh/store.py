"""Where tables live and how a commit becomes visible.

Every table of :mod:`tracewh.schema` is a Delta Lake table (delta-rs) under
``<root>/tables/<name>``: partitioned Parquet (zstd) plus an atomic commit log.
A run's rows become visible in one order: every child table is appended first,
the ``runs`` row last; readers only see child rows whose ``(run_id, ingest_id)``
is in ``runs``. Leftovers of a crashed ingest are invisible and are removed by
:meth:`Store.cleanup_orphans`.

Layout::

    <root>/tables/<table>/_delta_log/...        Delta commit log
    <root>/tables/<table>/day=YYYY-MM-DD/*.parquet
    <root>/_staging/<ingest_id>/                 private scratch of one ingest
    <root>/_locks/                               advisory locks (fcntl)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, WriterProperties, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from tracewh.errors import WarehouseError, WarehouseNotFoundError
from tracewh.schema import TABLES

ReaderFactory = Callable[[], pa.RecordBatchReader | pa.Table]

_COMMIT_RETRIES = 20


def writer_properties() -> WriterProperties:
    """Parquet writer settings of every table: zstd, 128k-row row groups.

    delta-rs buffers a whole row group before writing it: 128k rows keep an
    ingest's memory flat whatever the trace size.
    """
    return WriterProperties(compression="ZSTD", compression_level=3, max_row_group_size=1 << 17)


def _as_os_error(table: str, exc: Exception) -> OSError | None:
    """The :class:`OSError` behind a failed table write, from delta-rs's message; else None."""
    text = " ".join(str(exc).split())
    found = re.search(r"\(os error (\d+)\)", text)
    if found is None:
        return None
    return OSError(int(found.group(1)), f"cannot write table {table}: {text[:300]}")


@dataclass(frozen=True)
class Store:
    """A warehouse on the local file system.

    Parameters
    ----------
    root
        The warehouse directory. Created by :meth:`create`.
    """

    root: Path

    # ----------------------------------------------------------------- paths
    @property
    def tables_dir(self) -> Path:
        return self.root / "tables"

    @property
    def staging_root(self) -> Path:
        return self.root / "_staging"

    @property
    def locks_dir(self) -> Path:
        return self.root / "_locks"

    def table_uri(self, name: str) -> str:
        """Location of a table (a path today; an object-store URL later)."""
        return str(self.tables_dir / name)

    def exists(self) -> bool:
        """Whether the warehouse has been created."""
        return (self.tables_dir / "runs" / "_delta_log").is_dir()

    def require(self) -> None:
        """Raise :class:`WarehouseNotFoundError` unless the warehouse exists."""
        if not self.root.exists():
            raise WarehouseNotFoundError(self.root)
        if not self.exists():
            raise WarehouseError(self.root, "is not a tracewh warehouse (no tables/runs)")

    # -------------------------------------------------------------- creation
    def create(self) -> None:
        """Create the directory layout and every (empty) table; idempotent, race-safe."""
        try:
            for d in (self.tables_dir, self.staging_root, self.locks_dir):
                d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WarehouseError(self.root, f"cannot create: {exc.strerror or exc}") from exc
        for name, spec in TABLES.items():
            uri = self.table_uri(name)
            if DeltaTable.is_deltatable(uri):
                continue
            with self.lock(f"create-{name}"):
                if DeltaTable.is_deltatable(uri):
                    continue
                try:
                    DeltaTable.create(
                        uri,
                        spec.schema,
                        mode="ignore",
                        partition_by=list(spec.partition_by) or None,
                        name=name,
                        description=spec.doc,
                    )
                except (DeltaError, OSError) as exc:
                    if not DeltaTable.is_deltatable(uri):
                        raise WarehouseError(self.root, f"cannot create table {name}: {exc}") from exc

    # ----------------------------------------------------------------- reads
    def table(self, name: str, *, version: int | None = None) -> DeltaTable:
        """Open a table at its latest (or a given) version."""
        try:
            return DeltaTable(self.table_uri(name), version=version)
        except TableNotFoundError as exc:
            raise WarehouseError(self.root, f"table {name} is missing") from exc

    def snapshot_files(self, *, days: Collection[date] | None = None) -> dict[str, list[str]]:
        """Parquet files of the current snapshot of every table.

        ``runs`` is read first: child rows of every run it lists were committed
        before it, so they are in the child snapshots read afterwards. With
        ``days``, child tables keep only the files of those ``day`` partitions
        (partition pruning from the log, without opening any file).
        """
        files: dict[str, list[str]] = {}
        for name in ("runs", *[n for n in TABLES if n != "runs"]):
            if days is None or not TABLES[name].is_run_child:
                files[name] = self.table(name).file_uris()
                continue
            actions = self.add_actions(name)
            if actions.num_rows == 0:
                files[name] = []
                continue
            wanted = set(days)
            root = self.table_uri(name)
            files[name] = [
                f"{root}/{rel}"
                for rel, day in zip(
                    actions.column("path").to_pylist(),
                    actions.column("partition.day").to_pylist(),
                    strict=True,
                )
                if day in wanted
            ]
        return files

    def add_actions(self, name: str) -> pa.Table:
        """The table's live files with their stats (``min.run_id``, ``size_bytes``, ...)."""
        return pa.table(self.table(name).get_add_actions(flatten=True))

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
        spec = TABLES[name]
        uri = self.table_uri(name)
        for attempt in range(_COMMIT_RETRIES):
            source = data().cast(spec.schema)
            partition_by = list(spec.partition_by) or None
            try:
                if replace_predicate:
                    write_deltalake(
                        uri, source, mode="overwrite", predicate=replace_predicate,
                        partition_by=partition_by, writer_properties=writer_properties(),
                    )
                else:
                    write_deltalake(
                        uri, source, mode="append",
                        partition_by=partition_by, writer_properties=writer_properties(),
                    )
                return
            except CommitFailedError:
                if attempt == _COMMIT_RETRIES - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
            except DeltaError as exc:
                # an I/O failure inside delta-rs (disk full, EIO, EFBIG...) arrives as a
                # generic DeltaError: raise it as the OSError it is, with its errno
                os_error = _as_os_error(name, exc)
                if os_error is None:
                    raise
                raise os_error from exc

    def compact_small(self, name: str, *, max_files: int = 8) -> bool:
        """Merge a table's files when it has more than ``max_files`` (best effort).

        Used after ingest batches on the small, unpartitioned ``runs`` and
        ``ingest_log`` tables, which every query reads whole. A concurrent
        commit that conflicts just leaves the compaction to the next batch.
        """
        dt = self.table(name)
        if len(dt.file_uris()) <= max_files:
            return False
        try:
            dt.optimize.compact(writer_properties=writer_properties())
        except (CommitFailedError, DeltaError):
            return False
        return True

    def delete(self, name: str, predicate: str) -> dict[str, Any]:
        """Delete rows matching a Delta predicate (retried on conflicts)."""
        for attempt in range(_COMMIT_RETRIES):
            try:
                return self.table(name).delete(predicate)
            except CommitFailedError:
                if attempt == _COMMIT_RETRIES - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
        return {}

    # ----------------------------------------------------------------- locks
    @contextlib.contextmanager
    def lock(self, key: str, *, blocking: bool = True) -> Iterator[bool]:
        """An advisory inter-process lock (fcntl) named ``key``.

        Yields True when held. With ``blocking=False`` yields False at once if
        another process holds it. The lock dies with its process (kill -9 safe).
        """
        self.locks_dir.mkdir(parents=True, exist_ok=True)
        path = self.locks_dir / f"{key}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            try:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
            except OSError:
                pass
            yield True
        finally:
            os.close(fd)

    def is_locked(self, key: str) -> bool:
        """Whether some live process holds lock ``key``."""
        if not (self.locks_dir / f"{key}.lock").exists():
            return False
        with self.lock(key, blocking=False) as held:
            return not held

    # --------------------------------------------------------------- staging
    def new_staging(self, ingest_id: str) -> Path:
        path = self.staging_root / ingest_id
        path.mkdir(parents=True, exist_ok=False)
        return path

    def stale_staging(self) -> list[Path]:
        """Staging folders whose ingest is no longer running."""
        if not self.staging_root.is_dir():
            return []
        return [
            p
            for p in sorted(self.staging_root.iterdir())
            if p.is_dir() and not self.is_locked(f"ingest-{p.name}")
        ]

    def remove_staging(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)
