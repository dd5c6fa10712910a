"""The report's history sections: a change group's table shows the newest 15 runs and says so.

Issue 30: "the history table says when it stops at 15 rows". Trends are built by hand here
(``time``, ``run_id``, ``rank``, ``value_ns``, ``regression``), so the expected rows are known.
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from tracewh.report.sections import HISTORY_ROWS, history_sections
from tracewh.report.trends import Trend


def _trend(title: str, n: int) -> Trend:
    t0 = dt.datetime(2025, 1, 1)
    return Trend(title, pl.DataFrame({
        "time": [t0 + dt.timedelta(days=i) for i in range(n)],
        "run_id": [f"run{i:02d}" for i in range(n)],
        "rank": [0] * n,
        "value_ns": [1e6 + i for i in range(n)],
        "regression": [i >= n - 2 for i in range(n)],
    }))  # fmt: skip


def test_history_table_stops_at_15_rows_and_says_so() -> None:
    assert HISTORY_ROWS == 15
    steps, long, short = _trend("Step time", 20), _trend("Change group 1", 20), _trend("Change group 2", 15)
    sections = history_sections([steps, long, short])
    assert [len(s.tables) for s in sections] == [0, 1, 1]  # the step time is a chart only
    table = sections[1].tables[0]
    assert table.title == "Change group 1 (newest 15 of 20 runs)"
    assert table.frame.height == 15
    runs = table.frame.get_column(table.frame.columns[1]).to_list()
    assert runs == [f"run{i:02d}" for i in range(19, 4, -1)]  # the newest 15, newest first
    assert sections[2].tables[0].title == "Change group 2"  # all 15 shown: nothing said
    assert sections[2].tables[0].frame.height == 15
