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
