"""Notes that say what a table holds (issue 30, items 7 and 10): empty op_name rows, mixed workloads."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from tracewh.cli import app
from tracewh.synth import SynthConfig, write_trace


def test_ops_says_what_an_empty_op_name_is_and_history_warns_of_mixed_workloads(tmp_path: Path) -> None:
    for model in ("dit-xl-2", "sd35"):
        cfg = SynthConfig(steps=2, layers=1, seed=3, model=model)
        write_trace(tmp_path / model / "rank-0.pt.trace.json", cfg)
        (tmp_path / model / "run.json").write_text(json.dumps({"labels": {"model": model}}))
    wh = str(tmp_path / "wh")
    run = CliRunner().invoke
    assert run(app, ["ingest", str(tmp_path / "dit-xl-2"), str(tmp_path / "sd35"), "-w", wh]).exit_code == 0
    rows = json.loads(run(app, ["ops", "-w", wh, "-f", "json", "--top", "0"]).stdout)
    assert any(r["op_name"] is None for r in rows)  # the synth step has kernels outside any operator
    res = run(app, ["ops", "-w", wh, "--top", "0"], env={"COLUMNS": "200"})
    assert "an empty op_name: GPU ops no CPU operator encloses, unlinked ones among them" in res.output
    res = run(app, ["history", "-w", wh], env={"COLUMNS": "200"})
    assert res.exit_code == 0 and "these rows mix 2 workloads" in res.output, res.output
    res = run(app, ["history", "-w", wh, "--where", "model=sd35"], env={"COLUMNS": "200"})
    assert "mix" not in res.output


def test_history_op_says_which_runs_replay_graphs(tmp_path: Path) -> None:
    """`history --op` shows operators' TFLOP/s per run; a replaying run's operators come
    through its capture (issue 30, item 1): the note says how many runs replay and their
    lowest match quality. Two nights that capture their graph (CUDA: the capture names no
    kernels, so 0 of 8 ops match by name: 0.0%) and a trace that replays without one."""
    import datetime as dt

    from tracewh.api import Warehouse
    from tracewh.synth import write_history

    write_history(tmp_path / "graphs", SynthConfig(steps=2, layers=1, seed=6, python=True,
                                                  graph_capture=True, model="graphs"),
                  runs=2, start=dt.date(2025, 1, 1))
    write_trace(tmp_path / "plain" / "rank-0.pt.trace.json", SynthConfig(steps=2, layers=1, seed=3))
    wh = str(tmp_path / "wh")
    run = CliRunner().invoke
    assert run(app, ["ingest", str(tmp_path / "graphs"), str(tmp_path / "plain"), "-w", wh]).exit_code == 0
    quality = {r: Warehouse(wh).graph_match(r)["match_quality"] for r in Warehouse(wh).runs()["run_id"]}
    assert sorted(quality.values(), key=str) == [0.0, 0.0, None]  # the plain trace: no capture
    plain = next(r for r, q in quality.items() if q is None)
    res = run(app, ["history", "-w", wh, "--op", "addmm"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "graph replays in 3 of 3 runs: their operators' GPU time comes through the capture" in text
    assert "lowest match quality 0.0%" in text
    assert f"1 run(s) with no capture matched (run {plain[:12]})" in text
    # changes --op reads the same operator series (every run): it says it too
    res = run(app, ["changes", "-w", wh, "--op", "addmm"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "graph replays in 3 of 3 runs: their operators' GPU time comes through the capture" in text
    assert "lowest match quality 0.0%" in text and f"(run {plain[:12]})" in text
    # check --op: over the runs of the checked run's workload up to it
    res = run(app, ["check", "-w", wh, "--op", "addmm", "--run", "model=graphs"],
              env={"COLUMNS": "250"})
    assert res.exit_code in (0, 1), res.output
    text = " ".join(res.output.split())
    assert "graph replays in 2 of 2 runs" in text and "lowest match quality 0.0%" in text, text
    assert "no capture matched" not in text
    res = run(app, ["check", "-w", wh, "--op", "addmm", "--run", plain, "-f", "json"])
    assert json.loads(res.stdout)["run_id"] == plain
    note = " ".join(res.stderr.split())
    assert f"graph replays in 1 of 1 runs: their operators' GPU time comes through the capture; 1 run(s) with no capture matched (run {plain[:12]})" in note
