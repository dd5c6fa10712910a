"""The Python scalar functions of sql/ are registered on a query connection only when needed.

A query connection of the prepared catalog starts without ``graph_align`` (registering a
Python function makes DuckDB import numpy); a statement naming it, directly or through the
macros of ``sql/45_graphs.sql``, registers it and runs once more with the same result.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tracewh.core.errors import QueryError
from tracewh.query.db import connect_catalog
from tracewh.query.fetch import fetch_rows
from tracewh.query.udfs import missing_function, register_functions, with_functions


def _has_graph_align(con: duckdb.DuckDBPyConnection) -> bool:
    return bool(con.execute(
        "SELECT count(*) FROM duckdb_functions() WHERE function_name = 'graph_align'"
    ).fetchall()[0][0])


def test_catalog_connection_registers_on_first_use(tmp_path: Path) -> None:
    con = connect_catalog(cache_dir=tmp_path / "cache")  # built, then opened from the file
    con.close()
    con = connect_catalog(cache_dir=tmp_path / "cache")
    try:
        assert not _has_graph_align(con)
        rows = fetch_rows(con, "SELECT graph_align(['a', 'b', 'c'], ['a', 'c']) AS node_of")
        assert rows.rows == [([1, None, 2],)]  # 1-based capture nodes
        assert _has_graph_align(con)
        # a macro of sql/45_graphs.sql over the catalog's empty tables binds and runs
        assert fetch_rows(con, "SELECT * FROM graph_replay_map('r')").rows == []
    finally:
        con.close()


def test_other_errors_are_not_retried() -> None:
    con = duckdb.connect()
    calls = []

    def run() -> None:
        calls.append(1)
        con.execute("SELECT no_such_function(1)")

    with pytest.raises(duckdb.CatalogException) as info:
        with_functions(con, run)
    assert not missing_function(info.value)
    assert calls == [1]
    with pytest.raises(QueryError):
        fetch_rows(con, "SELECT no_such_function(1)")


def test_a_query_connection_does_not_import_numpy(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\nfrom tracewh.query.db import connect_catalog\n"
        f"con = connect_catalog(cache_dir=Path({str(tmp_path / 'cache')!r}))\n"
        "con.execute('SELECT count(*) FROM kernel_stats').fetchall()\n"
        "print('numpy' in sys.modules)\n"
    )
    connect_catalog(cache_dir=tmp_path / "cache").close()  # built here, in this process
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_connections_to_one_database_each_register_without_error() -> None:
    # a session's threads query through connections to one database (tracewh.query.db.sibling):
    # the function one of them registered is visible to the others, which cannot remove it
    con = duckdb.connect()
    other = con.cursor()
    try:
        register_functions(con)
        register_functions(other)
        register_functions(con)  # again on the first: replaced
        for c in (con, other):
            got = c.execute("SELECT graph_align(['a', 'b'], ['b'])").fetchall()
            assert got == [([None, 1],)]
    finally:
        other.close()
        con.close()
