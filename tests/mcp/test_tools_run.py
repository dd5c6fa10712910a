"""The per-run tools say how a run's graph replays map to their capture (issue 30, item 1).

`ops`, `modules` and `roofline` attribute a replayed kernel through its capture: as on the
CLI, a note gives the match quality; the structured rows stay the CLI's JSON. `history` with
`op` (operators' TFLOP/s over runs) counts the runs that replay graphs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from helpers_ingest import run_id_of
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.query.graphalign import match_note
from tracewh.synth import SynthConfig, write_trace


def test_graph_match_note_beside_graph_derived_rows(tmp_path: Path, open_session: Any) -> None:
    path = tmp_path / "g.pt.trace.json"
    write_trace(path, SynthConfig(steps=2, layers=1, seed=6, flavor="cuda", python=True,
                                  graph_capture=True))
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([path], jobs=1).ok
    note = match_note(wh.graph_match(run_id_of(path)))
    assert note is not None and "paired by position only" in note

    async def main() -> list[Any]:
        async with open_session(tmp_path / "wh") as s:
            return [*[await s.call_tool(name, {"top": 0}) for name in ("ops", "modules", "roofline", "steps")],
                    await s.call_tool("history", {"op": "addmm"}),
                    await s.call_tool("changes", {"op": "addmm"}), await s.call_tool("check", {"op": "addmm"}),
                    await s.call_tool("check", {})]

    got = anyio.run(main)
    for name, result in zip(("ops", "modules", "roofline"), got, strict=False):
        assert not result.isError, result.content
        assert result.content[-1].text == f"note: {note}", (name, result.content[-1].text)
        res = CliRunner().invoke(app, [name, "-w", str(tmp_path / "wh"), "--format", "json",
                                       "--top", "0"])
        assert json.loads(res.stdout) == result.structuredContent["result"], name
    assert len(got[3].content) == 1  # steps: no graph-derived attribution, no note
    # an operator's TFLOP/s over runs: the note counts the replaying runs (here the one run)
    assert not got[4].isError and got[4].structuredContent["result"]
    assert got[4].content[-1].text.startswith("note: graph replays in 1 of 1 runs")
    assert "lowest match quality 0.0%" in got[4].content[-1].text
    # changes and check with op read the same operator series: the same note (as the CLI)
    for result in got[5:7]:
        assert not result.isError, result.content
        assert result.content[-1].text == got[4].content[-1].text
    assert len(got[7].content) == 1  # check without op: no note
