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

The class is composed of three parts, each in its module: :class:`~tracewh.storage.schemas.Schemas`
(creating tables, upgrading older warehouses), :class:`~tracewh.storage.writes.Writes` (appends,
commits, the ``runs`` row) and :class:`~tracewh.storage.locks.Locks` (locks, leases, staging).

Layout::

    <root>/tables/<table>/_delta_log/...        Delta commit log
    <root>/tables/<table>/day=YYYY-MM-DD/*.parquet
    <root>/_staging/<ingest_id>/                 private scratch of one ingest
    <root>/_locks/                               advisory locks (fcntl)
    <root>/_leases/ingest-<id>                   object stores: live-ingest leases
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import urllib.parse
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracewh.core.errors import (
    BackendError,
    WarehouseError,
    WarehousePathError,
)
from tracewh.storage import deltalog
from tracewh.storage.confined import TableBounds
from tracewh.storage.locks import Locks
from tracewh.storage.schemas import Schemas
from tracewh.storage.scratch import scratch_dir
from tracewh.storage.snapshot import LiveSnapshot, select_files
from tracewh.storage.writes import (
    DuplicateRunError,
    ReaderFactory,
    Writes,
    write_deltalake,
    writer_properties,
)

# deltalake, pyarrow and the Arrow schemas are imported where they are used: a query
# command reads the snapshot through :mod:`tracewh.storage.deltalog` and needs none of them
if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable


__all__ = [
    "DuplicateRunError", "ReaderFactory", "Store", "is_url", "select_files", "write_deltalake",
    "writer_properties",
]

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def is_url(root: str | Path) -> bool:
    """Whether ``root`` is an object-store URL (``s3://...``) rather than a local path."""
    return isinstance(root, str) and bool(_URL.match(root)) and not root.startswith("file://")


@dataclass(frozen=True)
class Store(Writes, Schemas, Locks):
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
        self.check_files(name, [path for path, _ in found])
        return found

    def check_files(self, name: str, paths: Sequence[str]) -> None:
        """Raise :class:`WarehouseError` naming the first of ``paths`` (files table ``name``'s
        log names) that does not lie inside the table (:class:`TableBounds`)."""
        bounds = TableBounds(self.table_uri(name), remote=self.remote)
        for path in paths:
            why = bounds.problem(path)
            if why is not None:
                raise WarehouseError(
                    self.root, f"table {name}: its log names a data file that {why}: "
                    f"{bounds.relative(path)} (nothing was read; run `tracewh verify`)")

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
    ) -> LiveSnapshot:
        """(file, ``day`` partition value) of each live file of each table's current snapshot.

        Each table's log is read when first looked up (:class:`LiveSnapshot`); ``runs`` is
        read first: child rows of every run it lists were committed
        before it, so they are in the child snapshots read afterwards.
        ``tables``: (name, is a run child) of the tables to read (default: the
        schema's); ``skip``: tables left out (empty).
        """
        if tables is None:
            from tracewh.schema.arrow import TABLES

            tables = [(n, spec.is_run_child) for n, spec in TABLES.items()]
        return LiveSnapshot(self.table_entries, [n for n, _ in tables], skip=list(skip),
                            check=self.check_files)

    def table_live(self, name: str) -> list[tuple[str, str | None]]:
        """(file, ``day`` partition value) of each live file of table ``name`` (see :meth:`_live`)."""
        return self._live(name)

    def table_entries(self, name: str) -> list[tuple[str, str | None]]:
        """As :meth:`table_live`, but not checked to lie inside the table: for a
        :class:`LiveSnapshot` with ``check=check_files``, which checks the files a query
        selects (a query of one day of a 30,000-run warehouse checks that day's files, not
        270,000)."""
        return self._live_unchecked(name)

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


