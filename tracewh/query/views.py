"""The SQL of the views over a snapshot's files: ``raw_<table>`` and the visible base views.

``raw_<table>`` reads the Parquet files of the current snapshot (typed as
:mod:`tracewh.schema.arrow` says, ``day`` from each file's folder name), or is an empty typed
table; each run child table's base view keeps the rows whose ``(run_id, ingest_id)`` is in
``runs`` (what makes an ingest atomic for readers). Used by :mod:`tracewh.query.db`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import duckdb

from tracewh.core.sqlfiles import glob_escaped, sql_string
from tracewh.schema.plain import duck_type

__all__ = [
    "create_raw_relations", "create_visible_views", "files_sql", "null_list", "parquet_files_sql",
    "select_list", "table_columns_sql",
]


def table_columns_sql(table: str) -> str:
    """``col TYPE, ...`` for a warehouse table, from its Arrow schema."""
    from tracewh.schema.arrow import TABLES

    schema = TABLES[table].schema
    return ", ".join(f'"{f.name}" {duck_type(f.type)}' for f in schema)


#: The partition value of a data file, from its own folder name (``.../day=2025-01-08/x.parquet``).
_DAY_OF_FILE = "CAST(regexp_extract(filename, '/day=([0-9]{4}-[0-9]{2}-[0-9]{2})/[^/]*$', 1) AS DATE)"


def select_list(table: str, *, from_files: bool = False) -> str:
    """Every column of ``table``, cast to its schema type; from files, ``day`` from the file name."""
    from tracewh.schema.arrow import TABLES

    spec = TABLES[table]
    cols = []
    for f in spec.schema:
        expr = _DAY_OF_FILE if from_files and f.name in spec.partition_by else f'"{f.name}"'
        cols.append(f'CAST({expr} AS {duck_type(f.type)}) AS "{f.name}"')
    return ", ".join(cols)


def null_list(table: str) -> str:
    """``CAST(NULL AS type) AS "col", ...`` of every column of ``table`` (an empty typed row)."""
    from tracewh.schema.arrow import TABLES

    schema = TABLES[table].schema
    return ", ".join(f'CAST(NULL AS {duck_type(f.type)}) AS "{f.name}"' for f in schema)


def files_sql(select_list: str, paths: Sequence[str], *, null_list: str | None = None) -> str:
    """``SELECT <select_list>`` of Parquet ``paths`` (a table's snapshot files).

    ``select_list`` reads the files' columns and ``filename`` (the file's path: the
    partition value comes from the file's own folder name, see :func:`select_list` with
    ``from_files=True``). Hive partitioning is off: DuckDB would read every ``key=value``
    folder of the *whole* path, so a warehouse under ``/data/run_id=x/`` got ``run_id`` =
    ``x`` on every row; glob characters of the paths match literally (:func:`glob_escaped`).
    DDL takes no parameters: the snapshot's file paths (from the Delta log, not user
    input) become SQL string literals, quotes doubled. With ``null_list`` (a *partial*
    table: some files written before columns were added to it), the files are read by
    column name (``union_by_name``) and united by name with an empty typed row set, so
    a column no file has reads NULL; otherwise every file has every column and binding
    reads one footer.
    """
    listing = ", ".join(sql_string(glob_escaped(p)) for p in paths)
    options = "hive_partitioning = false, filename = true"
    if null_list is None:
        source = f"read_parquet([{listing}], {options})"
    else:
        source = (
            f"(SELECT * FROM read_parquet([{listing}], {options}, union_by_name = true) "
            f"UNION ALL BY NAME SELECT {null_list}, CAST(NULL AS VARCHAR) AS filename WHERE false)"
        )
    return f"SELECT {select_list} FROM {source}"


def parquet_files_sql(table: str, paths: Sequence[str]) -> str:
    """``SELECT`` of every row of ``table`` from its data files, typed as the schema
    (:func:`files_sql` with the table's select list; files with every column)."""
    return files_sql(select_list(table, from_files=True), paths)


def create_raw_relations(
    con: duckdb.DuckDBPyConnection,
    files: Mapping[str, Sequence[str]],
    partial: Collection[str] = (),
) -> None:
    """Create ``raw_<table>`` views over Parquet files (or empty typed tables).

    ``files`` maps a table name to the Parquet files of the current snapshot.
    Tables in ``partial`` are read by column name (:func:`files_sql`).
    """
    from tracewh.schema.arrow import TABLES

    for name in TABLES:
        paths = list(files.get(name, ()))
        if paths:
            sql = files_sql(select_list(name, from_files=True), paths,
                            null_list=null_list(name) if name in partial else None)
            con.execute(f"CREATE OR REPLACE VIEW raw_{name} AS {sql}")
        else:
            con.execute(f"CREATE OR REPLACE TABLE raw_{name} ({table_columns_sql(name)})")


def create_visible_views(con: duckdb.DuckDBPyConnection) -> None:
    """Create the base views (one per table) holding visible rows only."""
    from tracewh.schema.arrow import TABLES

    con.execute("CREATE OR REPLACE VIEW runs AS SELECT * FROM raw_runs")
    con.execute("CREATE OR REPLACE VIEW ingest_log AS SELECT * FROM raw_ingest_log")
    for name, spec in TABLES.items():
        if spec.is_run_child:
            con.execute(
                f"CREATE OR REPLACE VIEW {name} AS SELECT t.* FROM raw_{name} t "
                f"SEMI JOIN raw_runs r ON t.run_id = r.run_id AND t.ingest_id = r.ingest_id"
            )
