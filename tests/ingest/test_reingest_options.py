"""Ingest says what it skipped and why, and which marker made the steps (issue 30, item 13)."""

from __future__ import annotations

from pathlib import Path

from helpers_ingest import load_trace
from typer.testing import CliRunner

from tracewh.cli import app
from tracewh.synth import SynthConfig, write_trace

MARKER = "enumerate(DataLoader)"


def test_reingest_with_other_options_names_the_option_and_force(tmp_path: Path) -> None:
    path = tmp_path / "t.pt.trace.json"
    write_trace(path, SynthConfig(steps=4, layers=1, seed=2))
    wh = str(tmp_path / "wh")
    run = CliRunner().invoke
    assert run(app, ["ingest", str(path), "-w", wh]).exit_code == 0
    res = run(app, ["ingest", str(path), "-w", wh, "--steps", "2"])
    assert res.exit_code == 0, res.output
    assert "options differ: --steps 2 (was all)" in res.output
    assert "--force re-ingests" in res.output and "already ingested 1" in res.output
    res = run(app, ["ingest", str(path), "-w", wh])  # same options: plainly already there
    assert "options differ" not in res.output and "already ingested 1" in res.output
    res = run(app, ["ingest", str(path), "-w", wh, "--steps", "2", "--force"])
    assert res.exit_code == 0 and "replaced" in res.output


def test_step_marker_summary_names_the_marker_and_the_steps(tmp_path: Path) -> None:
    path = tmp_path / "m.pt.trace.json"
    write_trace(path, SynthConfig(steps=3, layers=1, seed=4, profiler_steps=False))
    spans = [e for e in load_trace(path)["traceEvents"]
             if e.get("ph") == "X" and MARKER in str(e.get("name")) and e.get("cat") == "user_annotation"]
    res = CliRunner().invoke(app, ["ingest", str(path), "-w", str(tmp_path / "wh"), "--step-marker", MARKER])
    assert res.exit_code == 0, res.output
    assert f"steps: {len(spans)} found by --step-marker {MARKER!r}" in res.output, res.output
    assert len(spans) == 3
