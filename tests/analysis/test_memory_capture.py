"""Memory of real traces captured with torch (CPU, profile_memory=True): a leak and no leak.

Skips without torch (``make test`` installs the CPU build). The expected numbers come
from the plain-json reference (tests/memory_reference.py) over the very trace files.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from memory_reference import reference, step_rows

from tracewh.api import Warehouse

pytestmark = pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning")
STEPS = 4
LEAK_ELEMS = 64 * 1024  # float32: 256 KiB kept per step


@pytest.fixture(scope="module")
def torch() -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)
        return pytest.importorskip("torch")


def _capture(torch: Any, path: Path, *, leak: bool) -> Path:
    torch.manual_seed(0)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8))
    x = torch.randn(32, 64)
    kept: list[Any] = []

    def step() -> None:
        model(x).sum().backward()
        if leak:
            kept.append(torch.ones(LEAK_ELEMS) * 2)  # held by the list: never freed

    prof = torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True, with_stack=True,
        with_modules=True, schedule=torch.profiler.schedule(wait=0, warmup=1, active=STEPS, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    )
    try:
        prof.start()
        for _ in range(2 + STEPS):
            step()
            prof.step()
        prof.stop()
    finally:
        torch.set_num_threads(before)
    assert path.is_file()
    return path


@pytest.fixture(scope="module")
def captured(torch: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Warehouse, dict[str, str], dict[str, Path]]:
    base = tmp_path_factory.mktemp("memcap")
    paths = {k: _capture(torch, base / f"{k}.pt.trace.json", leak=k == "leak") for k in ("leak", "clean")}
    wh = Warehouse(base / "wh")
    report = wh.ingest(list(paths.values()))
    runs = {Path(r.path).name.split(".")[0]: str(r.run_id) for r in report.results}
    assert set(runs) == {"leak", "clean"}, report.results
    return wh, runs, paths


def test_captured_leak_is_found_and_the_clean_run_is_not(captured: Any) -> None:
    wh, runs, _ = captured
    (leak,) = wh.memory(runs["leak"], view="leaks", device="cpu").iter_rows(named=True)
    assert leak["steps"] == STEPS and leak["leak_suspect"] is True
    assert leak["rising_openings"] == STEPS - 1
    (clean,) = wh.memory(runs["clean"], view="leaks", device="cpu").iter_rows(named=True)
    assert clean["leak_suspect"] is False and clean["rising_openings"] == 0
    steps = wh.memory(runs["leak"], view="steps", device="cpu")
    # each step keeps exactly the tensor appended to the list
    assert steps["retained_bytes"].to_list() == [4 * LEAK_ELEMS] * STEPS


def test_captured_traces_match_plain_json(captured: Any) -> None:
    wh, runs, paths = captured
    for kind in ("leak", "clean"):
        ref = reference(paths[kind])
        dev = ref.devices["cpu"]
        (s,) = wh.memory(runs[kind], device="cpu").iter_rows(named=True)
        live = dev.live_at(dev.peak.seq)
        assert (s["events"], s["peak_allocated_bytes"], s["peak_allocated_ts_ns"]) == (
            len(dev.events), dev.peak.allocated, dev.peak.ts)
        assert (s["peak_live_allocations"], s["peak_live_bytes"]) == (len(live), sum(a.nbytes for a in live))
        allocs = {r["event_index"]: r for r in wh.sql(
            "SELECT * FROM memory_allocations(?)", [runs[kind]]).iter_rows(named=True)}
        for a in dev.allocs:
            assert (allocs[a.index]["op_name"], allocs[a.index]["module_path"]) == (a.op, a.module)
        steps = wh.memory(runs[kind], view="steps", device="cpu")
        expected = step_rows(ref, dev)
        assert [{k: r[k] for k in e} for r, e in zip(steps.iter_rows(named=True), expected, strict=True)] == expected
    # the leaking tensors are made by an operator (aten::mul of `ones(...) * 2`)
    (top,) = wh.memory(runs["leak"], view="allocations", device="cpu", top=1).iter_rows(named=True)
    assert top["bytes"] >= 4 * LEAK_ELEMS and top["op_name"] is not None
