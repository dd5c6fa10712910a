"""``insert_rows``: the rows ``executemany`` inserts, in one statement."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import duckdb
import pytest

from tracewh.schema.plain import tables
from tracewh.storage.bulk import insert_rows

COLUMNS = [("s", "VARCHAR"), ("n", "BIGINT"), ("i", "INTEGER"), ("b", "BOOLEAN"),
           ("d", "DATE"), ("t", "TIMESTAMPTZ"), ("l", "VARCHAR[]"), ("x", "DOUBLE"),
           ("never", "VARCHAR")]
ROWS = [
    {"s": "a'b", "n": 2**62, "i": -3, "b": True, "d": date(2024, 2, 29),
     "t": datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=UTC), "l": ["x", None, ""], "x": 1.5},
    {"s": None, "n": None, "i": None, "b": None, "d": None, "t": None, "l": None, "x": None},
    {"s": "é\u2603", "n": 0, "i": 7, "b": False, "d": date(1970, 1, 1),
     "t": datetime(2023, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=2))), "l": [], "x": 3},
]


def _table(con: duckdb.DuckDBPyConnection, columns: list[tuple[str, str]]) -> None:
    con.execute(f"CREATE TABLE t ({', '.join(f'{n} {k}' for n, k in columns)})")


@pytest.mark.parametrize("rows", [ROWS, ROWS[:1], ROWS * 200])
def test_insert_rows_equals_executemany(rows: list[dict[str, object]]) -> None:
    one, many = duckdb.connect(), duckdb.connect()
    for con in (one, many):
        con.execute("SET TimeZone = 'UTC'")
        _table(con, COLUMNS)
    insert_rows(one, "t", COLUMNS, rows)
    many.executemany(f"INSERT INTO t VALUES ({', '.join('?' for _ in COLUMNS)})",
                     [[r.get(n) for n, _ in COLUMNS] for r in rows])
    got = one.execute("SELECT * FROM t").fetchall()
    assert got == many.execute("SELECT * FROM t").fetchall()  # same values, same order
    assert len(got) == len(rows) and got[0][0] == rows[0]["s"]


def test_no_rows_insert_nothing() -> None:
    con = duckdb.connect()
    _table(con, COLUMNS)
    insert_rows(con, "t", COLUMNS, [])
    assert con.execute("SELECT count(*) FROM t").fetchall() == [(0,)]


def test_every_column_of_runs() -> None:
    """Every type ``runs`` declares goes through (its rows are inserted this way at each commit)."""
    spec = tables()["runs"]
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t ({spec.column_defs()})")
    insert_rows(con, "t", spec.columns, [{"run_id": "r1"}, {}])
    assert con.execute("SELECT run_id FROM t").fetchall() == [("r1",), (None,)]
