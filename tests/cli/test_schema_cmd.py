"""`tracewh schema`: every table, view and table macro of `tracewh sql`, with its columns."""

from __future__ import annotations

import csv
import io
import json
import re

from typer.testing import CliRunner

from tracewh.cli import app
from tracewh.cli.schema_cmd import column_names, header_field
from tracewh.core.sqlfiles import sql_files
from tracewh.schema import TABLES


def _defined() -> tuple[set[str], set[str]]:
    """Views and table macros the sql/ files define (read from the files), helpers left out."""
    views: set[str] = set()
    macros: set[str] = set()
    for path in sql_files():
        text = path.read_text(encoding="utf-8")
        views |= set(re.findall(r"CREATE OR REPLACE VIEW (\w+)", text))
        macros |= set(re.findall(r"CREATE OR REPLACE MACRO (\w+)\s*\([^)]*\)\s*AS\s+TABLE", text))
    return ({v for v in views if not v.startswith("tw_")} - set(TABLES),
            {m for m in macros if not m.startswith("tw_")})


def _invoke(*args: str) -> object:
    return CliRunner().invoke(app, ["schema", *args], env={"COLUMNS": "100"})


def test_json_describes_every_table_view_and_macro() -> None:
    res = _invoke("--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    views, macros = _defined()
    assert [t["name"] for t in doc["tables"]] == list(TABLES)
    for table in doc["tables"]:
        assert [c["name"] for c in table["columns"]] == TABLES[table["name"]].schema.names
        assert table["description"]
    assert {v["name"] for v in doc["views"]} == views
    assert {m["name"] for m in doc["macros"]} == macros
    gaps = next(m for m in doc["macros"] if m["name"] == "stream_gaps")
    assert gaps["signature"].startswith("stream_gaps(run") and "grain:" in gaps["description"]


def test_the_listing_names_each_object_once_with_one_line_and_columns() -> None:
    res = _invoke()
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert all(len(line) <= 100 or " " not in line.strip() for line in lines)
    named = [re.match(r"  (\w+)", line).group(1) for line in lines  # type: ignore[union-attr]
             if re.match(r"  \w", line)]
    views, macros = _defined()
    assert sorted(named) == sorted([*TABLES, *views, *macros])
    assert re.search(r"^Tables \(\d+\)", res.stdout, re.M) and "Table macros (" in res.stdout
    block = re.split(r"\n  \S|\n\n", res.stdout.split("\n  stream_gaps(", 1)[1], maxsplit=1)[0]
    assert "one row per (device, stream) of run `run`" in " ".join(block.split())
    assert "idle_fraction" in block


def test_csv_rows_and_the_name_filter() -> None:
    res = _invoke("GAPS", "--format", "csv")
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert {r["name"].split("(")[0] for r in rows} == {"gpu_op_gaps", "largest_gaps", "stream_gaps"}
    gaps = next(r for r in rows if r["name"].startswith("stream_gaps("))
    assert gaps["kind"] == "table macro" and gaps["columns"].startswith("device, stream, ops, busy_ns")
    missing = _invoke("no_such_thing")
    assert missing.exit_code == 2 and "no table, view or macro" in missing.stderr


def test_header_fields_and_column_names() -> None:
    text = ("x(run)  (table macro)\n  grain: one row per (a, b): the thing\n    continued.\n"
            "  columns: a, b_ns (time (ns), exact), c\n  kind: 'k'\n")
    assert header_field(text, "grain") == "one row per (a, b): the thing continued."
    assert column_names(header_field(text, "columns")) == ["a", "b_ns", "c"]
    assert header_field("v  (view)\n    Grain: one row per run.\n", "grain") == "one row per run."
