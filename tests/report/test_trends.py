"""The report's `--since` window: counted back from the latest run, and what it leaves out said.

Issue 30, item 8: whenever a filter leaves runs out, the output says how many and how to
include them, as `changes` does. Six synthetic nights (2025-01-01 .. 2025-01-06, one rank,
one workload, years before today): expected counts come from the nights' dates.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.report.trends import collect_history, history_window
from tracewh.synth import SynthConfig, write_history

START = dt.date(2025, 1, 1)
NIGHTS = 6


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("window")
    write_history(base / "traces", SynthConfig(steps=2, layers=1, model="demo", seed=5),
                  runs=NIGHTS, start=START)
    assert Warehouse(base / "wh").ingest([base / "traces"], jobs=1).ok
    return base / "wh"


def test_window_counts_back_from_the_latest_run(nights: Path) -> None:
    wh = Warehouse(nights)
    workload = wh.runs()["workload"][0]
    first, note = history_window(wh, "2d")  # the latest night is 2025-01-06, not today
    assert first == dt.date(2025, 1, 4)
    assert note == (f"left out: 3 run(s) of workload {workload} before 2025-01-04 (the --since "
                    "window, counted back from the latest run (2025-01-06)); --since all, or "
                    "no --since, includes them")
    assert history_window(wh, "2025-01-02")[1].startswith("left out: 1 run(s) of workload")
    assert "counted back" not in history_window(wh, "2025-01-02")[1]  # a date is a date
    assert history_window(wh, "all") == (None, "") and history_window(wh, None) == (None, "")
    assert history_window(wh, "2025-01-01") == (dt.date(2025, 1, 1), "")  # nothing left out
    # before: "90d" counted back from today gave an empty history; now every night is in it
    trends = collect_history(wh, since=history_window(wh, "90d")[0])
    assert trends and trends[0].frame.height == NIGHTS
    # a window that leaves every run out still says so (the history section's only text)
    first, note = history_window(wh, "2030-01-01")
    only = collect_history(wh, since=first, window_note=note)
    assert only and only[0].frame.is_empty() and only[0].note.startswith("Left out: 6 run(s)")


def test_report_since_says_what_it_left_out(nights: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["report", "-w", str(nights), "--since", "2d",
                                   "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    assert "left out: 3 run(s) of workload" in res.output and "--since all" in res.output
    md = (tmp_path / "rep" / "report.md").read_text()
    history = md[md.index("## History"):]
    assert "Left out: 3 run(s) of workload" in history, history[:1500]
    # `changes` over the same window says the same count the same way
    ch = CliRunner().invoke(app, ["changes", "-w", str(nights), "--since", "2d"])
    assert "left out: 3 run(s) before 2025-01-04" in ch.output and "--since all" in ch.output


def test_regressions_are_flagged_on_every_rank(tmp_path: Path) -> None:
    """Issue 30: a kernel regression of both ranks is flagged on both in the change group's
    trend, each rank from its own first slow night on (the report of rank 0's run)."""
    from tracewh.synth import Regression

    slow = START + dt.timedelta(days=5)
    write_history(tmp_path / "traces", SynthConfig(steps=2, layers=1, ranks=2, model="demo", seed=4),
                  runs=7, start=START, regressions=[Regression("flash_fwd", 0.4, slow)])  # fmt: skip
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([tmp_path / "traces"], jobs=1).ok
    runs = wh.runs()
    rank0 = runs.filter(pl.col("rank") == 0).sort("start_ns")["run_id"][-1]
    trends = collect_history(wh, since=None, run=rank0)
    assert trends is not None
    group = [t for t in trends if t.title.startswith("Change group")]
    assert group, [t.title for t in trends]
    frame = group[0].frame
    assert set(frame["rank"].to_list()) == {0, 1}
    for rank in (0, 1):
        mine = frame.filter(pl.col("rank") == rank).sort("time")
        want = [t.date() >= slow for t in mine["time"].to_list()]
        assert mine["regression"].to_list() == want, (rank, mine)
