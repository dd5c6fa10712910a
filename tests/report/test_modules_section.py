"""The report's "time per layer" section and the flame graph's module frames."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from helpers_ingest import GPU_CATS, load_trace, ns

from tracewh.api import Warehouse
from tracewh.report import build_report
from tracewh.report.flame import gpu_stacks
from tracewh.report.modules_section import collect_modules, layer_group, layers, modules_section
from tracewh.synth import SynthConfig, write_trace


def _tree(paths: dict[str, int]) -> pl.DataFrame:
    """A module_tree-shaped frame from {path: inclusive gpu_ns}."""
    return pl.DataFrame({
        "module_path": list(paths), "name": [p.rsplit("/", 1)[-1] for p in paths],
        "depth": [p.count("/") + 1 for p in paths], "gpu_ns": list(paths.values()),
    })


def test_layer_group_finds_the_repeated_blocks() -> None:
    tree = _tree({"M_0": 100, "M_0/Embed_0": 5, "M_0/Enc_0": 90, "M_0/Enc_0/Layer_0": 30,
                  "M_0/Enc_0/Layer_1": 30, "M_0/Enc_0/Layer_10": 30, "M_0/Head_0": 5})
    assert layer_group(tree) == (3, "M_0/Enc_0", "Layer")
    data = collect_modules(type("W", (), {"modules": lambda self, run: tree})(), "r")
    assert data is not None
    assert layers(data)["name"].to_list() == ["Layer_0", "Layer_1", "Layer_10"]  # model order
    # no repeated class: the first depth with several modules
    assert layer_group(_tree({"A_0": 9, "A_0/B_0": 4, "A_0/C_0": 5})) == (2, None, None)
    assert layer_group(_tree({"A_0": 9})) == (1, None, None)
    assert layer_group(pl.DataFrame(schema=tree.schema)) is None


@pytest.fixture(scope="module")
def dit(tmp_path_factory: pytest.TempPathFactory) -> tuple[Warehouse, list[dict]]:
    tmp = tmp_path_factory.mktemp("dit")
    path = tmp / "dit.pt.trace.json"
    write_trace(path, SynthConfig(steps=2, layers=3, python=True, seed=13))
    wh = Warehouse(tmp / "wh")
    assert wh.ingest([path]).ok
    return wh, load_trace(path, exact=True)["traceEvents"]


def test_report_draws_time_per_layer(dit: tuple[Warehouse, list[dict]], tmp_path: Path) -> None:
    wh, events = dit
    data = collect_modules(wh, "latest")
    assert data is not None and (data.depth, data.parent, data.cls) == (2, "DiT_0", "DiTBlock")
    rows = layers(data)
    assert rows["name"].to_list() == ["DiTBlock_0", "DiTBlock_1", "DiTBlock_2"]
    section = modules_section(data)
    assert section.chart is not None and "DiTBlock modules of DiT_0" in section.text
    result = build_report(wh, tmp_path / "r", run="latest", since=None)
    assert "modules" in result.charts
    md = (result.folder / "report.md").read_text(encoding="utf-8")
    assert "Time per layer" in md and "DiTBlock_1" in md
    assert "| kind | replay (" in md  # runs.kind in the facts: synth replays a CUDA graph each step
    # the blocks' time equals the GPU time of the ops their launches were made in: the
    # module tree is tested against plain json in test_ingest_modules; here, the total
    total = sum(ns(e["dur"]) or 0 for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS)
    assert 0 < rows["gpu_ns"].sum() < total


def test_report_without_module_spans_says_so(tmp_path: Path) -> None:
    path = tmp_path / "plain.pt.trace.json"
    write_trace(path, SynthConfig(steps=1, layers=1, seed=2))
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([path]).ok
    section = modules_section(collect_modules(wh, "latest"))
    assert section.chart is None and "with_modules" in section.empty


def test_flame_stacks_have_one_frame_per_module(dit: tuple[Warehouse, list[dict]]) -> None:
    wh, _ = dit
    stacks = gpu_stacks(wh, "latest")
    paths = dict(wh.sql("SELECT module_path, sum(dur_ns) AS t FROM gpu_ops GROUP BY 1").iter_rows())
    by_root: dict[str, int] = {}
    for stack, weight in stacks.items():
        by_root[stack[0]] = by_root.get(stack[0], 0) + weight
    assert by_root["DiT_0"] == sum(t for p, t in paths.items() if p and p.startswith("DiT_0"))
    assert any(stack[:3] == ("DiT_0", "DiTBlock_1", "Attention_1") for stack in stacks)
