"""DuckDB over the warehouse's current snapshot.

The connection exposes one view per table (named as in :mod:`tracewh.schema`),
holding *visible* rows only: a child row is visible when ``runs`` holds its
``(run_id, ingest_id)``. The raw, unfiltered files are under ``raw_<table>``.
Then every ``sql/*.sql`` file is applied in file-name order: they define the
analysis views and table macros on top of these base views.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from tracewh.schema import TABLES
from tracewh.sqlfiles import SQL_DIR, sql_files

__all__ = ["SQL_DIR", "apply_sql", "connect_tables", "sql_files"]

def apply_sql(con: duckdb.DuckDBPyConnection, *, sql_dir: Path = SQL_DIR) -> None:
    """Run every ``sql/*.sql`` file on ``con`` in file-name order."""
    for path in sql_files(sql_dir):
        con.execute(path.read_text(encoding="utf-8"))


def _duck_type(t: pa.DataType) -> str:
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_int32(t):
        return "INTEGER"
    if pa.types.is_float64(t):
        return "DOUBLE"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_date32(t):
        return "DATE"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    if pa.types.is_list(t):
        return f"{_duck_type(t.value_type)}[]"
    raise TypeError(f"no DuckDB type for {t}")


def table_columns_sql(table: str) -> str:
    """``col TYPE, ...`` for a warehouse table, from its Arrow schema."""
    schema = TABLES[table].schema
    return ", ".join(f'"{f.name}" {_duck_type(f.type)}' for f in schema)


def _select_list(table: str) -> str:
    schema = TABLES[table].schema
    return ", ".join(f'CAST("{f.name}" AS {_duck_type(f.type)}) AS "{f.name}"' for f in schema)


def create_raw_relations(
    con: duckdb.DuckDBPyConnection, files: Mapping[str, Sequence[str]]
) -> None:
    """Create ``raw_<table>`` views over Parquet files (or empty typed tables).

    ``files`` maps a table name to the Parquet files of the current snapshot.
    Partition values (``day``) are read from the hive-style path.
    """
    for name in TABLES:
        paths = list(files.get(name, ()))
        if paths:
            # every file of a table has the full schema (the writer writes every column),
            # so binding reads one footer, not all of them (no union_by_name)
            rel = con.read_parquet(paths, hive_partitioning=True)
            rel.project(_select_list(name)).create_view(f"raw_{name}", replace=True)
        else:
            con.execute(f"CREATE OR REPLACE TABLE raw_{name} ({table_columns_sql(name)})")


def create_visible_views(con: duckdb.DuckDBPyConnection) -> None:
    """Create the base views (one per table) holding visible rows only."""
    con.execute("CREATE OR REPLACE VIEW runs AS SELECT * FROM raw_runs")
    con.execute("CREATE OR REPLACE VIEW ingest_log AS SELECT * FROM raw_ingest_log")
    for name, spec in TABLES.items():
        if spec.is_run_child:
            con.execute(
                f"CREATE OR REPLACE VIEW {name} AS SELECT t.* FROM raw_{name} t "
                f"SEMI JOIN raw_runs r ON t.run_id = r.run_id AND t.ingest_id = r.ingest_id"
            )


def catalog_path(*, sql_dir: Path = SQL_DIR, cache_dir: Path | None = None) -> Path:
    """Where the prepared catalog for these ``sql/`` files, this schema and DuckDB lives.

    The name hashes every ``sql/*.sql`` file, the table schemas and the DuckDB
    version, so a change of any of them gets a new catalog.
    """
    h = hashlib.sha256(duckdb.__version__.encode())
    for name in TABLES:
        h.update(table_columns_sql(name).encode())
    for path in sql_files(sql_dir):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    base = cache_dir or Path(tempfile.gettempdir()) / f"tracewh-{os.getuid()}"
    return base / f"catalog-{h.hexdigest()[:16]}.duckdb"


def _build_catalog(path: Path, sql_dir: Path) -> None:
    """Write a DuckDB file holding every view and macro over empty ``raw_<table>`` tables."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.unlink(tmp)  # DuckDB creates the file itself
    try:
        con = duckdb.connect(tmp)
        try:
            create_raw_relations(con, {})
            create_visible_views(con)
            apply_sql(con, sql_dir=sql_dir)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
        Path(tmp + ".wal").unlink(missing_ok=True)


def connect_catalog(*, sql_dir: Path = SQL_DIR) -> duckdb.DuckDBPyConnection:
    """A read-only connection to the prepared catalog (built on first use).

    Views and macros are stored there as definitions over empty ``raw_<table>``
    tables; a session shadows those with TEMP views over the snapshot's files,
    so nothing is bound until a query uses it. This saves binding the ~50
    ``sql/`` definitions on every connection.
    """
    path = catalog_path(sql_dir=sql_dir)
    if not path.exists():
        _build_catalog(path, sql_dir)
    return duckdb.connect(str(path), read_only=True)


def _shadow_raw(
    con: duckdb.DuckDBPyConnection,
    files: Mapping[str, Sequence[str]],
    tables: Mapping[str, pa.Table | pa.RecordBatchReader],
) -> None:
    for name in TABLES:
        paths = list(files.get(name, ()))
        if name in tables:
            con.register(f"__arrow_{name}", tables[name])
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE raw_{name} AS "
                f"SELECT {_select_list(name)} FROM __arrow_{name}"
            )
            con.unregister(f"__arrow_{name}")
        elif paths:
            # DDL takes no parameters: the snapshot's file paths (from the Delta log, not
            # user input) become SQL string literals, quotes doubled
            listing = ", ".join("'" + p.replace("'", "''") + "'" for p in paths)
            con.execute(
                f"CREATE OR REPLACE TEMP VIEW raw_{name} AS SELECT {_select_list(name)} "
                f"FROM read_parquet([{listing}], hive_partitioning = true)"
            )


def connect_tables(
    tables: Mapping[str, pa.Table | pa.RecordBatchReader] | None = None,
    *,
    files: Mapping[str, Sequence[str]] | None = None,
    apply: bool = True,
    sql_dir: Path = SQL_DIR,
    memory_limit: str | None = None,
    temp_directory: str | None = None,
    filesystem: Any = None,
) -> duckdb.DuckDBPyConnection:
    """Open an in-process DuckDB with the warehouse's base views and ``sql/`` applied.

    Parameters
    ----------
    tables
        In-memory Arrow tables by table name (used by tests and by ingest's staging);
        they replace the corresponding ``raw_<table>``.
    files
        Parquet files by table name (the warehouse's current snapshot).
    apply
        Whether the ``sql/*.sql`` views and macros are wanted (from the prepared
        catalog, see :func:`connect_catalog`) or only the base views.
    filesystem
        An fsspec file system to read ``files`` through (object stores).
    """
    if apply:
        con = connect_catalog(sql_dir=sql_dir)
        _settings(con, memory_limit, temp_directory)
        if filesystem is not None:
            con.register_filesystem(filesystem)
        _shadow_raw(con, files or {}, tables or {})
        return con
    con = duckdb.connect()
    _settings(con, memory_limit, temp_directory)
    if filesystem is not None:
        con.register_filesystem(filesystem)
    create_raw_relations(con, files or {})
    for name, table in (tables or {}).items():
        con.register(f"__arrow_{name}", table)
        con.execute(
            f"CREATE OR REPLACE TABLE raw_{name} AS SELECT {_select_list(name)} FROM __arrow_{name}"
        )
        con.unregister(f"__arrow_{name}")
    create_visible_views(con)
    if apply:
        apply_sql(con, sql_dir=sql_dir)
    return con


def _settings(
    con: duckdb.DuckDBPyConnection, memory_limit: str | None, temp_directory: str | None
) -> None:
    con.execute("SET parquet_metadata_cache = true")
    con.execute("SET enable_progress_bar = false")  # long queries would draw on stderr
    if memory_limit:
        con.execute("SET memory_limit = ?", [memory_limit])
    if temp_directory:
        con.execute("SET temp_directory = ?", [temp_directory])


def view_names(con: duckdb.DuckDBPyConnection) -> Iterable[str]:
    """Names of the views defined on ``con`` (base and sql/ views)."""
    rows = con.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY view_name"
    ).fetchall()
    return [r[0] for r in rows]
