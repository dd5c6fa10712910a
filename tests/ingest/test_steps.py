"""Step markers (`ingest --step-marker`), `--steps N` by launch, and steps by launch.

Expected values come from plain-``json`` loops over the traces: the marker spans, each GPU
op's launch call (by correlation id) and the step window holding it.
"""

from __future__ import annotations

import fnmatch
import warnings
from pathlib import Path
from typing import Any

import pytest
from helpers_ingest import GPU_CATS, RUNTIME_CATS, load_trace, ns, run_id_of
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.synth import SynthConfig, write_trace

REGION = "Torch-Compiled Region: 0/0"


def _markers(events: list[Any], pattern: str) -> list[tuple[int, int, int, Any, Any]]:
    """Outermost spans matching ``pattern`` (substring or glob): (start, end, index, pid, tid)."""
    hits = sorted(
        (ns(e["ts"]) or 0, (ns(e["ts"]) or 0) + (ns(e["dur"]) or 0), i, e["pid"], e["tid"])
        for i, e in enumerate(events)
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation")
        and (pattern in e["name"] or fnmatch.fnmatchcase(e["name"], pattern))
    )
    return [h for h in hits if not any(
        o is not h and o[3:] == h[3:] and o[0] <= h[0] and h[1] <= o[1] and (o[0], -o[1], o[2]) < (h[0], -h[1], h[2])
        for o in hits)]


def _launch_ts(events: list[Any]) -> dict[int, int]:
    """GPU op index -> start of its launch call (by correlation id), else its own start."""
    launch: dict[Any, tuple[int, int]] = {}
    for i, e in enumerate(events):
        c = (e.get("args") or {}).get("correlation")
        if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and c is not None:
            t = ns(e["ts"]) or 0
            launch[c] = min(launch.get(c, (t, i)), (t, i))
    return {
        i: launch[c][0] if (c := (e.get("args") or {}).get("correlation")) in launch else ns(e["ts"]) or 0
        for i, e in enumerate(events) if e.get("ph") == "X" and e.get("cat") in GPU_CATS
    }


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Any]]:
    """A torch.compile'd denoising loop without ProfilerStep: 5 compiled regions."""
    path = tmp_path_factory.mktemp("compiled") / "dit.pt.trace.json"
    write_trace(path, SynthConfig(steps=5, layers=2, seed=8, profiler_steps=False, compiled=True))
    return path, load_trace(path, exact=True)["traceEvents"]


def test_markers_define_steps_and_steps_keeps_what_they_launched(
    tmp_path: Path, compiled: tuple[Path, list[Any]]
) -> None:
    path, events = compiled
    assert not any(str(e.get("name", "")).startswith("ProfilerStep#") for e in events)
    marks = _markers(events, "Torch-Compiled Region")
    assert len(marks) == 5
    wh = Warehouse(tmp_path / "wh")
    report = wh.ingest([path], step_marker="Torch-Compiled Region", steps=3)
    (r,) = report.ingested
    base = wh.sql("SELECT base_time_ns AS b FROM runs")["b"][0]
    steps = wh.sql("SELECT step, name, ts_ns, dur_ns FROM steps ORDER BY step")
    assert steps.rows() == [(k, REGION, m[0] + base, m[1] - m[0]) for k, m in enumerate(marks[:3])]
    # exactly the GPU ops launched inside the three kept regions, each with its step
    launch = _launch_ts(events)
    want = {i: k for i, t in launch.items() for k, m in enumerate(marks[:3]) if m[0] <= t < m[1]}
    got = dict(wh.sql("SELECT event_index, step FROM gpu_ops").iter_rows())
    assert got == want and len(want) > 30
    # CPU-side events: those starting in [first region start, third region end)
    lo, hi = marks[0][0], marks[2][1]
    cpu = [i for i, e in enumerate(events) if e.get("ph") == "X" and e.get("cat") not in GPU_CATS
           and e.get("cat") != "python_function" and lo <= (ns(e["ts"]) or 0) < hi]
    n_x = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") != "python_function")
    assert wh.sql("SELECT count(*) AS n FROM events")["n"][0] == len(cpu) + len(want)
    assert (r.steps_found, r.steps_kept, r.dropped) == (5, 3, n_x - len(cpu) - len(want))
    assert r.warnings == ()
    assert wh.sql("SELECT step_marker, steps_limit FROM runs").rows() == [("Torch-Compiled Region", 3)]


