"""tracewh.query.fetch: one statement run once, scripts and commands as before."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import duckdb
import pytest

from tracewh.core.errors import QueryError
from tracewh.query.fetch import fetch_frame, fetch_rows, query_frame, to_frame

QUERY = ("SELECT $n::INTEGER AS n, [1, 2] AS l, {'a': $n} AS s, TIMESTAMP '2026-01-02 03:04:05' AS t, "
         "2.5::DECIMAL(10, 2) AS d, 'x' AS v, NULL::VARCHAR AS missing")


class Recording:
    """A connection that counts the calls that plan a statement (``sql`` binds; ``_submit`` runs)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.calls: list[str] = []

    def sql(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("sql")
        return self.con.sql(*args, **kwargs)

    def _submit(self, *args: Any) -> Any:
        self.calls.append("_submit")
        return self.con._submit(*args)

    def execute(self, *args: Any) -> Any:
        self.calls.append("execute")
        return self.con.execute(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.con, name)


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    return duckdb.connect()


def test_a_select_is_the_same_frame_as_through_a_relation(con: duckdb.DuckDBPyConnection) -> None:
    direct = query_frame(con, QUERY, {"n": 3})
    assert direct is not None
    assert direct.equals(to_frame(con.sql(QUERY, params={"n": 3})))
    assert direct.schema == to_frame(con.sql(QUERY, params={"n": 3})).schema
    assert direct.row(0) == (3, [1, 2], {"a": 3}, dt.datetime(2026, 1, 2, 3, 4, 5), Decimal("2.50"), "x", None)
    positional = query_frame(con, "SELECT ?::INTEGER AS n", [7])
    assert positional is not None and positional.to_dicts() == [{"n": 7}]


@pytest.mark.skipif(not hasattr(duckdb.connect(), "_submit"), reason="a DuckDB without _submit")
def test_a_select_is_planned_once_and_a_script_as_before(con: duckdb.DuckDBPyConnection) -> None:
    rec = Recording(con)
    query_frame(rec, "  -- a comment first\n  WITH x AS (SELECT 1 AS a) SELECT * FROM x")  # type: ignore[arg-type]
    query_frame(rec, "FROM range(3)")  # type: ignore[arg-type]
    assert rec.calls == ["_submit", "_submit"]
    rec.calls.clear()
    # a script, a command and a SELECT whose text holds a ';' go through con.sql()
    script = query_frame(rec, "CREATE TEMP TABLE t AS SELECT 1 AS a; SELECT a + 1 AS b FROM t")  # type: ignore[arg-type]
    assert script is not None and script.to_dicts() == [{"b": 2}]
    query_frame(rec, "SET threads = 1")  # type: ignore[arg-type]
    semi = query_frame(rec, "SELECT ';' AS c")  # type: ignore[arg-type]
    assert semi is not None and semi.to_dicts() == [{"c": ";"}]
    # what does not begin as a SELECT does (a block comment, a parenthesis, VALUES, EXPLAIN)
    for other in ("/* c */ SELECT 1 AS a", "(SELECT 1 AS a)", "VALUES (1)", "EXPLAIN SELECT 1"):
        assert query_frame(rec, other) is not None  # type: ignore[arg-type]
    assert rec.calls == ["sql"] * 7
    rec.calls.clear()
    # plain rows: one execute, no relation
    rows = fetch_rows(rec, "SELECT 1 AS a")  # type: ignore[arg-type]
    assert rows.rows == [(1,)] and rec.calls == ["execute"]


@pytest.mark.skipif(not hasattr(duckdb.connect(), "_submit"), reason="a DuckDB without _submit")
def test_names_that_are_one_name_to_duckdb_are_refused_as_before(con: duckdb.DuckDBPyConnection) -> None:
    rec = Recording(con)
    for fetch in (fetch_frame, fetch_rows):
        with pytest.raises(QueryError):
            fetch(rec, "SELECT $a AS a", {"a": 1, "A": 2})  # type: ignore[arg-type]
    assert "_submit" not in rec.calls


def test_rows_as_plain_values_and_commands_without_rows(con: duckdb.DuckDBPyConnection) -> None:
    rows = fetch_rows(con, QUERY, {"n": 3})
    assert rows.columns == ["n", "l", "s", "t", "d", "v", "missing"]
    assert rows.types == ["INTEGER", "INTEGER[]", "STRUCT(a INTEGER)", "TIMESTAMP", "DECIMAL(10,2)",
                          "VARCHAR", "VARCHAR"]
    assert rows.rows == [(3, [1, 2], {"a": 3}, dt.datetime(2026, 1, 2, 3, 4, 5), Decimal("2.50"), "x", None)]
    assert fetch_rows(con, "SET threads = 2").rows == []
    assert fetch_frame(con, "SET threads = 2").is_empty()


def test_errors_name_the_query_on_both_paths(con: duckdb.DuckDBPyConnection) -> None:
    for query in ("SELECT * FROM nowhere", "SELECT 1; SELECT * FROM nowhere"):
        with pytest.raises(QueryError, match="nowhere"):
            fetch_frame(con, query)
        with pytest.raises(QueryError, match="nowhere"):
            fetch_rows(con, query)
    with pytest.raises(QueryError, match="excess parameters"):
        fetch_frame(con, "SELECT $a AS a", {"a": 1, "b": 2})
