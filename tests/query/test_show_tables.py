"""`SHOW TABLES` in `tracewh sql` lists each table, view and table macro once."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.core.sqlfiles import sql_files
from tracewh.schema import TABLES
from tracewh.synth import SynthConfig, write_trace


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    base = tmp_path_factory.mktemp("show")
    trace = base / "t.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=1, layers=1, seed=3))
    wh = Warehouse(base / "wh")
    assert wh.ingest([trace]).ok
    return wh


def _defined(kind: str) -> set[str]:
    """Names the sql/ files define as views or table macros (read from the files)."""
    names: set[str] = set()
    for path in sql_files():
        text = path.read_text(encoding="utf-8")
        if kind == "view":
            names |= set(re.findall(r"CREATE OR REPLACE VIEW (\w+)", text))
        else:  # a table macro: AS TABLE after its parameters
            names |= set(re.findall(r"CREATE OR REPLACE MACRO (\w+)\s*\([^)]*\)\s*AS\s+TABLE", text))
    return {n for n in names if not n.startswith("tw_")}


@pytest.mark.parametrize("spelling", ["SHOW TABLES", "show tables;", "  Show  Tables ; "])
def test_show_tables_lists_each_name_once(wh: Warehouse, spelling: str) -> None:
    rows = wh.relation(spelling).rows().rows
    names = [r[0] for r in rows]
    assert len(names) == len(set(names)), "a name listed twice"
    assert names == sorted(names)
    kinds = dict((r[0], r[1]) for r in rows)
    for table in TABLES:  # every warehouse table: its visible rows, and its raw files once
        assert kinds[table] == "table", table
        assert kinds[f"raw_{table}"] == "raw table", table
    views = _defined("view") - set(TABLES)
    macros = _defined("table macro")
    assert len(macros) > 30
    assert {n for n, k in kinds.items() if k == "view"} == views
    assert {n for n, k in kinds.items() if k == "table macro"} == macros
    assert not [n for n in names if n.startswith("tw_") or n == "tracewh_catalog"]


def test_show_tables_in_the_cli_and_other_show_statements(wh: Warehouse) -> None:
    res = CliRunner().invoke(app, ["sql", "SHOW TABLES", "-w", str(wh.root), "--format", "csv"])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == "name,kind"
    assert "raw_gpu_ops,raw table" in lines and "stream_gaps,table macro" in lines
    assert len(lines) == len(set(lines))
    # DuckDB's other SHOW forms are left alone
    res = CliRunner().invoke(app, ["sql", "SHOW gpu_ops", "-w", str(wh.root), "--format", "csv"])
    assert res.exit_code == 0 and res.stdout.startswith("column_name,")
