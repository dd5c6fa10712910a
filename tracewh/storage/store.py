"""Where tables live and how a commit becomes visible.

Every table of :mod:`tracewh.schema.arrow` is a Delta Lake table (delta-rs) under
``<root>/tables/<name>``: partitioned Parquet (zstd) plus an atomic commit log.
A run's rows become visible in one order: every child table is appended first,
the ``runs`` row last; readers only see child rows whose ``(run_id, ingest_id)``
is in ``runs``. Leftovers of a crashed ingest are invisible and are removed by
:meth:`Store.cleanup_orphans`.

The root is a directory or an object-store URL (``s3://bucket/prefix``, any
URL delta-rs supports). On an object store there is no lock service: commits
rely on the store's conditional put (delta-rs's default on S3), a ``runs`` row
is inserted only if no concurrent commit wrote the same ``run_id`` (a
conditional overwrite, :class:`DuplicateRunError` otherwise), staging and
fcntl locks live in a local scratch folder of the ingesting machine, and a live
ingest keeps a lease object ``<root>/_leases/ingest-<id>`` fresh (its leftovers
are orphans once the lease is older than ``lease_s``).

Layout::

    <root>/tables/<table>/_delta_log/...        Delta commit log
    <root>/tables/<table>/day=YYYY-MM-DD/*.parquet
    <root>/_staging/<ingest_id>/                 private scratch of one ingest
    <root>/_locks/                               advisory locks (fcntl)
    <root>/_leases/ingest-<id>                   object stores: live-ingest leases
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracewh.core.errors import (
    BackendError,
    ReadOnlyWarehouseError,
    WarehouseError,
    WarehouseNotFoundError,
    WarehousePathError,
)
from tracewh.storage import deltalog
from tracewh.storage.confined import TableBounds
from tracewh.storage.scratch import scratch_dir

# deltalake, pyarrow and the Arrow schemas are imported where they are used: a query
# command reads the snapshot through :mod:`tracewh.storage.deltalog` and needs none of them
if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable, WriterProperties

ReaderFactory = Callable[[], "pa.RecordBatchReader | pa.Table"]

_COMMIT_RETRIES = 20


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


_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")
_RUN_ID = re.compile(r"^[0-9a-f]{1,64}$")


def is_url(root: str | Path) -> bool:
    """Whether ``root`` is an object-store URL (``s3://...``) rather than a local path."""
    return isinstance(root, str) and bool(_URL.match(root)) and not root.startswith("file://")


def _conform(data: Any, schema: pa.Schema) -> Any:
    """``data`` (an Arrow table or record batch reader) with exactly ``schema``'s columns."""
    import pyarrow as pa

    if isinstance(data, pa.Table):
        return data.select(schema.names).cast(schema)
    return data.cast(schema)


def select_files(
    live: Mapping[str, list[tuple[str, str | None]]],
    run_child: Mapping[str, bool],
    *,
    days: Collection[date] | None = None,
    since: date | None = None,
) -> dict[str, list[str]]:
    """The files of a snapshot (:meth:`Store.snapshot_live`) that a query reads.

    With ``days`` and/or ``since``, run-child tables keep only the files of
    those ``day`` partitions (and ``ingest_log`` none: per-run analyses never
    read it); other tables keep every file.
    """
    restricted = days is not None or since is not None
    wanted = {d.isoformat() for d in days} if days is not None else None
    after = since.isoformat() if since is not None else None
    files: dict[str, list[str]] = {}
    for name, entries in live.items():
        if restricted and name == "ingest_log":
            files[name] = []
        elif not restricted or not run_child.get(name, False):
            files[name] = [path for path, _ in entries]
        else:  # ISO dates compare as text in date order
            files[name] = [
                path for path, day in entries
                if day is not None and (wanted is None or day in wanted)
                and (after is None or day >= after)
            ]
    return files


class DuplicateRunError(WarehouseError):
    """A concurrent ingest committed the same run first (object stores only)."""

    def __init__(self, root: Path | str, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(root, f"run {run_id} was committed by a concurrent ingest")


@dataclass(frozen=True)
class Store:
    """A warehouse: a local directory, or an object-store URL.

    Parameters
    ----------
    root
        The warehouse directory, or a URL such as ``s3://bucket/prefix``.
        Created by :meth:`create`.
    storage_options
        Object-store settings for delta-rs (``aws_endpoint_url``,
        ``aws_region``, ``aws_allow_http``, credentials...); empty: the
        standard environment (``AWS_*``) as each client reads it.
    lease_s
        Object stores: an ingest whose lease is older than this is dead.
    scratch
        Object stores: the local folder for staging and locks (default: one per warehouse
        URL in a private folder of the user, ``$TMPDIR/tracewh-<uid>/``, checked before use:
        see :mod:`tracewh.storage.scratch`).
    """

    root: Path | str
    storage_options: Mapping[str, str] = field(default_factory=dict, hash=False)
    lease_s: float = 600.0
    scratch: Path | None = None

    def __post_init__(self) -> None:
        root = self.root
        # a local root is made absolute: delta-rs and pyarrow read a relative path with a
        # ``:`` in it ("a:b/tables") as a URL of scheme "a"
        object.__setattr__(
            self, "root",
            root.rstrip("/") if isinstance(root, str) and is_url(root)
            else Path(os.path.abspath(root)),
        )

    # ----------------------------------------------------------------- paths
    @property
    def remote(self) -> bool:
        """Whether the warehouse is on an object store."""
        return isinstance(self.root, str)

    @property
    def local_dir(self) -> Path:
        """Where staging and locks live: the root, or a local scratch folder."""
        if isinstance(self.root, Path):
            return self.root
        if self.scratch is not None:
            return self.scratch
        return scratch_dir(self.root)  # private to this user, checked (tracewh.storage.scratch)

    @property
    def tables_dir(self) -> Path:
        return Path(self.root) / "tables"

    @property
    def staging_root(self) -> Path:
        return self.local_dir / "_staging"

    @property
    def locks_dir(self) -> Path:
        return self.local_dir / "_locks"

    @property
    def options(self) -> dict[str, str] | None:
        """``storage_options`` for delta-rs and Polars (None when empty)."""
        return dict(self.storage_options) or None

    def table_uri(self, name: str) -> str:
        """Location of a table: a path, or a URL on an object store."""
        if isinstance(self.root, str):
            return f"{self.root}/tables/{name}"
        return str(self.tables_dir / name)

    def exists(self) -> bool:
        """Whether the warehouse has been created."""
        if self.remote:
            from deltalake import DeltaTable
            from deltalake.exceptions import DeltaError

            try:
                return DeltaTable.is_deltatable(self.table_uri("runs"), self.options)
            except (DeltaError, OSError) as exc:
                raise WarehouseError(self.root, f"cannot reach the object store: {exc}") from exc
        return (self.tables_dir / "runs" / "_delta_log").is_dir()

    def _check_path(self) -> None:
        """Refuse a local path delta-rs cannot address (it panics on ``[``/``]``, decodes ``%XX``)."""
        if self.remote:
            return
        text = os.path.abspath(self.root)
        if "[" in text or "]" in text or re.search(r"%[0-9A-Fa-f]{2}", text):
            raise WarehousePathError(
                self.root,
                "the path contains '[', ']' or a %XX sequence, which Delta Lake (delta-rs) "
                "cannot address: use another directory",
            )

    def require(
        self, tables: Collection[str] | None = None, *, schema_key: str | None = None
    ) -> frozenset[str]:
        """Raise :class:`WarehouseNotFoundError` unless the warehouse exists; its partial tables.

        A warehouse written before some of the schema's tables or columns existed gets
        them (tables empty, columns NULL in the files written before, see
        :meth:`create`). ``tables``: the table names to expect (default: the schema's);
        ``schema_key``: the schema's :data:`~tracewh.schema.arrow.SCHEMA_KEY`. A local warehouse
        whose tables are there and whose schema marker has that key is checked without
        opening delta-rs. Returns the tables to read by column name (:meth:`partial_tables`).
        """
        self._check_path()
        if self.remote and not self.exists():
            raise WarehouseNotFoundError(self.root)
        if not self.remote and not Path(self.root).exists():
            raise WarehouseNotFoundError(self.root)
        if not self.exists():
            raise WarehouseError(self.root, "is not a tracewh warehouse (no tables/runs)")
        marker = self._read_marker()
        complete = self.remote or tables is None or all(
            (self.tables_dir / n / "_delta_log").is_dir() for n in tables
        )
        if (not self.remote and complete and schema_key is not None
                and marker is not None and marker.get("key") == schema_key):
            return frozenset(marker.get("partial") or ())
        from tracewh.schema.plain import info

        if marker is None or marker.get("key") != info().schema_key or not complete:
            try:
                self.create()  # written by a tracewh before these tables or columns: add them
            except ReadOnlyWarehouseError:
                return self._partial_from_logs()  # cannot write: read as it is
            except WarehouseError as exc:
                if not isinstance(exc.__cause__, OSError):
                    raise
                return self._partial_from_logs()
            marker = self._read_marker()
        return frozenset((marker or {}).get("partial") or ())

    def partial_tables(self) -> frozenset[str]:
        """Tables some of whose files lack columns the schema added later (read by name).

        From the warehouse's schema marker (``_schema.json``, written by :meth:`create`):
        the tables that got :data:`~tracewh.schema.arrow.ADDED_COLUMNS` after they had files.
        Without a marker (a read-only warehouse of an older tracewh), from the Delta logs.
        """
        marker = self._read_marker()
        if marker is None:
            return self._partial_from_logs()
        return frozenset(marker.get("partial") or ())

    def _marker_path(self) -> str:
        return f"{self.root}/_schema.json" if self.remote else str(Path(self.root) / "_schema.json")

    def _read_marker(self) -> dict[str, Any] | None:
        """The schema marker (``{"key": SCHEMA_KEY, "partial": [table, ...]}``) or None."""
        import json

        try:
            if self.remote:
                text = self.filesystem().cat_file(self._marker_path()).decode("utf-8")
            else:
                text = Path(self._marker_path()).read_text(encoding="utf-8")
            marker = json.loads(text)
        except (OSError, ValueError, UnicodeDecodeError):
            return None
        return marker if isinstance(marker, dict) else None

    def _write_marker(self, partial: Collection[str]) -> None:
        """Write the schema marker atomically (temp file, rename; an object store: a put)."""
        from tracewh.schema.plain import info

        text = json.dumps({"key": info().schema_key, "partial": sorted(partial)})
        if self.remote:
            self.filesystem().pipe_file(self._marker_path(), text.encode("utf-8"))
            return
        target = Path(self._marker_path())
        fd, tmp = tempfile.mkstemp(prefix=".schema.", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _partial_from_logs(self) -> frozenset[str]:
        """Partial tables from the Delta logs: a schema lacking columns, or marked evolved."""
        from tracewh.schema.arrow import ADDED_COLUMNS, EVOLVED_PROPERTY

        out = set()
        for name in ADDED_COLUMNS:
            dt = self.table(name)
            if EVOLVED_PROPERTY in dt.metadata().configuration or self.missing_columns(name, dt):
                out.add(name)
        return frozenset(out)

    def missing_columns(self, name: str, dt: DeltaTable | None = None) -> list[str]:
        """Declared columns of table ``name`` its Delta schema lacks (written by an older tracewh)."""
        from tracewh.schema.arrow import TABLES

        have = {f.name for f in (dt or self.table(name)).schema().fields}
        return [f.name for f in TABLES[name].schema if f.name not in have]

    def _add_columns(self, name: str) -> bool:
        """Add the declared columns an existing table lacks (nullable) and mark it evolved.

        Its old files keep their columns: readers read an evolved table by column name
        (:meth:`partial_tables`), so the new columns are NULL there. Race-safe: under a
        lock, checked again; a concurrent writer's conflicting commit is retried. Returns
        whether the table is evolved (now or before).
        """
        from deltalake.exceptions import CommitFailedError, DeltaError
        from deltalake.schema import Field as DeltaField

        from tracewh.schema.arrow import EVOLVED_PROPERTY, TABLES

        dt = self.table(name)
        if not self.missing_columns(name, dt):
            return EVOLVED_PROPERTY in dt.metadata().configuration
        with self.lock(f"evolve-{name}"):
            dt = self.table(name)
            missing = self.missing_columns(name, dt)
            if not missing:
                return True
            fields = [DeltaField.from_arrow(TABLES[name].schema.field(c)) for c in missing]
            try:
                for attempt in range(_COMMIT_RETRIES):
                    try:
                        dt.alter.set_table_properties(
                            {EVOLVED_PROPERTY: "true"}, raise_if_not_exists=False
                        )
                        self.table(name).alter.add_columns(fields)
                        return True
                    except CommitFailedError:
                        if attempt == _COMMIT_RETRIES - 1:
                            raise
                        time.sleep(0.05 * (attempt + 1))
                        dt = self.table(name)
            except (DeltaError, OSError) as exc:
                raise WarehouseError(
                    self.root, f"cannot add columns {', '.join(missing)} to table {name}: {exc}"
                ) from exc
        return True

    # -------------------------------------------------------------- creation
    def create(self) -> None:
        """Create the directory layout and every (empty) table; idempotent, race-safe.

        A local table is created by :func:`tracewh.storage.deltalog.create_table` (version 0
        written once, atomically: no lock, no delta-rs); on an object store by delta-rs.
        A table written by a tracewh before some of its columns gets them
        (:meth:`_add_columns`, delta-rs) unless the schema marker says it is current.
        """
        from tracewh.schema.plain import info

        schema = info()
        self._check_path()
        try:
            for d in (self.staging_root, self.locks_dir) if self.remote else (
                self.tables_dir, self.staging_root, self.locks_dir
            ):
                d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise self._writable_error(Path(exc.filename or self.root), exc) from exc
        marker = self._read_marker() or {}
        current = marker.get("key") == schema.schema_key
        evolved: set[str] = set()
        for name in schema.tables:
            if self._table_exists(name):
                if name in schema.added_columns and not current and self._add_columns(name):
                    evolved.add(name)
                continue
            self._create_table(name)
        partial = evolved | set(marker.get("partial") or ())
        if not current or partial != set(marker.get("partial") or ()):
            with self.lock("schema-marker"):
                try:
                    self._write_marker(partial)
                except OSError as exc:
                    raise WarehouseError(
                        self.root, f"cannot write the schema marker: {exc.strerror or exc}"
                    ) from exc

    def _table_exists(self, name: str) -> bool:
        """Whether table ``name`` has a Delta log (a local one: a version in its folder)."""
        if not self.remote:
            try:
                return deltalog.latest_version(self.table_uri(name)) >= 0
            except (FileNotFoundError, NotADirectoryError):
                return False
        from deltalake import DeltaTable

        return bool(DeltaTable.is_deltatable(self.table_uri(name), self.options))

    def _create_table(self, name: str) -> None:
        from tracewh.schema.plain import tables

        # a checkpoint every 10 commits: opening a table replays at most 9 JSON commits
        # (one ingest batch is one commit per table)
        configuration = {"delta.checkpointInterval": str(deltalog.CHECKPOINT_INTERVAL)}
        uri = self.table_uri(name)
        if not self.remote:
            spec = tables()[name]
            try:
                deltalog.create_table(
                    uri, name=name, description=spec.doc, schema_string=spec.schema_string,
                    partition_columns=spec.partition_by, configuration=configuration,
                )
            except OSError as exc:
                if not self._table_exists(name):
                    raise WarehouseError(
                        self.root, f"cannot create table {name}: {exc.strerror or exc}"
                    ) from exc
            return
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError

        from tracewh.schema.arrow import TABLES

        arrow = TABLES[name]
        with self.lock(f"create-{name}"):
            if DeltaTable.is_deltatable(uri, self.options):
                return
            try:
                DeltaTable.create(
                    uri, arrow.schema, mode="ignore",
                    partition_by=list(arrow.partition_by) or None, name=name,
                    description=arrow.doc, storage_options=self.options,
                    configuration=configuration,
                )
            except (DeltaError, OSError) as exc:
                if not DeltaTable.is_deltatable(uri, self.options):
                    raise WarehouseError(self.root, f"cannot create table {name}: {exc}") from exc

    # ----------------------------------------------------------------- reads
    def table(self, name: str, *, version: int | None = None) -> DeltaTable:
        """Open a table at its latest (or a given) version."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            return DeltaTable(self.table_uri(name), version=version, storage_options=self.options)
        except TableNotFoundError as exc:
            raise WarehouseError(self.root, f"table {name} is missing") from exc

    def file_uris(self, name: str, *, version: int | None = None) -> list[str]:
        """The data files of a table's snapshot: local paths, or URLs on an object store.

        delta-rs percent-encodes local paths (``w h`` becomes ``w%20h``); they are
        decoded here, which is unambiguous because a local root never holds a
        ``%XX`` sequence (:meth:`_check_path`). The latest snapshot of a local
        table is replayed by :func:`tracewh.storage.deltalog.live_files` (no delta-rs);
        delta-rs reads it where that reader declines.
        """
        if version is None:
            return [path for path, _ in self._live(name)]
        return self._decoded(self.table(name, version=version).file_uris())

    def _live(self, name: str) -> list[tuple[str, str | None]]:
        """(file, its ``day`` partition value) of each live file of a table's latest snapshot.

        Every file must lie inside the table (:mod:`tracewh.storage.confined`): a log naming
        one outside it raises :class:`WarehouseError` naming the file, and nothing is read.
        """
        found = self._live_unchecked(name)
        bounds = TableBounds(self.table_uri(name), remote=self.remote)
        for path, _ in found:
            why = bounds.problem(path)
            if why is not None:
                raise WarehouseError(
                    self.root, f"table {name}: its log names a data file that {why}: "
                    f"{bounds.relative(path)} (nothing was read; run `tracewh verify`)")
        return found

    def _live_unchecked(self, name: str) -> list[tuple[str, str | None]]:
        if not self.remote:
            try:
                found = deltalog.live_files(self.table_uri(name))
            except FileNotFoundError as exc:
                raise WarehouseError(self.root, f"table {name} is missing") from exc
            if found is not None:
                return [(path, values.get("day")) for path, values in found]
        actions = self.add_actions(name)
        root = self.table_uri(name)
        rels = actions.column("path").to_pylist() if actions.num_rows else []
        days = (
            actions.column("partition.day").to_pylist()
            if actions.num_rows and "partition.day" in actions.column_names
            else [None] * len(rels)
        )
        out = []
        for rel, day in zip(rels, days, strict=True):
            path = f"{root}/{rel if self.remote else urllib.parse.unquote(rel)}"
            out.append((path, day.isoformat() if isinstance(day, date) else day))
        return out

    def _decoded(self, uris: list[str]) -> list[str]:
        if self.remote:
            return uris
        return [urllib.parse.unquote(u.removeprefix("file://")) for u in uris]

    def read_table(
        self, name: str, *, columns: list[str] | None = None, version: int | None = None
    ) -> pa.Table:
        """A table's rows (``columns`` only) at its latest (or a given) version, as Arrow.

        Reads the snapshot's Parquet files directly, not through delta-rs's
        pyarrow dataset: that one's file system calls back into delta-rs from
        Arrow's I/O threads, and a process that used it aborts at exit ~half the
        time (``terminate called without an active exception``; apache/arrow#34314,
        delta-io/delta-rs#2184). Partition columns cannot be asked for.
        """
        import pyarrow as pa
        import pyarrow.parquet as pq

        from tracewh.schema.arrow import TABLES

        spec = TABLES[name]
        wanted = columns if columns is not None else [
            f.name for f in spec.schema if f.name not in spec.partition_by
        ]
        if any(c in spec.partition_by for c in wanted):
            raise ValueError(f"read_table cannot read partition columns of {name}")
        schema = pa.schema([spec.schema.field(c) for c in wanted])
        files = self.file_uris(name, version=version)
        if not files:
            return schema.empty_table()
        if self.remote:
            fs = self.filesystem()
            tables = []
            for uri in files:
                with fs.open(uri, "rb") as f:
                    # a file written before a column was added (ADDED_COLUMNS): NULL there
                    tables.append(pq.read_table(f, columns=wanted, schema=schema))
            return pa.concat_tables(tables).cast(schema)
        # partitioning=None: pyarrow would read key=value folders of the whole path as columns
        return pq.read_table(files, columns=wanted, schema=schema, partitioning=None).cast(schema)

    def snapshot_live(
        self, tables: Collection[tuple[str, bool]] | None = None, *, skip: Collection[str] = ()
    ) -> dict[str, list[tuple[str, str | None]]]:
        """(file, ``day`` partition value) of each live file of each table's current snapshot.

        ``runs`` is read first: child rows of every run it lists were committed
        before it, so they are in the child snapshots read afterwards.
        ``tables``: (name, is a run child) of the tables to read (default: the
        schema's); ``skip``: tables left out (empty).
        """
        if tables is None:
            from tracewh.schema.arrow import TABLES

            tables = [(n, spec.is_run_child) for n, spec in TABLES.items()]
        names = [n for n, _ in tables]
        ordered = (["runs"] if "runs" in names else []) + [n for n in names if n != "runs"]
        return {n: ([] if n in skip else self._live(n)) for n in ordered}

    def snapshot_files(
        self,
        *,
        days: Collection[date] | None = None,
        since: date | None = None,
        tables: Collection[tuple[str, bool]] | None = None,
    ) -> dict[str, list[str]]:
        """Parquet files of the current snapshot of every table (see :meth:`snapshot_live`).

        With ``days``, child tables keep only the files of those ``day``
        partitions; with ``since``, only those of ``day >= since`` (both: both
        hold). Either prunes partitions from the log, without opening any file,
        and leaves ``ingest_log`` out.
        """
        if tables is None:
            from tracewh.schema.arrow import TABLES

            tables = [(n, spec.is_run_child) for n, spec in TABLES.items()]
        restricted = days is not None or since is not None
        live = self.snapshot_live(tables, skip=("ingest_log",) if restricted else ())
        return select_files(live, dict(tables), days=days, since=since)

    def add_actions(self, name: str) -> pa.Table:
        """The table's live files with their stats (``min.run_id``, ``size_bytes``, ...)."""
        import pyarrow as pa

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
        from deltalake.exceptions import CommitFailedError, DeltaError

        from tracewh.schema.arrow import TABLES

        spec = TABLES[name]
        uri = self.table_uri(name)
        if self.remote and name == "runs" and not replace_predicate:
            self._insert_runs(data)
            return
        for attempt in range(_COMMIT_RETRIES):
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
        for attempt in range(_COMMIT_RETRIES):
            try:
                self.table(name).create_write_transaction(
                    actions, mode="append", schema=spec.schema,
                    partition_by=list(spec.partition_by) or None,
                )
                return
            except CommitFailedError:
                if attempt == _COMMIT_RETRIES - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))

    def _checkpoint(self, name: str) -> None:
        """Write a checkpoint of a local table's latest version (best effort, delta-rs)."""
        with contextlib.suppress(Exception):  # a missing checkpoint only slows replays
            table = self.table(name)
            table.create_checkpoint()
            table.cleanup_metadata()  # commits past the log retention (30 days) go

    def append_rows(
        self, name: str, rows: Sequence[Mapping[str, Any]], *, replace_run: str | None = None
    ) -> None:
        """Append plain rows (``{column: value}``) to the unpartitioned table ``name``.

        Locally the rows are written by DuckDB into one Parquet file and committed by
        :meth:`add_files` (no pyarrow, no delta-rs). With ``replace_run`` (``--force``:
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
        self.add_files(name, [self._write_rows(name, rows)])

    def _write_rows(self, name: str, rows: Sequence[Mapping[str, Any]]) -> deltalog.Add:
        import uuid

        import duckdb

        from tracewh.schema.plain import tables

        spec = tables()[name]
        if spec.partition_by:
            raise ValueError(f"append_rows writes unpartitioned tables, not {name}")
        cols = [c for c, _ in spec.columns]
        rel = f"part-{uuid.uuid4().hex}-c000.zstd.parquet"
        out = Path(self.table_uri(name)) / rel
        con = duckdb.connect(config={"threads": 1})
        try:
            con.execute(f"CREATE TEMP TABLE t ({spec.column_defs()})")
            con.executemany(
                f"INSERT INTO t VALUES ({', '.join('?' for _ in cols)})",
                [[row.get(c) for c in cols] for row in rows],
            )
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
            con.close()
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

        for attempt in range(_COMMIT_RETRIES):
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
                if attempt == _COMMIT_RETRIES - 1:
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
    def lock(self, key: str, *, blocking: bool = True, shared: bool = False) -> Iterator[bool]:
        """An advisory inter-process lock (fcntl) named ``key``.

        Yields True when held. With ``blocking=False`` yields False at once if
        another process holds it. ``shared`` locks coexist with each other and
        exclude an exclusive one (``writers``: every write takes it shared, a
        ``compact --retain-hours 0`` exclusive). The lock dies with its process
        (kill -9 safe). On an object store the lock is local to this machine; an
        ``ingest-*`` lock also holds a lease in the store, refreshed while held.
        Raises :class:`ReadOnlyWarehouseError` where the lock file cannot be made.
        """
        with self._local_lock(key, blocking=blocking, shared=shared) as held:
            if not (held and self.remote and key.startswith("ingest-")):
                yield held
                return
            with self._lease(key):
                yield True

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Hold the ``readers`` lock shared while a snapshot's files are read (local warehouses).

        ``compact --retain-hours 0`` vacuums files superseded moments ago; it takes this
        lock exclusively (without waiting) first, and where readers hold it keeps those files
        (see :func:`tracewh.ingest.maintenance.compact`). A reader waits only while such a
        vacuum runs. Where the lock file cannot be made (a read-only warehouse, which nothing
        can vacuum either) the read goes on without it.
        """
        if self.remote or not self.locks_dir.is_dir():  # nothing written here yet: no vacuum
            yield
            return
        try:
            fd = os.open(self.locks_dir / "readers.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    def check_writable(self) -> None:
        """Raise :class:`ReadOnlyWarehouseError` unless this process can write the warehouse.

        Commands that write call it first, so a read-only warehouse gets one line
        instead of failures half-way (delta-rs panics on a read-only file system).
        """
        with self._local_lock("writers", shared=True):
            pass
        if not self.remote:
            from tracewh.schema.plain import tables

            for folder in (self.tables_dir, *(self.tables_dir / n for n in tables())):
                if folder.is_dir() and not os.access(folder, os.W_OK):
                    raise ReadOnlyWarehouseError(self.root, folder, "not writable")

    def _writable_error(self, path: Path, exc: OSError) -> WarehouseError:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return ReadOnlyWarehouseError(self.root, path, exc.strerror or str(exc))
        return WarehouseError(self.root, f"cannot write {path}: {exc.strerror or exc}")

    @contextlib.contextmanager
    def _local_lock(
        self, key: str, *, blocking: bool = True, shared: bool = False
    ) -> Iterator[bool]:
        path = self.locks_dir / f"{key}.lock"
        try:
            self.locks_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise self._writable_error(path, exc) from exc
        try:
            mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
            try:
                fcntl.flock(fd, mode | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            if not shared:
                try:
                    os.ftruncate(fd, 0)
                    os.write(fd, f"{os.getpid()}\n".encode())
                except OSError:
                    pass
            yield True
        finally:
            os.close(fd)

    def is_locked(self, key: str) -> bool:
        """Whether some live process holds lock ``key`` (object stores: a fresh lease).

        Takes no lock and writes nothing: works on a read-only warehouse.
        """
        if self._locked_here(key):
            return True
        return self.remote and key.startswith("ingest-") and self._lease_live(key)

    def _locked_here(self, key: str) -> bool:
        """Probe a lock file without creating it: a read-only descriptor can take flock."""
        try:
            fd = os.open(self.locks_dir / f"{key}.lock", os.O_RDONLY)
        except FileNotFoundError:
            return False  # never taken: nobody holds it
        except OSError:
            return False  # unreadable: not one of ours
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    # ---------------------------------------------------------------- leases
    def filesystem(self) -> Any:
        """An fsspec file system for the object store (s3fs for ``s3://``)."""
        scheme = str(self.root).split("://", 1)[0].lower()
        try:
            import fsspec

            if scheme not in ("s3", "s3a"):
                return fsspec.filesystem(scheme)
            opts = {k.lower().removeprefix("aws_"): v for k, v in self.storage_options.items()}
            client: dict[str, Any] = {}
            if opts.get("region") or opts.get("default_region"):
                client["region_name"] = opts.get("region") or opts.get("default_region")
            return fsspec.filesystem(
                "s3",
                key=opts.get("access_key_id"),
                secret=opts.get("secret_access_key"),
                token=opts.get("session_token") or opts.get("token"),
                endpoint_url=opts.get("endpoint_url") or opts.get("endpoint"),
                client_kwargs=client,
                # delta-rs writes and vacuums behind fsspec's back: a cached listing lies
                use_listings_cache=False,
            )
        except ImportError as exc:
            raise BackendError(
                f"reading {scheme}:// needs an fsspec file system: pip install 'tracewh[s3]' ({exc})"
            ) from exc

    def _lease_path(self, key: str) -> str:
        return f"{self.root}/_leases/{key}"

    @contextlib.contextmanager
    def _lease(self, key: str) -> Iterator[None]:
        fs = self.filesystem()
        path = self._lease_path(key)
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(self.lease_s / 4):
                with contextlib.suppress(Exception):
                    fs.pipe_file(path, f"{time.time()}".encode())

        fs.pipe_file(path, f"{time.time()}".encode())
        beat = threading.Thread(target=renew, name=f"lease-{key}", daemon=True)
        beat.start()
        try:
            yield
        finally:
            stop.set()
            beat.join()
            with contextlib.suppress(Exception):
                fs.rm_file(path)

    def _lease_live(self, key: str) -> bool:
        try:
            stamp = float(self.filesystem().cat_file(self._lease_path(key)))
        except (FileNotFoundError, ValueError):
            return False
        return time.time() - stamp < self.lease_s

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
            if p.is_dir() and not self._locked_here(f"ingest-{p.name}")
        ]

    def remove_staging(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)
