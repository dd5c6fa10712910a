"""The one way to run SQL and to call a macro: relations turned into Polars, Arrow or rows."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import pytest

from tracewh.api import Warehouse
from tracewh.query.fetch import Rows
from tracewh.query.relation import MacroRelation, Relation
from tracewh.synth import SynthConfig, write_trace


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    folder = tmp_path_factory.mktemp("relation")
    path = folder / "n1.pt.trace.json.gz"
    write_trace(path, SynthConfig(steps=2, layers=1, seed=5, night=dt.date(2025, 1, 1)))
    w = Warehouse(folder / "wh")
    assert w.ingest([path]).ok
    return w


def test_a_relation_gives_the_same_rows_as_polars_arrow_and_plain_rows(wh: Warehouse) -> None:
    query = "SELECT name, count(*) AS n FROM gpu_ops GROUP BY name ORDER BY n DESC, name"
    rel = wh.relation(query)
    assert isinstance(rel, Relation)
    frame, table, rows = rel.pl(), rel.arrow(), rel.rows()
    assert isinstance(rows, Rows) and rows.columns == ["name", "n"]
    # independent of tracewh's fetch: the same query on a plain DuckDB connection
    with wh.connect() as con:
        expected = con.execute(query).fetchall()
    assert rows.rows == expected
    assert list(frame.iter_rows()) == expected
    assert list(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True)) == expected
    assert wh.sql(query).equals(frame)  # the Polars shortcut


def test_a_macro_relation_resolves_the_run_once_and_converts_alike(wh: Warehouse) -> None:
    rel = wh.macro_relation("stream_gaps", "latest", kernel_wait_threshold_ns=30_000)
    assert isinstance(rel, MacroRelation)
    ref, rows = rel.fetch("rows")
    assert ref.run_id == wh.resolve_run("latest").run_id
    with wh.connect() as con:
        expected = con.execute("SELECT * FROM stream_gaps(?, kernel_wait_threshold_ns := 30000)",
                               [ref.run_id]).fetchall()
    assert rows.rows == expected
    assert list(rel.pl().iter_rows()) == expected
    assert rel.arrow().num_rows == len(expected)
    assert wh.macro("stream_gaps", "latest", kernel_wait_threshold_ns=30_000).equals(rel.pl())


def test_nothing_runs_until_a_relation_is_converted(wh: Warehouse) -> None:
    rel = wh.relation("SELECT * FROM no_such_view")  # not run: no error yet
    from tracewh.core.errors import QueryError

    with pytest.raises(QueryError):
        rel.rows()


def test_the_old_duplicates_warn_and_give_the_same_results(wh: Warehouse) -> None:
    query = "SELECT run_id, day FROM runs"
    with pytest.warns(DeprecationWarning, match=r"Warehouse.query\(\) is deprecated"):
        old = wh.query(query)
    assert old == wh.relation(query).rows()
    with pytest.warns(DeprecationWarning, match="macro_rows"):
        rows = wh.macro_rows("memcpy_summary")
    assert rows == wh.macro_relation("memcpy_summary").rows()
    with pytest.warns(DeprecationWarning, match="run_macro"):
        ref, frame = wh.run_macro("memcpy_summary")
    assert ref == wh.resolve_run("latest") and frame.equals(wh.macro("memcpy_summary"))


def test_relations_are_read_only_unless_unrestricted(wh: Warehouse, tmp_path: Path) -> None:
    from tracewh.core.errors import QueryError

    with pytest.raises(QueryError):
        wh.relation("CREATE TABLE t AS SELECT 1").rows()
    out = tmp_path / "x.db"
    wh.relation(f"ATTACH '{out}' AS x", unrestricted=True).rows()
    assert out.exists()  # the statement ran: a DuckDB database file was created
    duckdb.connect(str(out)).close()
