"""The report's roofline section says how the run's graph replays map to their capture.

Issue 30, item 1: the match quality is shown wherever graph-derived attribution is. The
roofline's operators take a replayed kernel's time through its capture (``graph_replay``,
sql/78_roofline.sql), so its section carries the same line as `tracewh roofline`.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
from helpers_ingest import run_id_of

from tracewh.api import Warehouse
from tracewh.query.graphalign import match_note
from tracewh.report import build_report
from tracewh.report.roof import roofline_section
from tracewh.synth import SynthConfig, write_trace

ROWS = pl.DataFrame({
    "op_name": ["aten::mm"], "flops": [2.0e9], "gpu_ns": [1_000_000], "device": ["NVIDIA H100"],
})


def test_section_text_carries_the_note() -> None:
    note = "graph replays: 7 of 8 replayed GPU ops matched to their capture by kernel name"
    section = roofline_section(ROWS, graph_note=note)
    assert section.text.endswith("Graph replays: 7 of 8 replayed GPU ops matched to their "
                                 "capture by kernel name.")
    assert "Graph replays" not in roofline_section(ROWS).text  # no replays, no line


def test_report_roofline_section_shows_the_match_quality(tmp_path: Path) -> None:
    """A CUDA graph capture and its replay in one synthetic trace (8 replayed ops paired by
    position: the capture names no kernels): the report's roofline and layer sections both
    say so, in the words of the CLI."""
    path = tmp_path / "g.pt.trace.json"
    write_trace(path, SynthConfig(steps=2, layers=1, seed=6, flavor="cuda", python=True,
                                  graph_capture=True))
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([path], jobs=1).ok
    rid = run_id_of(path)
    expected = match_note(wh.graph_match(rid))
    assert expected is not None and "paired by position only" in expected
    build_report(wh, tmp_path / "rep", run=rid)
    md = (tmp_path / "rep" / "report.md").read_text()
    roof = md[md.index("## Roofline"):]
    roof = roof[: roof.index("\n## ", 1)] if "\n## " in roof[1:] else roof
    assert "paired by position only" in roof and "match quality" in roof, roof[:2000]
    page = (tmp_path / "rep" / "report.html").read_text()
    section = page[page.index("<section id='roofline'>"):]
    assert "paired by position only" in section[: section.index("</section>")]
