"""The session's connections (``tracewh.query.connections``): DuckDB's threads for the
threads that query a session at once."""

from __future__ import annotations

import threading

import duckdb
import pytest

from tracewh.api import Warehouse
from tracewh.query.connections import session_threads


@pytest.mark.parametrize(("cores", "callers", "want"), [(2, 1, 2), (2, 3, 1), (16, 3, 14), (1, 3, 1)])
def test_duckdb_threads_leave_room_for_the_callers(cores: int, callers: int, want: int) -> None:
    con = duckdb.connect()
    con.execute(f"SET threads = {cores}")
    assert session_threads(con, callers) == want


def _threads(w: Warehouse) -> int:
    pinned = w.catalog.pinned
    assert pinned is not None
    return int(pinned.con.execute("SELECT current_setting('threads')").fetchall()[0][0])


def test_a_session_for_three_callers_has_fewer_duckdb_threads(two_days: Warehouse) -> None:
    default = int(duckdb.connect().execute("SELECT current_setting('threads')").fetchall()[0][0])
    w = Warehouse(two_days.root)
    with w.session():
        assert _threads(w) == default
    with w.session(query_threads=3):
        assert _threads(w) == max(1, default - 2)
        # every caller's connection is the same database: the same threads, and the
        # answers of one
        got: list[int] = []
        callers = [threading.Thread(target=lambda: got.append(
            int(w.sql("SELECT count(*) AS n FROM gpu_ops")["n"][0]))) for _ in range(2)]
        for t in callers:
            t.start()
        for t in callers:
            t.join()
        assert len(got) == 2 and got[0] == got[1] == w.sql("SELECT count(*) AS n FROM gpu_ops")["n"][0] > 0
        # nested: the outer session's connection and threads
        with w.session():
            assert _threads(w) == max(1, default - 2)
