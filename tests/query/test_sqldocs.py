"""tracewh.query.sqldocs: the sql/ header entries, and the catalog described with them."""

from __future__ import annotations

from pathlib import Path

import duckdb

from tracewh.query.sqldocs import describe, header_entries

HEADER = """\
-- 99_demo.sql: a demo.
--
-- demo_view  (view, warehouse-wide)
--   grain: one row per thing.
--   columns: a, b_ns
--
-- demo_macro_with_a_long_signature(run, threshold_ns := 30000, another_parameter := NULL)
--   (table macro)
--   grain: one row per run.
--
-- tw_helper(x)  (scalar macro)
--   a helper.

CREATE OR REPLACE VIEW demo_view AS SELECT 1 AS a, 2::BIGINT AS b_ns;
"""


def test_header_entries_and_wrapped_signatures(tmp_path: Path) -> None:
    (tmp_path / "99_demo.sql").write_text(HEADER)
    entries = header_entries(tmp_path)
    assert list(entries) == ["demo_view", "demo_macro_with_a_long_signature", "tw_helper"]
    view, macro, helper = entries.values()
    assert view.kind == "view" and view.text.splitlines()[1].strip() == "grain: one row per thing."
    assert macro.kind == "table macro"
    assert macro.signature == (
        "demo_macro_with_a_long_signature(run, threshold_ns := 30000, another_parameter := NULL)"
    )
    assert macro.text.endswith("grain: one row per run.")
    assert helper.kind == "scalar macro" and view.file == "99_demo.sql"


def test_describe_joins_the_catalog_and_the_headers(tmp_path: Path) -> None:
    (tmp_path / "99_demo.sql").write_text(HEADER)
    con = duckdb.connect()
    con.execute("CREATE VIEW demo_view AS SELECT 1 AS a, 2::BIGINT AS b_ns")
    con.execute("CREATE MACRO demo_macro_with_a_long_signature(run, threshold_ns := 30000, "
                "another_parameter := NULL) AS TABLE SELECT run AS r")  # fmt: skip
    con.execute("CREATE MACRO undocumented(x) AS TABLE SELECT x")
    doc = describe(con, sql_dir=tmp_path)
    assert doc["views"] == [{
        "name": "demo_view", "description": doc["views"][0]["description"],
        "columns": [{"name": "a", "type": "INTEGER"}, {"name": "b_ns", "type": "BIGINT"}],
    }]  # fmt: skip
    assert doc["views"][0]["description"].startswith("demo_view  (view, warehouse-wide)")
    assert [m["name"] for m in doc["macros"]] == ["demo_macro_with_a_long_signature"]
    assert doc["macros"][0]["parameters"][0] == "run"
    assert {t["name"] for t in doc["tables"]} >= {"runs", "gpu_ops"}  # from the schema
    gpu_ops = next(t for t in doc["tables"] if t["name"] == "gpu_ops")
    assert {"run_id", "ts_ns", "dur_ns"} <= {c["name"] for c in gpu_ops["columns"]}
