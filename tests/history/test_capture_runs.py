"""Capture-only runs (``runs.kind = 'capture'``, issue 15: a CUDA-graph capture trace, whose
kernels were recorded, not run) stay out of history comparisons end to end: ingest ->
``runs.unusable`` -> the baselines of ``check`` and the series of ``changes``, said in the
output; ``--include-unusable`` puts them back.

The capture-only nights are made from synthetic nights with plain JSON: the graph's capture
kept (``cudaStreamBeginCapture`` ... ``EndCapture``), every replay removed (the
``cudaGraphLaunch`` calls, the GPU ops they ran and their flow arrows)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.schema.arrow import RUNS
from tracewh.synth import SynthConfig, write_history

pytestmark = pytest.mark.skipif(
    "kind" not in RUNS.names or "graph_capture" not in SynthConfig.__dataclass_fields__,
    reason="runs.kind and synth graph captures (issue 15) are not on this branch",
)

NIGHTS = 10
CAPTURE_NIGHTS = (6, 7, 8)  # 0-based: capture-only traces between usable nights
GRAPH_LAUNCHES = {"cudaGraphLaunch", "hipGraphLaunch"}
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _capture_only(path: Path) -> None:
    """Rewrite a trace as a capture-only one: no graph replay, the capture kept."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f)
    events: list[dict[str, Any]] = doc["traceEvents"]
    launches = {e["args"]["correlation"] for e in events
                if e.get("ph") == "X" and e.get("name") in GRAPH_LAUNCHES}  # fmt: skip
    assert launches, f"{path}: no graph launch to remove"

    def replay(e: dict[str, Any]) -> bool:
        if e.get("ph") == "X" and e.get("name") in GRAPH_LAUNCHES:
            return True
        if e.get("cat") in GPU_CATS and e.get("args", {}).get("correlation") in launches:
            return True
        return e.get("cat") == "ac2g" and e.get("id") in launches

    doc["traceEvents"] = [e for e in events if not replay(e)]
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Warehouse, list[str], list[str]]:
    """NIGHTS nights of one labelled model; CAPTURE_NIGHTS rewritten as capture-only traces.
    Returns the warehouse, the capture runs' ids and the usable runs' ids (oldest first)."""
    root = tmp_path_factory.mktemp("capture_history")
    write_history(root / "nights", SynthConfig(steps=3, layers=2, seed=5, graph_capture=True),
                  runs=NIGHTS)  # fmt: skip
    nights = sorted(p for p in (root / "nights").iterdir() if p.is_dir())
    assert len(nights) == NIGHTS
    for i in CAPTURE_NIGHTS:
        for trace in nights[i].glob("*.json.gz"):
            _capture_only(trace)
    wh = Warehouse(root / "wh")
    assert wh.ingest([root / "nights"], jobs=1).ok
    by_day = dict(wh.sql("SELECT CAST(day AS VARCHAR) AS d, run_id FROM runs").iter_rows())
    capture = [by_day[nights[i].name] for i in CAPTURE_NIGHTS]
    usable = [by_day[n.name] for i, n in enumerate(nights) if i not in CAPTURE_NIGHTS]
    return wh, capture, usable


def test_capture_runs_are_unusable(history: tuple[Warehouse, list[str], list[str]]) -> None:
    wh, capture, usable = history
    kinds = dict(wh.sql("SELECT run_id, kind FROM runs").iter_rows())
    assert {kinds[r] for r in capture} == {"capture"}
    assert {kinds[r] for r in usable} == {"replay"}  # every step replays the graph
    runs = wh.runs()
    assert len(set(runs["workload"])) == 1  # one model: the labels tie the nights
    unusable = dict(runs.select("run_id", "unusable").iter_rows())
    assert sorted(r for r, u in unusable.items() if u) == sorted(capture)
    assert {unusable[r] for r in capture} == {"capture"}


def test_check_leaves_capture_runs_out_of_the_baseline(
    history: tuple[Warehouse, list[str], list[str]],
) -> None:
    wh, capture, usable = history
    latest = wh.check(usable[-1])
    assert [c.baseline_runs for c in latest.checked] == [len(usable) - 1]
    assert sorted(latest.excluded["run_id"].to_list()) == sorted(capture)
    assert set(latest.excluded["reasons"]) == {"capture"}
    kept = wh.check(usable[-1], include_unusable=True)
    assert [c.baseline_runs for c in kept.checked] == [NIGHTS - 1]
    assert kept.excluded.is_empty()
    # a capture run as the target: flagged, not checked, exit 0, said
    res = CliRunner().invoke(app, ["check", "-w", str(wh.root), "--run", capture[-1]])
    assert res.exit_code == 0, res.output
    assert "capture" in res.output
    own = wh.check(capture[-1])
    assert [c.unusable for c in own.checked] == ["capture"] and not own.regressions


def test_changes_leave_capture_runs_out(history: tuple[Warehouse, list[str], list[str]]) -> None:
    wh, capture, usable = history
    report = wh.changes(since=None)
    assert report.runs == len(usable)
    assert sorted(report.excluded["run_id"].to_list()) == sorted(capture)
    assert not set(r["run_id"] for r in report.to_dicts()) & set(capture)
    res = CliRunner().invoke(app, ["changes", "-w", str(wh.root), "--since", "all"])
    assert res.exit_code == 0, res.output
    assert f"left out: {len(capture)} run(s) unusable for comparison (capture)" in res.output
    kept = wh.changes(since=None, include_unusable=True)
    assert kept.runs == NIGHTS and kept.excluded.is_empty()
