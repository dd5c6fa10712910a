"""tracewh.query.fetch.fetch_head: the first rows of a query, read no further, and whether it had more."""

from __future__ import annotations

import duckdb
import pytest

from tracewh.core.errors import QueryError
from tracewh.query.fetch import fetch_frame, fetch_head


def test_first_rows_and_truncation() -> None:
    con = duckdb.connect()
    head, more = fetch_head(con, "SELECT range AS i, 'x' || range AS s FROM range(200000)", max_rows=5)
    assert more and head["i"].to_list() == [0, 1, 2, 3, 4] and head.columns == ["i", "s"]
    whole, more = fetch_head(con, "SELECT range AS i FROM range(5)", max_rows=5)
    assert not more and whole.equals(fetch_frame(con, "SELECT range AS i FROM range(5)"))
    empty, more = fetch_head(con, "SELECT 1 AS x WHERE false", max_rows=3)
    assert not more and empty.columns == ["x"] and empty.height == 0
    shown, more = fetch_head(con, "SELECT $v AS v", {"v": 7}, max_rows=1)
    assert not more and shown["v"].to_list() == [7]


def test_a_failed_query_is_a_query_error() -> None:
    with pytest.raises(QueryError, match="query failed"):
        fetch_head(duckdb.connect(), "SELECT * FROM no_such_table", max_rows=1)
