"""Memory on synthetic traces with known allocation patterns (a leak, no leak), and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memory_reference import marker_steps, reference, step_rows
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.core.errors import UsageError
from tracewh.synth import SynthConfig, write_trace

runner = CliRunner()
LEAK = 64_000_000
STEPS = 5
BEFORE = 2_000_000_000  # what the generator has allocated before the trace begins


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Warehouse, dict[str, str], dict[str, Path]]:
    base = tmp_path_factory.mktemp("memsynth")
    paths = {"leak": base / "leak.pt.trace.json", "clean": base / "clean.pt.trace.json"}
    write_trace(paths["leak"], SynthConfig(steps=STEPS, layers=2, seed=3, leak_bytes=LEAK))
    write_trace(paths["clean"], SynthConfig(steps=STEPS, layers=2, seed=3))
    wh = Warehouse(base / "wh")
    report = wh.ingest(list(paths.values()))
    runs = {Path(r.path).name.split(".")[0]: r.run_id for r in report.results}
    assert set(runs) == {"leak", "clean"}
    return wh, runs, paths


def test_the_generator_writes_the_leak_it_is_asked_for(synth: tuple[Warehouse, dict[str, str], dict[str, Path]]) -> None:
    _, _, paths = synth
    for kind, leaked in (("leak", LEAK), ("clean", 0)):
        (dev,) = reference(paths[kind]).devices.values()
        assert dev.events[0].allocated - dev.events[0].nbytes == BEFORE
        assert dev.events[-1].allocated == BEFORE + STEPS * leaked
        never_freed = [a for a in dev.allocs if a.pair is None]
        assert [a.nbytes for a in never_freed] == [leaked] * (STEPS if leaked else 0)
        assert all(a.op == "aten::clone" for a in never_freed)
        assert len({a.addr for a in never_freed}) == len(never_freed)
        seg = 20 << 20  # reserved: the step peak in 20 MiB segments + 512 MiB, raised by earlier leaks
        first_peak = max(e.allocated for e in dev.events if e.ts < reference(paths[kind]).steps[1][0])
        assert dev.events[0].reserved == -(-first_peak // seg) * seg + (512 << 20)
        assert dev.events[-1].reserved == dev.events[0].reserved + (STEPS - 1) * leaked
        assert all(e.reserved >= e.allocated for e in dev.events)


def test_leak_is_found_and_a_clean_run_is_not(synth: tuple[Warehouse, dict[str, str], dict[str, Path]]) -> None:
    wh, runs, paths = synth
    (leak,) = wh.memory(runs["leak"], view="leaks").iter_rows(named=True)
    assert (leak["steps"], leak["growth_per_step_bytes"], leak["leak_suspect"]) == (STEPS, LEAK, True)
    assert (leak["rising_steps"], leak["retaining_steps"], leak["rising_openings"]) == (STEPS - 1, STEPS, STEPS - 1)
    (clean,) = wh.memory(runs["clean"], view="leaks").iter_rows(named=True)
    assert (clean["growth_per_step_bytes"], clean["rising_steps"], clean["leak_suspect"]) == (0, 0, False)
    steps = wh.memory(runs["leak"], view="steps")
    assert steps["net_bytes"].to_list() == [LEAK] * STEPS
    assert steps["retained_bytes"].to_list() == [LEAK] * STEPS
    assert steps["peak_growth_bytes"].to_list()[1:] == [LEAK] * (STEPS - 1)
    ref = reference(paths["leak"])
    (dev,) = ref.devices.values()
    expected = step_rows(ref, dev)
    assert [{k: r[k] for k in e} for r, e in zip(steps.iter_rows(named=True), expected, strict=True)] == expected


def test_who_holds_the_peak_of_a_leaking_run(synth: tuple[Warehouse, dict[str, str], dict[str, Path]]) -> None:
    wh, runs, paths = synth
    (s,) = wh.memory(runs["leak"]).iter_rows(named=True)
    (dev,) = reference(paths["leak"]).devices.values()
    assert s["peak_allocated_bytes"] == dev.peak.allocated
    assert s["peak_before_trace_bytes"] == BEFORE
    assert (s["live_at_end_allocations"], s["live_at_end_bytes"]) == (STEPS, STEPS * LEAK)
    holders = {r["op_name"]: r for r in wh.memory(runs["leak"], view="peak").iter_rows(named=True)
               if r["origin"] == "traced"}
    # the peak comes in the last step, before its clone: the four earlier leaks are live
    assert holders["aten::clone"]["allocations"] == STEPS - 1
    assert holders["aten::clone"]["live_bytes"] == (STEPS - 1) * LEAK
    before = wh.memory(runs["leak"], view="peak").filter(origin="before_trace")
    assert before["live_bytes"].to_list() == [BEFORE]


def test_history_view_compares_peaks_per_step(synth: tuple[Warehouse, dict[str, str], dict[str, Path]]) -> None:
    wh, runs, _ = synth
    got = {r["run_id"]: r for r in wh.sql("SELECT * FROM run_memory").iter_rows(named=True)}
    clean, leak = got[runs["clean"]], got[runs["leak"]]
    assert clean["n_steps"] == STEPS
    assert leak["peak_allocated_per_step_bytes"] - clean["peak_allocated_per_step_bytes"] == (STEPS - 1) * LEAK


def test_api_choices_and_device_filter(synth: tuple[Warehouse, dict[str, str], dict[str, Path]]) -> None:
    wh, runs, _ = synth
    assert wh.memory(runs["leak"], device="cuda:0").height == 1
    assert wh.memory(runs["leak"], device="0").height == 1
    assert wh.memory(runs["leak"], device="gpu").height == 1
    assert wh.memory(runs["leak"], view="allocations", top=3).height == 3
    assert wh.memory(runs["leak"], view="steps", top=2)["step"].to_list() == [0, 1]
    with pytest.raises(UsageError, match="matches no device"):
        wh.memory(runs["leak"], device="cpu")
    with pytest.raises(UsageError, match="--view"):
        wh.memory(runs["leak"], view="nope")
    with pytest.raises(UsageError, match="--top"):
        wh.memory(runs["leak"], top=0)


def test_a_tiny_memory_limit_gives_the_same_answer(synth: tuple[Warehouse, dict[str, str], dict[str, Path]]) -> None:
    wh, runs, _ = synth
    for view in ("summary", "peak", "steps"):
        small = wh.memory(runs["leak"], view=view, memory_limit=4 << 20)  # spills, or retries larger
        assert small.equals(wh.memory(runs["leak"], view=view)), view


def test_cli_views_formats_and_errors(synth: tuple[Warehouse, dict[str, str], dict[str, Path]]) -> None:
    wh, runs, _ = synth
    w = ["-w", str(wh.root), "--run", runs["leak"]]
    for view in ("summary", "peak", "allocations", "steps", "leaks", "timeline"):
        result = runner.invoke(app, ["memory", *w, "--view", view, "--format", "json"])
        assert result.exit_code == 0, result.output
        rows = json.loads(result.output)
        assert rows and isinstance(rows[0], dict) and rows[0]["device_name"] == "cuda:0"
    table = runner.invoke(app, ["memory", *w], env={"COLUMNS": "1000"})  # headers unwrapped
    assert table.exit_code == 0 and "peak_allocated (GB)" in table.output
    top = runner.invoke(app, ["memory", *w, "--view", "peak", "--top", "2", "--format", "csv"])
    assert top.exit_code == 0 and len(top.output.strip().splitlines()) == 3
    for bad in (["--device", "cuda:7"], ["--view", "nope"], ["--top", "-1"], ["--run", "nope"]):
        result = runner.invoke(app, ["memory", "-w", str(wh.root), *bad])
        assert result.exit_code == 2, (bad, result.output)
        assert result.output.startswith("error:") and "Traceback" not in result.output


def test_cli_run_without_memory_events(tmp_path: Path) -> None:
    write_trace(tmp_path / "t" / "a.json", SynthConfig(steps=1, layers=1, memory=False))
    assert runner.invoke(app, ["ingest", str(tmp_path / "t"), "-w", str(tmp_path / "wh")]).exit_code == 0
    result = runner.invoke(app, ["memory", "-w", str(tmp_path / "wh")])
    assert result.exit_code == 0 and "no [memory] events" in result.output


def test_synth_leak_option(tmp_path: Path) -> None:
    result = runner.invoke(app, ["synth", str(tmp_path / "l.json"), "--steps", "2", "--leak", "1MB"])
    assert result.exit_code == 0, result.output
    (dev,) = reference(tmp_path / "l.json").devices.values()
    assert dev.events[-1].allocated == BEFORE + 2 * 1_000_000
    bad = runner.invoke(app, ["synth", str(tmp_path / "m.json"), "--leak", "1MB", "--no-memory"])
    assert bad.exit_code == 2 and "needs memory events" in bad.output


def test_step_marker_steps(tmp_path: Path) -> None:
    # no ProfilerStep: the steps are the "Torch-Compiled Region" spans around the blocks;
    # the leaking clone runs after them, between two steps
    path = tmp_path / "compiled.pt.trace.json"
    write_trace(path, SynthConfig(steps=4, layers=1, seed=3, leak_bytes=LEAK, profiler_steps=False,
                                  compiled=True))
    wh = Warehouse(tmp_path / "wh")
    (result,) = wh.ingest([path], step_marker="Torch-Compiled Region").results
    steps = wh.memory(str(result.run_id), view="steps")
    windows = marker_steps(path, "Torch-Compiled Region")
    assert steps["step"].to_list() == sorted(windows) == [0, 1, 2, 3]
    ref = reference(path)
    assert not ref.steps  # no ProfilerStep in this trace
    (dev,) = ref.devices.values()
    expected = step_rows(ref, dev, windows)
    assert [{k: r[k] for k in e} for r, e in zip(steps.iter_rows(named=True), expected, strict=True)] == expected
    assert steps["start_allocated_bytes"].diff().drop_nulls().to_list() == [LEAK] * 3
    assert steps["retained_bytes"].to_list() == [0] * 4  # the leak is outside the marker spans
    (leak,) = wh.memory(str(result.run_id), view="leaks").iter_rows(named=True)
    assert (leak["rising_openings"], leak["retaining_steps"], leak["leak_suspect"]) == (3, 0, True)
