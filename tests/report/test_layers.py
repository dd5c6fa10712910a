"""The layer view picks the layers that hold the time, and says so in a sentence that reads
(issue 30, item 9): a hand-built SD3.5-like tree and real traces of three kinds (BERT on an
MI300, TimeSformer on an H100, a vLLM HIP-graph replay mapped to its capture)."""

from __future__ import annotations

import re
import shutil
from collections import defaultdict
from pathlib import Path

import polars as pl
import pytest

from tracewh.api import Warehouse
from tracewh.report.modules_section import collect_modules, layer_group, layers, modules_section

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
SENTENCE = re.compile(
    r"^\d+ \S+ modules? (of \S+|at the top level)|^\d+ modules? at depth \d+")
TAIL = re.compile(r" holds? \d+\.\d% of the GPU time( together)?; the slowest, \S+, takes "
                  r"[\d,]+\.\d{3} ms \(\d+\.\d%\)\.( Graph replays: .+\.)?$")


def _tree(paths: dict[str, int]) -> pl.DataFrame:
    total = max(paths.values())
    return pl.DataFrame({
        "module_path": list(paths), "name": [p.rsplit("/", 1)[-1] for p in paths],
        "depth": [p.count("/") + 1 for p in paths], "gpu_ns": list(paths.values()),
        "pct": [100 * v / total for v in paths.values()], "calls": [1] * len(paths),
        "kernels": [1] * len(paths), "self_gpu_ns": [0] * len(paths),
    })


def test_compiled_sd35_picks_the_transformer_blocks_not_the_clip_layers() -> None:
    """CLIP encoders: repeated layers at depth 3 holding little; the MMDiT's blocks at depth 4
    holding most of the time (a compiled region between them)."""
    paths = {"SD3_0": 1000, "SD3_0/CLIPTextModel_0": 20, "SD3_0/CLIPTextModel_0/CLIPEncoderLayer_0": 10,
             "SD3_0/CLIPTextModel_0/CLIPEncoderLayer_1": 10, "SD3_0/Compiled_0": 950,
             "SD3_0/Compiled_0/SD3Transformer2DModel_0": 950}
    for i in range(24):
        paths[f"SD3_0/Compiled_0/SD3Transformer2DModel_0/JointTransformerBlock_{i}"] = 39
    tree = _tree(paths)
    assert layer_group(tree) == (4, "SD3_0/Compiled_0/SD3Transformer2DModel_0", "JointTransformerBlock")
    data = collect_modules(type("W", (), {"modules": lambda self, run: tree})(), "r")
    section = modules_section(data)
    assert section.text.startswith("24 JointTransformerBlock modules of SD3_0/Compiled_0/SD3Transformer2DModel_0 "
                                   "hold 93.6% of the GPU time together; the slowest, ")
    assert TAIL.search(section.text), section.text


def _groups(tree: pl.DataFrame) -> dict[tuple[str, str], int]:
    """(parent, class) -> GPU time of every group of >= 2 same-class siblings, by hand."""
    members: dict[tuple[str, str], list[int]] = defaultdict(list)
    for path, ns_ in zip(tree["module_path"], tree["gpu_ns"], strict=True):
        if path is None:
            continue
        parent, _, name = str(path).rpartition("/")
        members[(parent, re.sub(r"_\d+$", "", name))].append(int(ns_))
    return {k: sum(v) for k, v in members.items() if len(v) >= 2}


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    bert = TRACES / "tracelens__mi300__bert-small-uncased.json.gz"
    tsf = TRACES / "tracelens__h100__timesformer-base-k400.json.gz"
    replay = TRACES / "tracelens__vllm_decode_full__graph_execution.json.gz"
    capture = TRACES / "tracelens__vllm_decode_full__capture_rank_0.pt.trace.json.gz"
    if not all(p.exists() for p in (bert, tsf, replay, capture)):
        pytest.skip("shared traces absent")
    root = tmp_path_factory.mktemp("layers")
    job = root / "decode"
    (job / "capture_traces").mkdir(parents=True)
    shutil.copy(replay, job / replay.name)  # copies in tmp: links out of the folder are not followed
    shutil.copy(capture, job / "capture_traces" / capture.name)
    wh = Warehouse(root / "wh")
    assert wh.ingest([bert, tsf, job]).ok
    return wh


@pytest.mark.parametrize("file_name", [
    "tracelens__mi300__bert-small-uncased.json.gz", "tracelens__h100__timesformer-base-k400.json.gz",
    "tracelens__vllm_decode_full__graph_execution.json.gz"])
def test_real_traces_pick_the_heaviest_repeated_blocks(real: Warehouse, file_name: str) -> None:
    ref = real.resolve_run(f"file_name={file_name}")
    data = collect_modules(real, ref)
    assert data is not None
    groups = _groups(data.tree)
    rows = layers(data)
    if groups:  # BERT's and TimeSformer's layers
        assert data.cls is not None
        chosen = groups[(str(data.parent), data.cls)]
        assert chosen == max(groups.values())
        assert rows.height >= 2 and int(rows["gpu_ns"].sum()) == chosen
    else:  # the vLLM replay's compiled graph: no repeated module class, the first wide depth
        assert data.cls is None and rows.height >= 1
    text = modules_section(data).text
    assert SENTENCE.match(text) and TAIL.search(text), text
    assert "None" not in text and "  " not in text
    if "vllm" in file_name:  # capture-derived modules: the match quality is said beside them
        assert "Graph replays: 421 of 421 replayed GPU ops matched" in text and "match quality 100.0%" in text
