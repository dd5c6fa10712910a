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
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from tracewh.errors import QueryError
from tracewh.sqlfiles import SQL_DIR, sql_files

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

__all__ = [
    "SQL_DIR", "Rows", "TableInfo", "apply_sql", "catalog_tables", "connect_catalog",
    "connect_tables", "fetch_frame", "fetch_rows", "first_line", "shadow_files", "sql_files",
]

#: A table of the catalog: its name and whether it is a run child (visible via ``runs``).
TableInfo = tuple[str, bool]

#: The sources whose bytes decide the prepared catalog's content (with sql/ and DuckDB's
#: version): the schema and this module. Hashing them, rather than the Arrow schemas,
#: keeps pyarrow out of a query command's start.
_CATALOG_SOURCES = (Path(__file__).with_name("schema.py"), Path(__file__))

def apply_sql(con: duckdb.DuckDBPyConnection, *, sql_dir: Path = SQL_DIR) -> None:
    """Run every ``sql/*.sql`` file on ``con`` in file-name order."""
    for path in sql_files(sql_dir):
        con.execute(path.read_text(encoding="utf-8"))


def _duck_type(t: pa.DataType) -> str:
    import pyarrow as pa

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
    from tracewh.schema import TABLES

    schema = TABLES[table].schema
    return ", ".join(f'"{f.name}" {_duck_type(f.type)}' for f in schema)


def _select_list(table: str) -> str:
    from tracewh.schema import TABLES

    schema = TABLES[table].schema
    return ", ".join(f'CAST("{f.name}" AS {_duck_type(f.type)}) AS "{f.name}"' for f in schema)


def _null_list(table: str) -> str:
    """``CAST(NULL AS type) AS "col", ...`` of every column of ``table`` (an empty typed row)."""
    from tracewh.schema import TABLES

    schema = TABLES[table].schema
    return ", ".join(f'CAST(NULL AS {_duck_type(f.type)}) AS "{f.name}"' for f in schema)


def files_sql(select_list: str, paths: Sequence[str], *, null_list: str | None = None) -> str:
    """``SELECT <select_list>`` of Parquet ``paths`` (a table's snapshot files).

    DDL takes no parameters: the snapshot's file paths (from the Delta log, not user
    input) become SQL string literals, quotes doubled. With ``null_list`` (a *partial*
    table: some files written before columns were added to it), the files are read by
    column name (``union_by_name``) and united by name with an empty typed row set, so
    a column no file has reads NULL; otherwise every file has every column and binding
    reads one footer.
    """
    listing = ", ".join("'" + p.replace("'", "''") + "'" for p in paths)
    if null_list is None:
        source = f"read_parquet([{listing}], hive_partitioning = true)"
    else:
        source = (
            f"(SELECT * FROM read_parquet([{listing}], hive_partitioning = true, "
            f"union_by_name = true) UNION ALL BY NAME SELECT {null_list} WHERE false)"
        )
    return f"SELECT {select_list} FROM {source}"


def create_raw_relations(
    con: duckdb.DuckDBPyConnection,
    files: Mapping[str, Sequence[str]],
    partial: Collection[str] = (),
) -> None:
    """Create ``raw_<table>`` views over Parquet files (or empty typed tables).

    ``files`` maps a table name to the Parquet files of the current snapshot.
    Partition values (``day``) are read from the hive-style path. Tables in
    ``partial`` are read by column name (:func:`files_sql`).
    """
    from tracewh.schema import TABLES

    for name in TABLES:
        paths = list(files.get(name, ()))
        if paths and name in partial:
            sql = files_sql(_select_list(name), paths, null_list=_null_list(name))
            con.execute(f"CREATE OR REPLACE VIEW raw_{name} AS {sql}")
        elif paths:
            # every file of a table has the full schema (the writer writes every column),
            # so binding reads one footer, not all of them (no union_by_name)
            rel = con.read_parquet(paths, hive_partitioning=True)
            rel.project(_select_list(name)).create_view(f"raw_{name}", replace=True)
        else:
            con.execute(f"CREATE OR REPLACE TABLE raw_{name} ({table_columns_sql(name)})")


