"""A query's tables (``tracewh.query.reads``): only those are pointed at the snapshot.

A whole-history query at 3,000 runs pointed all 16 tables at 27,000 files (0.7 s) to read
``runs`` and ``run_series``. Now each query binds the tables its names lead to; the others
raise when read, and the session runs the query again over every table (the test suite
runs with ``TRACEWH_STRICT_READS=1``, so a miss fails instead).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tracewh.api import Warehouse
from tracewh.core.errors import QueryError
from tracewh.query.db import connect_catalog
from tracewh.query.reads import UNBOUND, ReadMap, is_unbound_error, unbound_sql


@pytest.fixture(scope="module")
def wh(two_days: Warehouse) -> Warehouse:
    return two_days


@pytest.fixture(scope="module")
def read_map() -> ReadMap:
    con = connect_catalog()
    try:
        tables = [str(n) for (n,) in con.execute("SELECT name FROM main.tw_tables").fetchall()]
        return ReadMap.load(con, tables)
    finally:
        con.close()


def test_macros_lead_to_their_tables(read_map: ReadMap) -> None:
    # a per-run macro: the kernels; through other macros and views (kernel_ranking -> ...)
    assert "gpu_ops" in read_map.tables_read("SELECT * FROM kernel_ranking($first)")
    # the history: the series table and the runs (and, for runs the series table lacks,
    # the tables their series are computed from), not every table
    history = read_map.tables_read("SELECT * FROM series_values(since := $s)")
    assert {"run_series", "runs"} <= history
    assert not {"flows", "collectives", "annotation_spans", "threads"} & history
    # a table named in a string literal counts (query_table, read by name)
    assert "steps" in read_map.tables_read("SELECT count(*) FROM query_table('steps')")
    # raw_<table> is its table
    assert read_map.tables_read("SELECT * FROM raw_flows") == {"flows"}
    # no name of the catalog: no table
    assert read_map.tables_read("SELECT 42 AS answer") == frozenset()


def test_a_query_binds_only_its_tables(wh: Warehouse) -> None:
    # inside a session, a query of runs alone leaves every run table unread: their logs
    # are not even read (LiveSnapshot reads a table's log on first use)
    with wh.session():
        wh.relation("SELECT count(*) FROM runs").rows()
        live = wh.catalog.pinned.live  # type: ignore[union-attr]
        assert set(live._got) == {"runs"}  # what was read, and nothing else
        assert wh.relation("SELECT count(*) AS n FROM steps").rows().rows[0][0] > 0
        assert set(live._got) >= {"runs", "steps"}


def test_a_hidden_table_is_an_error_in_strict_mode(wh: Warehouse) -> None:
    # the name is built at run time: no analysis of the text can find it
    hidden = "SELECT count(*) AS n FROM query_table('gpu' || '_ops')"
    with pytest.raises(QueryError, match=UNBOUND):
        wh.relation(hidden).rows()


def test_a_hidden_table_is_read_again_over_every_table(
    wh: Warehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACEWH_STRICT_READS", "0")
    hidden = "SELECT count(*) AS n FROM query_table('gpu' || '_ops')"
    plain = "SELECT count(*) AS n FROM gpu_ops"
    expected = wh.relation(plain).rows().rows
    assert expected[0][0] > 0
    assert wh.relation(hidden).rows().rows == expected
    with wh.session():  # the session's connection too, and it goes on reading after it
        assert wh.relation(hidden).rows().rows == expected
        assert wh.relation(plain).rows().rows == expected
        assert wh.relation("SELECT count(*) FROM runs").rows().rows[0][0] == 2


@pytest.mark.parametrize("query", [
    "SELECT count(*) FROM t",
    "SELECT * FROM t WHERE run_id = 'x'",  # a constant NULL column would fold this away
    "SELECT * FROM t WHERE day = DATE '2025-01-01' AND name IS NULL",
    "SELECT count(*) FROM (SELECT 'x' AS run_id) y SEMI JOIN t USING (run_id)",
])
def test_an_unbound_table_raises_whatever_the_filter(query: str) -> None:
    con = duckdb.connect()
    null_list = ('CAST(NULL AS VARCHAR) AS "run_id", CAST(NULL AS DATE) AS "day", '
                 'CAST(NULL AS VARCHAR) AS "name"')
    con.execute(f"CREATE VIEW t AS {unbound_sql('t', null_list)}")
    with pytest.raises(duckdb.Error) as info:
        con.execute(query).fetchall()
    assert is_unbound_error(info.value)
    # its columns keep their types (views and macros over it bind as over the table)
    assert [r[1] for r in con.execute("DESCRIBE t").fetchall()] == ["VARCHAR", "DATE", "VARCHAR"]


def test_the_catalog_records_what_each_object_reads(tmp_path: Path) -> None:
    # a catalog built in memory (no cache folder) has the map too
    con = connect_catalog(cache_dir=tmp_path / "nowhere" / "x")
    try:
        rows = con.execute("SELECT count(*), count(DISTINCT object_name) FROM main.tw_reads").fetchall()
    finally:
        con.close()
    assert rows[0][0] > 100 and rows[0][1] > 50


def test_the_objects_calling_a_python_function_are_known(read_map: ReadMap) -> None:
    # the graph-replay mapping calls graph_align (tracewh.query.udfs), and so does every
    # macro over it: their connections register the functions before the query runs
    for query in ("SELECT * FROM roofline($first)", "SELECT * FROM module_tree($first)",
                  "SELECT * FROM graph_replay_map('r')", "SELECT graph_align(['a'], ['a'])"):
        assert read_map.calls_functions(query), query
    # a name is a call when a '(' follows it: launch_linkage has a column graph_launches,
    # a query may select one too; neither calls the macro of that name
    for query in ("SELECT * FROM kernel_ranking($first)", "SELECT * FROM series_values()",
                  "SELECT count(*) FROM runs", "SELECT * FROM launch_linkage($first)",
                  "SELECT graph_launches FROM launch_linkage($first)"):
        assert not read_map.calls_functions(query), query


def test_a_query_calling_a_python_function_is_planned_once(
    wh: Warehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    # before, DuckDB planned such a query up to the missing function, then the functions were
    # registered and it was planned again (10-36 ms of a roofline or module query)
    import tracewh.query.udfs as udfs

    misses: list[str] = []
    real = udfs.missing_function

    def counted(exc: BaseException) -> bool:
        found = real(exc)
        if found:
            misses.append(str(exc).splitlines()[0])
        return found

    monkeypatch.setattr(udfs, "missing_function", counted)
    fresh = Warehouse(wh.root)  # its own connections: none has the functions yet
    assert fresh.roofline().width > 0
    fresh.modules()
    with fresh.session():
        fresh.roofline()
    assert misses == []
