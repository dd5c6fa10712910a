"""`--since` windows count back from the latest run, and say what they leave out (issue 30, item 8).

The synthetic nights are of January 2025: older than 90 days before today. Expected counts
come from the nights written (two ranks a night), not from the warehouse.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracewh.cli import app

NIGHTS = 6  # 2025-01-01 .. 2025-01-06, two ranks each


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("windows")
    run = CliRunner().invoke
    res = run(app, ["synth", str(root / "t"), "--runs", str(NIGHTS), "--ranks", "2", "--start", "2025-01-01",
                    "--steps", "2", "--layers", "1", "--seed", "5"])
    assert res.exit_code == 0, res.output
    res = run(app, ["ingest", str(root / "t"), "-w", str(root / "wh")])
    assert res.exit_code == 0, res.output
    return root / "wh"


def test_default_window_analyses_a_warehouse_of_old_runs(wh: Path) -> None:
    res = CliRunner().invoke(app, ["changes", "-w", str(wh)])
    assert res.exit_code == 0, res.output
    head = res.output.splitlines()[0]
    assert f"over {2 * NIGHTS} runs" in head and "counted back from the latest run (2025-01-06)" in head
    assert "0 series" not in head


def test_a_window_that_leaves_runs_out_says_how_many_and_how_to_include_them(wh: Path) -> None:
    # 2d before the latest night (2025-01-06): from 2025-01-04 on; 3 nights x 2 ranks left out
    res = CliRunner().invoke(app, ["changes", "-w", str(wh), "--since", "2d"])
    assert res.exit_code == 0, res.output
    assert "over 6 runs" in res.output
    assert "left out: 6 run(s) before 2025-01-04" in res.output and "--since all includes them" in res.output
    res = CliRunner().invoke(app, ["changes", "-w", str(wh), "--since", "2d", "-f", "json"])
    assert res.exit_code == 0 and "left out: 6 run(s)" in res.stderr
    json.loads(res.stdout)
    res = CliRunner().invoke(app, ["changes", "-w", str(wh), "--since", "all"])
    assert "left out:" not in res.output and f"over {2 * NIGHTS} runs" in res.output


def test_history_window_counts_back_from_the_latest_run(wh: Path) -> None:
    res = CliRunner().invoke(app, ["history", "-w", str(wh), "--since", "2d", "-f", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert len(rows) == 6 and min(r["day"] for r in rows) == "2025-01-04"
    assert "left out: 6 run(s) before 2025-01-04" in res.stderr
    res = CliRunner().invoke(app, ["history", "-w", str(wh), "--since", "all", "-f", "json"])
    assert len(json.loads(res.stdout)) == 2 * NIGHTS and "left out" not in res.stderr
