"""DuckDB over the warehouse's current snapshot.

The connection exposes one view per table (named as in :mod:`tracewh.schema.arrow`),
holding *visible* rows only: a child row is visible when ``runs`` holds its
``(run_id, ingest_id)``. The raw, unfiltered files are under ``raw_<table>``.
Then every ``sql/*.sql`` file is applied in file-name order: they define the
analysis views and table macros on top of these base views.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from tracewh.core.cache import cache_folder, own_file
from tracewh.core.errors import SqlDefinitionError
from tracewh.core.sqlfiles import SQL_DIR, sql_files, sql_string
from tracewh.query.fetch import Rows, fetch_frame, fetch_rows, first_line, to_frame
from tracewh.query.udfs import register_functions
from tracewh.query.views import (
    create_raw_relations,
    create_visible_views,
    files_sql,
    null_list,
    parquet_files_sql,
    select_list,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "SQL_DIR",
    "Rows",
    "TableInfo",
    "apply_sql",
    "catalog_digest",
    "catalog_tables",
    "connect_catalog",
    "connect_tables",
    "fetch_frame",
    "fetch_rows",
    "first_line",
    "home",
    "parquet_files_sql",
    "register_functions",
    "shadow_files",
    "sibling",
    "sql_files",
    "table_sql",
    "to_frame",
]

#: A table of the catalog: its name and whether it is a run child (visible via ``runs``).
TableInfo = tuple[str, bool]

#: The sources whose bytes decide the prepared catalog's content (with sql/ and DuckDB's
#: version): the schema and this module. Hashing them, rather than the Arrow schemas,
#: keeps pyarrow out of a query command's start.
_CATALOG_SOURCES = (Path(__file__).parents[1] / "schema" / "arrow.py",
                    Path(__file__).parents[1] / "schema" / "evolution.py", Path(__file__),
                    Path(__file__).with_name("graphalign.py"), Path(__file__).with_name("views.py"),
                    Path(__file__).with_name("udfs.py"), Path(__file__).with_name("reads.py"))

def apply_sql(con: duckdb.DuckDBPyConnection, *, sql_dir: Path = SQL_DIR) -> None:
    """Run every ``sql/*.sql`` file on ``con`` in file-name order.

    The Python functions ``sql/`` calls are registered first (a macro naming one is bound
    when it is defined: :mod:`tracewh.query.udfs`). A file that fails raises :class:`SqlDefinitionError` naming it (one line in the CLI).
    """
    register_functions(con)
    for path in sql_files(sql_dir):
        try:
            con.execute(path.read_text(encoding="utf-8"))
        except duckdb.Error as exc:
            raise SqlDefinitionError(path, first_line(exc)) from exc


def catalog_digest(*, sql_dir: Path = SQL_DIR) -> str:
    """sha256 of what a prepared catalog is built from: the DuckDB version, the schema
    and this module's source, and every ``sql/*.sql`` file (name and bytes).

    Hashing the sources, rather than the Arrow schemas, keeps pyarrow out of a query
    command's start.
    """
    h = hashlib.sha256(duckdb.__version__.encode())
    for source in _CATALOG_SOURCES:
        h.update(source.read_bytes())
    for path in sql_files(sql_dir):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def catalog_path(*, sql_dir: Path = SQL_DIR, cache_dir: Path | None = None) -> Path | None:
    """Where the prepared catalog for these ``sql/`` files, this schema and DuckDB lives.

    ``cache_dir`` (default ``~/.cache/tracewh``, see :mod:`tracewh.core.cache`) when it is a
    private folder of this user, else None (no catalog file is used). The name carries
    the first 16 digits of :func:`catalog_digest`, so a change of any source gets a new
    catalog; the file records the whole digest.
    """
    folder = cache_folder(cache_dir)
    if folder is None:
        return None
    return folder / f"catalog-{catalog_digest(sql_dir=sql_dir)[:16]}.duckdb"


def _build_catalog(path: Path, sql_dir: Path, digest: str) -> None:
    """Write a DuckDB file holding every view and macro over empty ``raw_<table>`` tables.

    It records the digest it was built from (``tracewh_catalog``) and is 0600.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.unlink(tmp)  # DuckDB creates the file itself
    try:
        con = duckdb.connect(tmp)
        try:
            _define(con, sql_dir)
            con.execute("CREATE TABLE tracewh_catalog AS SELECT ? AS sql_sha256", [digest])
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
        Path(tmp + ".wal").unlink(missing_ok=True)


def _define(con: duckdb.DuckDBPyConnection, sql_dir: Path) -> None:
    """Every base view, ``sql/`` definition, ``tw_tables`` and ``tw_reads`` row, over empty tables."""
    from tracewh.query.reads import write_reads

    create_raw_relations(con, {})
    create_visible_views(con)
    apply_sql(con, sql_dir=sql_dir)
    _write_table_info(con)
    write_reads(con, [name for name, _ in catalog_tables(con)])


def _write_table_info(con: duckdb.DuckDBPyConnection) -> None:
    """Store each table's name, kind and typed select lists in the catalog (``tw_tables``).

    A query session reads them from there, so it never imports the Arrow schemas.
    ``select_list`` reads Arrow tables, ``files_select_list`` data files (``day``
    from the file's folder name, see :func:`parquet_files_sql`).
    """
    from tracewh.schema.arrow import SCHEMA_KEY, TABLES

    con.execute(
        "CREATE TABLE tw_tables (position INTEGER, name VARCHAR, run_child BOOLEAN, "
        "select_list VARCHAR, null_list VARCHAR, files_select_list VARCHAR)"
    )
    con.executemany(
        "INSERT INTO tw_tables VALUES (?, ?, ?, ?, ?, ?)",
        [[i, name, spec.is_run_child, select_list(name), null_list(name),
          select_list(name, from_files=True)]
         for i, (name, spec) in enumerate(TABLES.items())],
    )
    con.execute("CREATE TABLE tw_schema AS SELECT ?::VARCHAR AS schema_key", [SCHEMA_KEY])


def catalog_tables(con: duckdb.DuckDBPyConnection) -> list[TableInfo]:
    """The tables of a catalog connection (:func:`connect_catalog`), in schema order."""
    return [(str(n), bool(c)) for n, c in con.execute(
        "SELECT name, run_child FROM main.tw_tables ORDER BY position"
    ).fetchall()]


def catalog_schema_key(con: duckdb.DuckDBPyConnection) -> str:
    """The :data:`~tracewh.schema.arrow.SCHEMA_KEY` the catalog of ``con`` was built for."""
    return str(con.execute("SELECT schema_key FROM main.tw_schema").fetchall()[0][0])


def _open_trusted(path: Path, digest: str) -> duckdb.DuckDBPyConnection | None:
    """A connection using the catalog at ``path`` if it is ours and built from ``digest``.

    The catalog is attached read-only to a fresh in-memory database (and made the
    default one) rather than opened with ``duckdb.connect(path)``: connections to one
    file share one DuckDB instance per process, so a setting one of them locks
    (:func:`tracewh.query.sqlguard.confine`) would be locked for every later one.
    The Python functions of :mod:`tracewh.query.udfs` are not registered here: a query
    that needs one registers them (:func:`tracewh.query.udfs.with_functions`), so a
    connection that never calls one never imports numpy.
    """
    if not own_file(path):
        return None
    con = duckdb.connect()
    try:
        con.execute("ATTACH ? AS tw_catalog (READ_ONLY)", [str(path)])
        con.execute("USE tw_catalog")
        row = con.execute("SELECT sql_sha256 FROM tw_catalog.main.tracewh_catalog").fetchone()
    except duckdb.Error:
        row = None
    if row is None or row[0] != digest:
        con.close()
        return None
    return con


def _quoted(name: str) -> str:
    """``name`` as a DuckDB identifier."""
    return '"' + name.replace('"', '""') + '"'


def home(con: duckdb.DuckDBPyConnection) -> tuple[str, str]:
    """``con``'s default catalog and schema (what :func:`sibling` connections start on)."""
    db, schema = con.execute("SELECT current_database(), current_schema()").fetchall()[0]
    return str(db), str(schema)


def sibling(con: duckdb.DuckDBPyConnection, at: tuple[str, str]) -> duckdb.DuckDBPyConnection:
    """Another connection to ``con``'s database, on catalog and schema ``at`` (:func:`home`).

    It shares the database's attached catalog, settings (locked ones stay locked), memory
    limit, spill folder, caches and threads; its TEMP views are its own, while a Python
    function registered on any of them is seen by all (:func:`tracewh.query.udfs.register_functions`). Opening one costs microseconds, not the ~0.05 s of a
    new database (:func:`connect_catalog`). ``con`` may be running a query meanwhile
    (:func:`home` is asked of it beforehand).
    """
    other = con.cursor()
    try:
        other.execute(f"USE {_quoted(at[0])}.{_quoted(at[1])}")
    except BaseException:
        other.close()
        raise
    return other


def connect_catalog(
    *, sql_dir: Path = SQL_DIR, cache_dir: Path | None = None, memory_limit: str | None = None,
    temp_directory: str | None = None,
) -> duckdb.DuckDBPyConnection:
    """A connection holding every view and macro of ``sql/`` over empty ``raw_<table>`` tables.

    Views and macros are stored as definitions; a session shadows the empty tables
    with TEMP views over the snapshot's files (:func:`shadow_files`), so nothing is
    bound until a query uses it. The prepared catalog (a DuckDB file in the user's
    private cache folder, see :mod:`tracewh.core.cache`) saves defining the ~60 ``sql/``
    definitions on every connection (0.12 s instead of 1.4 s). It is trusted only as
    a file of this user no one else can write, in a folder no one else can enter, and
    only when it records the digest of the SQL it must hold (:func:`catalog_digest`);
    anything else is rebuilt, and where no such folder can be had the definitions are
    made in memory (same results, slower). ``memory_limit`` and ``temp_directory`` are
    DuckDB's (:class:`tracewh.query.settings.QuerySettings`; ``None``: left as they are).
    """
    folder = cache_folder(cache_dir)
    if folder is not None:
        digest = catalog_digest(sql_dir=sql_dir)
        path = folder / f"catalog-{digest[:16]}.duckdb"
        for _ in range(2):
            if path.exists() or path.is_symlink():
                con = _open_trusted(path, digest)
                if con is not None:
                    _settings(con, memory_limit, temp_directory)
                    return con
                with contextlib.suppress(OSError):
                    path.unlink()  # stale, damaged or not ours: built again
            try:
                _build_catalog(path, sql_dir, digest)
            except SqlDefinitionError:
                raise  # the same in memory: say which file, once
            except (OSError, duckdb.Error):
                break
    con = duckdb.connect()
    _define(con, sql_dir)
    # every catalog connection (Warehouse's too): without the settings a query over ~2 s
    # draws DuckDB's progress bar on stdout, into `--format json` output
    _settings(con, memory_limit, temp_directory)
    return con


#: the connection variable in which :func:`shadow_files` keeps what it defined
_SHADOWED = "tw_shadowed"
_UNKNOWN = "unknown"


def table_sql(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str, str]]:
    """Each table's name, select list, typed NULL list and file select list (``tw_tables``
    of a catalog connection): what :func:`shadow_files` builds its views from."""
    return [(str(n), str(s), str(nl), str(f)) for n, s, nl, f in con.execute(
        "SELECT name, select_list, null_list, files_select_list FROM main.tw_tables"
    ).fetchall()]


def shadow_files(
    con: duckdb.DuckDBPyConnection,
    files: Mapping[str, Sequence[str]],
    tables: Mapping[str, pa.Table | pa.RecordBatchReader] | None = None,
    *,
    reset: bool = False,
    partial: Collection[str] = (),
    unbound: Collection[str] = (),
    sql_of: Sequence[tuple[str, str, str, str]] | None = None,
) -> None:
    """Point a catalog connection's ``raw_<table>`` at the snapshot's ``files`` (TEMP views).

    ``tables``: in-memory Arrow tables that replace some ``raw_<table>`` instead.
    Tables with neither keep the catalog's empty placeholder, or, with ``reset``
    (a connection shadowed before), get it back when ``files`` names them with no
    file; tables ``files`` does not name are left as they are. Tables in ``partial``
    are read by column name (:func:`files_sql`). Tables in ``unbound`` (a query does not read
    them: :mod:`tracewh.query.reads`) become a view that raises when it is read.
    ``sql_of``: the catalog's :func:`table_sql` where the caller has it (else read here).
    """
    from tracewh.query.reads import unbound_sql

    tables = tables or {}
    rows = table_sql(con) if sql_of is None else sql_of
    nulls = {str(name): str(null_list) for name, _, null_list, _ in rows}
    from_files = {str(name): str(f) for name, _, _, f in rows}
    selects = {str(name): str(sel) for name, sel, _, _ in rows}
    # what each raw_<table> of this connection points at now (its view's SQL, "" for an
    # Arrow table; absent: the placeholder), kept in a connection variable: a view that
    # would be defined again over the same files is kept, which spares a reused
    # connection ~20 DDL statements (and their footer reads) per call
    held = con.execute(f"SELECT getvariable('{_SHADOWED}')").fetchall()[0][0]
    # unknown (a previous call failed half-way): every view is defined again
    known = held != _UNKNOWN
    shadowed: dict[str, str] = json.loads(held) if held and known else {}
    now = dict(shadowed)
    con.execute(f"SET VARIABLE {_SHADOWED} = {sql_string(_UNKNOWN)}")
    for name, select_sql in selects.items():
        paths = list(files.get(name, ()))
        if name in unbound and name not in tables:
            sql = unbound_sql(name, nulls[name])
            if now.get(name) != sql or not known:
                if now.get(name) == "":
                    con.execute(f"DROP TABLE IF EXISTS temp.raw_{name}")
                con.execute(f"CREATE OR REPLACE TEMP VIEW raw_{name} AS {sql}")
                now[name] = sql
        elif name in tables:
            con.register(f"__arrow_{name}", tables[name])
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE raw_{name} AS "
                f"SELECT {select_sql} FROM __arrow_{name}"
            )
            con.unregister(f"__arrow_{name}")
            now[name] = ""  # a table, not a view: defined again whatever comes next
        elif not paths:
            if reset and name in files and (name in now or not known):
                kind = "TABLE" if now.pop(name, None) == "" else "VIEW"
                con.execute(f"DROP {kind} IF EXISTS temp.raw_{name}")
        else:
            sql = files_sql(from_files[name], paths,
                            null_list=nulls[name] if name in partial else None)
            if now.get(name) != sql or not known:
                if now.get(name) == "":
                    con.execute(f"DROP TABLE IF EXISTS temp.raw_{name}")
                con.execute(f"CREATE OR REPLACE TEMP VIEW raw_{name} AS {sql}")
                now[name] = sql
    con.execute(f"SET VARIABLE {_SHADOWED} = {sql_string(json.dumps(now))}")


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
        register_functions(con)  # the caller runs any SQL on it, without with_functions
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
            f"CREATE OR REPLACE TABLE raw_{name} AS SELECT {select_list(name)} FROM __arrow_{name}"
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
