"""Every view and macro defined in sql/ is named in its file's header and in the SQL reference page."""

from __future__ import annotations

import re

from fixtures import warehouse

from tracewh.query.db import SQL_DIR, sql_files

DOC = SQL_DIR.parent / "docs" / "reference" / "sql.md"


def test_every_view_and_macro_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    defined = set()
    for path in sql_files():
        sql = path.read_text(encoding="utf-8")
        assert "CREATE VIEW" not in sql and "CREATE MACRO" not in sql, path  # OR REPLACE only
        names = re.findall(r"CREATE OR REPLACE (?:VIEW|MACRO) (\w+)", sql)
        header = sql.split("\n\n", 1)[0]
        for name in names:
            assert name in header, f"{path.name}: {name} missing from the header comment"
        defined |= set(names)
    assert len(defined) > 30
    missing = sorted(n for n in defined if f"`{n}" not in text)
    assert not missing


def test_every_macro_runs_on_an_empty_warehouse() -> None:
    con = warehouse()
    for sql in (
        "SELECT * FROM kernel_ranking('x')", "SELECT * FROM kernel_stats",
        "SELECT * FROM gpu_segments('x')", "SELECT * FROM gpu_op_gaps",
        "SELECT * FROM gap_kinds('x')", "SELECT * FROM stream_gaps('x')",
        "SELECT * FROM idle_breakdown('x')", "SELECT * FROM largest_gaps('x')",
        "SELECT * FROM launch_latency('x')", "SELECT * FROM launch_latency_by_kernel('x')",
        "SELECT * FROM launch_latency_by_step('x')", "SELECT * FROM launch_linkage('x')",
        "SELECT * FROM queue_depth('x')", "SELECT * FROM step_summary('x')",
        "SELECT * FROM op_gpu_time('x')", "SELECT * FROM module_gpu_time('x')",
        "SELECT * FROM module_tree('x', max_depth := 2, top := 3)",
        "SELECT * FROM module_segments('x')",
        "SELECT * FROM annotation_tree('x', source := 'gpu_user_annotation', top := 2)",
        "SELECT * FROM annotation_gpu_time('x', max_depth := 1)",
        "SELECT * FROM gpu_annotation_spans('x')", "SELECT * FROM gpu_annotation_ops('x')",
        "SELECT * FROM graph_replay_map('x')", "SELECT * FROM graph_replay('x')",
        "SELECT * FROM graph_launches('x')", "SELECT * FROM gpu_ops_attributed('x')",
        "SELECT * FROM graph_match('x')",
        "SELECT * FROM cpu_op_nesting('x')", "SELECT * FROM cpu_op_time('x')",
        "SELECT * FROM memcpy_summary('x')", "SELECT * FROM memcpy_kinds",
        "SELECT * FROM gpu_time_breakdown('x')", "SELECT * FROM rank_kernels(['j'])",
        "SELECT * FROM rank_imbalance(['j'])", "SELECT * FROM rank_stragglers(['j'])",
        "SELECT * FROM kernel_keys", "SELECT * FROM series_values()",
        "SELECT * FROM run_fingerprints_in(['x'])",
    ):  # fmt: skip
        con.execute(sql).fetchall()
