"""Creating the tables and bringing an older warehouse up to date (:class:`Schemas`, a part of :class:`~tracewh.storage.store.Store`).

:meth:`Schemas.require` checks a warehouse before a read or write, adds the columns and tables
of a newer schema (:mod:`tracewh.schema.arrow`) and records which tables must be read by column
name (older files lack columns).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracewh.core.errors import (
    ReadOnlyWarehouseError,
    WarehouseError,
    WarehouseNotFoundError,
)
from tracewh.storage import deltalog
from tracewh.storage.writes import COMMIT_RETRIES

# deltalake and pyarrow are imported where they are used (a query command needs neither)
if TYPE_CHECKING:
    from deltalake import DeltaTable


class Schemas:
    """The schemas of a :class:`~tracewh.storage.store.Store` (see the module docstring)."""

    if TYPE_CHECKING:
        def _check_path(self) -> None: ...
        def _writable_error(self, path: Path, exc: OSError) -> WarehouseError: ...
        def exists(self) -> bool: ...
        def filesystem(self) -> Any: ...
        @contextlib.contextmanager
        def lock(self, key: str, *, blocking: bool = True, shared: bool = False) -> Iterator[bool]: ...
        @property
        def locks_dir(self) -> Path: ...
        @property
        def options(self) -> dict[str, str] | None: ...
        @property
        def remote(self) -> bool: ...
        root: Path | str
        @property
        def staging_root(self) -> Path: ...
        def table(self, name: str, *, version: int | None = None) -> DeltaTable: ...
        def table_uri(self, name: str) -> str: ...
        @property
        def tables_dir(self) -> Path: ...

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
                for attempt in range(COMMIT_RETRIES):
                    try:
                        dt.alter.set_table_properties(
                            {EVOLVED_PROPERTY: "true"}, raise_if_not_exists=False
                        )
                        self.table(name).alter.add_columns(fields)
                        return True
                    except CommitFailedError:
                        if attempt == COMMIT_RETRIES - 1:
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