def test_marker_as_a_glob_and_steps_by_launch(tmp_path: Path, compiled: tuple[Path, list[Any]]) -> None:
    path, events = compiled
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([path], step_marker="Torch-Compiled Region: ?/0").ok
    marks = _markers(events, "Torch-Compiled Region: ?/0")
    launch = _launch_ts(events)
    summary = wh.steps("latest")
    assert summary["step"].to_list() == list(range(5))
    for k, m in enumerate(marks):
        mine = sorted((ns(events[i]["ts"]) or 0, (ns(events[i]["ts"]) or 0) + (ns(events[i]["dur"]) or 0))
                      for i, t in launch.items() if m[0] <= t < m[1])
        busy, end = 0, None
        for t0, t1 in mine:  # union of the step's op intervals, by hand
            t0 = max(t0, m[0])
            if end is None or t0 > end:
                busy, end = busy + t1 - t0, t1
            elif t1 > end:
                busy, end = busy + t1 - end, t1
        row = summary.row(k, named=True)
        assert (row["ops"], row["gpu_busy_ns"]) == (len(mine), busy)
        assert row["gpu_tail_ns"] == max(max(t1 for _, t1 in mine) - m[1], 0)
        assert row["gpu_idle_ns"] == (row["lead_ns"] + row["host_wait_ns"] + row["kernel_wait_ns"]
                                      + row["other_wait_ns"] + row["trail_ns"])
    # the regions are the transformer only: kernels of the scheduler prologue/epilogue
    # belong to no step
    assert wh.sql("SELECT count(*) AS n FROM gpu_ops WHERE step IS NULL")["n"][0] > 0


def test_profiler_steps_by_launch_own_all_the_gpu_work(tmp_path: Path) -> None:
    """With ProfilerStep#N, every op is launched in some step: the steps add up to the run."""
    path = tmp_path / "p.pt.trace.json"
    write_trace(path, SynthConfig(steps=4, layers=2, seed=9))
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([path]).ok
    s = wh.steps("latest")
    total = wh.sql("SELECT count(*) AS n, sum(dur_ns) AS t FROM gpu_ops WHERE step IS NOT NULL")
    assert s["ops"].sum() == total["n"][0] == wh.sql("SELECT count(*) AS n FROM gpu_ops")["n"][0]
    assert (s["gpu_idle_ns"] == s["lead_ns"] + s["host_wait_ns"] + s["kernel_wait_ns"]
            + s["other_wait_ns"] + s["trail_ns"]).all()
    assert (s["gpu_idle_ns"] >= 0).all() and (s["gpu_busy_ns"] > 0).all()


def test_more_steps_than_exist_and_no_match_are_warnings(
    tmp_path: Path, compiled: tuple[Path, list[Any]]
) -> None:
    path, _ = compiled
    runner = CliRunner()
    res = runner.invoke(app, ["ingest", str(path), "-w", str(tmp_path / "a"),
                              "--step-marker", "Torch-Compiled", "--steps", "9"])
    assert res.exit_code == 0, res.output
    assert "warning" in res.output and "only 5 step(s)" in res.output
    res = runner.invoke(app, ["ingest", str(path), "-w", str(tmp_path / "b"), "--steps", "2"])
    assert res.exit_code == 0 and "no ProfilerStep#N span" in res.output and "nothing was dropped" in res.output
    res = runner.invoke(app, ["ingest", str(path), "-w", str(tmp_path / "c"), "--step-marker",
                              "denoise", "-f", "json"])
    assert res.exit_code == 0 and "no span matches --step-marker 'denoise'" in res.output
    res = runner.invoke(app, ["ingest", str(path), "-w", str(tmp_path / "d"), "--step-marker", " "])
    assert res.exit_code == 2 and "--step-marker" in res.output


def test_torch_capture_with_a_step_span(tmp_path: Path) -> None:
    """A record_function per step, as tracewh.capture writes it; nested matches are not steps."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch = pytest.importorskip("torch")
        from torch.profiler import ProfilerActivity, profile, record_function

        model, x = torch.nn.Linear(8, 8), torch.randn(4, 8)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(4):
                with record_function("tracewh.step"), record_function("tracewh.step.forward"):
                    model(x)
                x = x + 1.0  # between steps
        trace = tmp_path / "t.pt.trace.json"
        prof.export_chrome_trace(str(trace))
    events = load_trace(trace, exact=True)["traceEvents"]
    marks = _markers(events, "tracewh.step")
    assert len(marks) == 4
    wh = Warehouse(tmp_path / "wh")
    (r,) = wh.ingest([trace], step_marker="tracewh.step", steps=2).ingested
    assert (r.steps_found, r.steps_kept) == (4, 2)
    base = wh.sql("SELECT coalesce(base_time_ns, 0) AS b FROM runs")["b"][0]
    got = wh.sql("SELECT step, name, ts_ns - ? AS t, dur_ns FROM steps ORDER BY step", [base])
    assert got.rows() == [(k, "tracewh.step", m[0], m[1] - m[0]) for k, m in enumerate(marks[:2])]
    # the CPU ops kept are those inside [first step start, second step end)
    kept = wh.sql("SELECT count(*) AS n FROM events WHERE cat = 'cpu_op'")["n"][0]
    assert kept == sum(1 for e in events if e.get("cat") == "cpu_op"
                       and marks[0][0] <= (ns(e["ts"]) or 0) < marks[1][1])
    assert run_id_of(trace) == r.run_id