def create_visible_views(con: duckdb.DuckDBPyConnection) -> None:
    """Create the base views (one per table) holding visible rows only."""
    from tracewh.schema import TABLES

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

    The name hashes every ``sql/*.sql`` file, the schema and this module's
    source and the DuckDB version, so a change of any of them gets a new catalog.
    """
    h = hashlib.sha256(duckdb.__version__.encode())
    for source in _CATALOG_SOURCES:
        h.update(source.read_bytes())
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
            _write_table_info(con)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
        Path(tmp + ".wal").unlink(missing_ok=True)


def _write_table_info(con: duckdb.DuckDBPyConnection) -> None:
    """Store each table's name, kind and typed select list in the catalog (``tw_tables``).

    A query session reads them from there, so it never imports the Arrow schemas.
    """
    from tracewh.schema import SCHEMA_KEY, TABLES

    con.execute(
        "CREATE TABLE tw_tables (position INTEGER, name VARCHAR, run_child BOOLEAN, "
        "select_list VARCHAR, null_list VARCHAR)"
    )
    con.executemany(
        "INSERT INTO tw_tables VALUES (?, ?, ?, ?, ?)",
        [[i, name, spec.is_run_child, _select_list(name), _null_list(name)]
         for i, (name, spec) in enumerate(TABLES.items())],
    )
    con.execute("CREATE TABLE tw_schema AS SELECT ?::VARCHAR AS schema_key", [SCHEMA_KEY])


def catalog_tables(con: duckdb.DuckDBPyConnection) -> list[TableInfo]:
    """The tables of a catalog connection (:func:`connect_catalog`), in schema order."""
    return [(str(n), bool(c)) for n, c in con.execute(
        "SELECT name, run_child FROM main.tw_tables ORDER BY position"
    ).fetchall()]


def catalog_schema_key(con: duckdb.DuckDBPyConnection) -> str:
    """The :data:`~tracewh.schema.SCHEMA_KEY` the catalog of ``con`` was built for."""
    return str(con.execute("SELECT schema_key FROM main.tw_schema").fetchall()[0][0])


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


def shadow_files(
    con: duckdb.DuckDBPyConnection,
    files: Mapping[str, Sequence[str]],
    tables: Mapping[str, pa.Table | pa.RecordBatchReader] | None = None,
    *,
    reset: bool = False,
    partial: Collection[str] = (),
) -> None:
    """Point a catalog connection's ``raw_<table>`` at the snapshot's ``files`` (TEMP views).

    ``tables``: in-memory Arrow tables that replace some ``raw_<table>`` instead.
    Tables with neither keep the catalog's empty placeholder, or, with ``reset``
    (a connection shadowed before), get it back when ``files`` names them with no
    file; tables ``files`` does not name are left as they are. Tables in ``partial``
    are read by column name (:func:`files_sql`).
    """
    tables = tables or {}
    rows = con.execute("SELECT name, select_list, null_list FROM main.tw_tables").fetchall()
    nulls = {name: null_list for name, _, null_list in rows}
    selects = {name: select_list for name, select_list, _ in rows}
    for name, select_list in selects.items():
        paths = list(files.get(name, ()))
        if name in tables:
            con.register(f"__arrow_{name}", tables[name])
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE raw_{name} AS "
                f"SELECT {select_list} FROM __arrow_{name}"
            )
            con.unregister(f"__arrow_{name}")
        elif not paths:
            if reset and name in files:
                con.execute(f"DROP VIEW IF EXISTS temp.raw_{name}")
        else:
            sql = files_sql(select_list, paths, null_list=nulls[name] if name in partial else None)
            con.execute(f"CREATE OR REPLACE TEMP VIEW raw_{name} AS {sql}")


def connect_tables(
    tables: Mapping[str, pa.Table | pa.RecordBatchReader] | None = None,
    *,
    files: Mapping[str, Sequence[str]] | None = None,
    apply: bool = True,
    sql_dir: Path = SQL_DIR,
    memory_limit: str | None = None,
    temp_directory: str | None = None,
    filesystem: Any = None,
    partial: Collection[str] = (),
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
    partial
        Tables whose files do not all have every column (read by column name).
    """
    if apply:
        con = connect_catalog(sql_dir=sql_dir)
        _settings(con, memory_limit, temp_directory)
        if filesystem is not None:
            con.register_filesystem(filesystem)
        shadow_files(con, files or {}, tables, partial=partial)
        return con
    con = duckdb.connect()
    _settings(con, memory_limit, temp_directory)
    if filesystem is not None:
        con.register_filesystem(filesystem)
    create_raw_relations(con, files or {}, partial)
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


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


@dataclass(frozen=True)
class Rows:
    """A query result as plain Python values: column names, DuckDB type names, rows."""

    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]


def fetch_rows(
    con: duckdb.DuckDBPyConnection,
    query: str,
    params: Sequence[Any] | Mapping[str, Any] | None = None,
) -> Rows:
    """The rows of ``query`` as plain Python values; DuckDB errors as :class:`QueryError`."""

    def fetch() -> Rows:
        rel = con.sql(query, params=params) if params else con.sql(query)
        if rel is None:
            return Rows([], [], [])
        return Rows(list(rel.columns), [str(t) for t in rel.types], rel.fetchall())

    return _guarded(query, fetch)


def fetch_frame(
    con: duckdb.DuckDBPyConnection,
    query: str,
    params: Sequence[Any] | Mapping[str, Any] | None = None,
) -> pl.DataFrame:
    """The result of ``query`` as a Polars frame; DuckDB errors as :class:`QueryError`."""
    import polars as pl

    def fetch() -> pl.DataFrame:
        rel = con.sql(query, params=params) if params else con.sql(query)
        if rel is None:
            return pl.DataFrame()
        frame: pl.DataFrame = rel.pl()
        return frame

    return _guarded(query, fetch)


_T = TypeVar("_T")


def _guarded(query: str, fetch: Callable[[], _T]) -> _T:
    """``fetch()``, DuckDB's errors raised as :class:`QueryError`."""
    try:
        return fetch()
    except duckdb.IOException as exc:
        raise QueryError(
            query, f"{first_line(exc)} (a data file is missing or damaged: run `tracewh verify`)"
        ) from exc
    except duckdb.Error as exc:
        raise QueryError(query, first_line(exc)) from exc
