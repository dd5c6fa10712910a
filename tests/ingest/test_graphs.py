"""CUDA/HIP graphs: launch classification, graph positions, captures and capture -> replay.

Expected values come from plain-``json`` loops over the vLLM HIP-graph replay and its
capture trace (TraceLens's test data) and over synthetic traces: the runtime call of each
GPU op by correlation id, the launches between a BeginCapture and its EndCapture, the
innermost cpu_op and the nn.Module spans enclosing each captured launch.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers_ingest import GPU_CATS, RUNTIME_CATS, captured_launches, load_trace, ns, run_id_of
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.synth import SynthConfig, write_trace
from tracewh.synth.catalog import GRAPH_CAPTURE_OPS

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
REPLAY = TRACES / "tracelens__vllm_decode_full__graph_execution.json.gz"
CAPTURE = TRACES / "tracelens__vllm_decode_full__capture_rank_0.pt.trace.json.gz"
BERT = TRACES / "tracelens__mi300__bert-small-uncased.json.gz"


def _kind(name: str) -> str:
    if re.match(r"(cuda|hip|cu)GraphLaunch", name):
        return "graph"
    if "Memcpy" in name:
        return "memcpy"
    if "Memset" in name:
        return "memset"
    return "kernel" if re.search(r"Launch(Cooperative)?Kernel", name) else "other"


def _launches(events: list[Any]) -> dict[int, tuple[int, dict[str, Any]]]:
    """GPU op index -> (index, event) of its runtime call, by correlation id (earliest call)."""
    rt: dict[Any, tuple[int, int]] = {}
    for i, e in enumerate(events):
        c = (e.get("args") or {}).get("correlation")
        if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and c is not None:
            rt[c] = min(rt.get(c, (ns(e["ts"]) or 0, i)), (ns(e["ts"]) or 0, i))
    out = {}
    for i, e in enumerate(events):
        c = (e.get("args") or {}).get("correlation")
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS and c in rt:
            out[i] = (rt[c][1], events[rt[c][1]])
    return out


def _innermost(events: list[Any], cat: str, pid: Any, tid: Any, t: int) -> dict[str, Any] | None:
    hits = [e for e in events if e.get("ph") == "X" and e.get("cat") == cat and (e["pid"], e["tid"]) == (pid, tid)
            and ns(e.get("dur")) and (ns(e["ts"]) or 0) <= t < (ns(e["ts"]) or 0) + (ns(e["dur"]) or 0)]
    return max(hits, key=lambda e: (ns(e["ts"]), -(ns(e["dur"]) or 0))) if hits else None


def _module_path(events: list[Any], pid: Any, tid: Any, t: int) -> str | None:
    mods = sorted((e for e in events if e.get("cat") == "python_function" and (e["pid"], e["tid"]) == (pid, tid)
                   and str(e["name"]).startswith("nn.Module: ") and ns(e.get("dur"))
                   and (ns(e["ts"]) or 0) <= t < (ns(e["ts"]) or 0) + (ns(e["dur"]) or 0)),
                  key=lambda e: (ns(e["ts"]), -(ns(e["dur"]) or 0)))
    return "/".join(e["name"][11:] for e in mods) or None


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    """The replay in a job folder, its capture in capture_traces/ (as vLLM writes them)."""
    if not all(p.exists() for p in (REPLAY, CAPTURE, BERT)):
        pytest.skip("shared traces absent")
    root = tmp_path_factory.mktemp("vllm")
    job = root / "decode"
    (job / "capture_traces").mkdir(parents=True)
    (job / REPLAY.name).symlink_to(REPLAY)
    (job / "capture_traces" / CAPTURE.name).symlink_to(CAPTURE)
    wh = Warehouse(root / "wh")
    # links out of a scanned folder are not followed (issue 33): the links are given by name
    assert wh.ingest([job / REPLAY.name, job / "capture_traces" / CAPTURE.name, BERT]).ok
    return wh


def test_launch_kinds_positions_and_run_kinds(vllm: Warehouse) -> None:
    events = load_trace(REPLAY, exact=True)["traceEvents"]
    launch = _launches(events)
    rid = run_id_of(REPLAY)
    got = vllm.sql("SELECT event_index, launch_kind, graph_position FROM gpu_ops WHERE run_id = ?", [rid])
    kinds = {i: _kind(e["name"]) for i, (_, e) in launch.items()}
    by_launch: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for i, (li, _) in launch.items():
        if kinds[i] == "graph":
            by_launch[li].append((ns(events[i]["ts"]) or 0, i))
    pos = {i: k for ops in by_launch.values() for k, (_, i) in enumerate(sorted(ops), start=1)}
    assert {r[0]: (r[1], r[2]) for r in got.iter_rows()} == {
        i: (kinds.get(i), pos.get(i)) for i, e in enumerate(events)
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS}
    assert Counter(kinds.values()) == {"graph": 421, "memcpy": 9, "kernel": 4}
    runs = dict(vllm.sql("SELECT run_id, kind FROM runs").iter_rows())
    assert runs == {rid: "replay", run_id_of(CAPTURE): "capture", run_id_of(BERT): "eager"}
    jobs = vllm.sql("SELECT DISTINCT job FROM runs WHERE kind <> 'eager'")
    assert jobs.height == 1 and jobs["job"][0].endswith("decode")  # capture_traces/ joins the job


def test_graph_nodes_of_the_capture(vllm: Warehouse) -> None:
    events = load_trace(CAPTURE, exact=True)["traceEvents"]
    captured = captured_launches(events)
    assert len(captured) == 421
    base = vllm.sql("SELECT base_time_ns AS b FROM runs WHERE run_id = ?", [run_id_of(CAPTURE)])["b"][0]
    got = vllm.sql("SELECT * FROM graph_nodes ORDER BY position")
    assert got["position"].to_list() == list(range(1, 422)) and set(got["capture"]) == {1}
    # the oracles, as _innermost and _module_path define them, over the spans that contain each
    # launch found by arrays (scanning all 124k spans per launch in Python took ~40 s)
    spans = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "python_function")
             and ns(e.get("dur"))]
    start = np.array([ns(e["ts"]) or 0 for e in spans], dtype=np.int64)
    end = start + np.array([ns(e["dur"]) or 0 for e in spans], dtype=np.int64)
    for row, (_, i) in zip(got.iter_rows(named=True), captured, strict=True):
        e = events[i]
        t = ns(e["ts"]) or 0
        around = [spans[k] for k in np.flatnonzero((start <= t) & (t < end))]
        op = _innermost(around, "cpu_op", e["pid"], e["tid"], t)
        assert (row["launch_event_index"], row["launch_name"], row["launch_ts_ns"] - base) == (i, e["name"], t)
        assert row["kernel_name"] == e["args"]["kernel"]
        assert row["op_name"] == (op["name"] if op else None)
        assert row["module_path"] == _module_path(around, e["pid"], e["tid"], t)
    assert got["module_path"].null_count() == 0


def test_capture_to_replay_mapping(vllm: Warehouse) -> None:
    """Replayed op at position p <- captured launch p; its kernel name agrees at every p."""
    replay = load_trace(REPLAY, exact=True)["traceEvents"]
    capture = load_trace(CAPTURE, exact=True)["traceEvents"]
    nodes = [capture[i] for _, i in captured_launches(capture)]
    rid = run_id_of(REPLAY)
    m = vllm.sql("SELECT * FROM graph_replay(?) ORDER BY graph_position", [rid])
    assert m.height == 421 and m["name_match"].all()
    pos = dict(vllm.sql("SELECT event_index, graph_position FROM gpu_ops WHERE run_id = ? AND "
                        "graph_position IS NOT NULL", [rid]).iter_rows())
    cpu_ops = [e for e in capture if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    for row in m.iter_rows(named=True):
        node = nodes[row["graph_position"] - 1]
        assert replay[row["event_index"]]["name"] == node["args"]["kernel"]
        op = _innermost(cpu_ops, "cpu_op", node["pid"], node["tid"], ns(node["ts"]) or 0)
        assert row["op_name"] == (op["name"] if op else None)
        assert pos[row["event_index"]] == row["graph_position"]
    # ops and modules of the replay use the capture: GPU time per operator, by hand
    want: Counter[str | None] = Counter()
    own = {r[0]: r[1] for r in vllm.sql("SELECT event_index, op_name FROM gpu_ops WHERE run_id = ?", [rid]).iter_rows()}
    mapped = dict(m.select("event_index", "op_name").iter_rows())
    for i, e in enumerate(replay):
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS:
            want[mapped[i] if i in mapped else own[i]] += ns(e["dur"]) or 0
    ops = vllm.ops(rid)
    got: Counter[str | None] = Counter()
    for r in ops.iter_rows(named=True):
        got[r["op_name"]] += r["gpu_ns"]
    assert got == want
    assert ops["from_capture"].sum() == 421
    tree = vllm.modules(rid, depth=1)
    roots = {r["module_path"]: r["kernels"] for r in tree.iter_rows(named=True)}
    assert roots["GptOssForCausalLM_0"] == 421


def test_queue_and_launches_count_a_graph_launch_once(vllm: Warehouse) -> None:
    events = load_trace(REPLAY, exact=True)["traceEvents"]
    launch = _launches(events)
    first: dict[int, tuple[int, int]] = {}  # launch index -> (first op start, op index)
    for i, (li, _) in launch.items():
        first[li] = min(first.get(li, (ns(events[i]["ts"]) or 0, i)), (ns(events[i]["ts"]) or 0, i))
    rid = run_id_of(REPLAY)
    lat = vllm.launches(rid, by="op")
    assert lat.height == len(first) == 14  # 13 eager launches and one hipGraphLaunch
    graph = lat.filter(lat["launch_kind"] == "graph").row(0, named=True)
    g = next(e for e in events if e.get("name") == "hipGraphLaunch")
    gi = events.index(g)
    assert graph["launch_to_start_ns"] == first[gi][0] - (ns(g["ts"]) or 0)
    # queue depth by hand: +1 at each launch start, -1 when its first op starts
    pts = []
    for li, (t_first, _) in first.items():
        t_in = ns(events[li]["ts"]) or 0
        pts += [(t_in, 1), (max(t_first, t_in), -1)]
    depth, worst = 0, 0
    for _, d in sorted(pts, key=lambda p: (p[0], p[1])):
        depth += d
        worst = max(worst, depth)
    q = vllm.queue_depth(rid)
    assert q["max_depth"].max() == worst <= 14
    gl = vllm.launches(rid, by="graph").row(0, named=True)
    assert (gl["ops"], gl["capture"], gl["name_matches"]) == (421, 1, 421)
    link = vllm.launches(rid, by="linkage").row(0, named=True)
    assert (link["graph_launches"], link["graph_ops"]) == (1, 421)


@pytest.mark.parametrize("flavor", ["cuda", "rocm"])
def test_synthetic_capture_and_replays(tmp_path: Path, flavor: str) -> None:
    path = tmp_path / "g.pt.trace.json"
    write_trace(path, SynthConfig(steps=3, layers=1, seed=6, flavor=flavor, python=True, graph_capture=True))
    events = load_trace(path, exact=True)["traceEvents"]
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([path]).ok
    rid = run_id_of(path)
    nodes = wh.sql("SELECT position, op_name, module_path, kernel_name FROM graph_nodes ORDER BY position")
    assert [(r[1], r[2].split("/")[1].rsplit("_", 1)[0]) for r in nodes.iter_rows()] == [
        (op, module) for module, op in GRAPH_CAPTURE_OPS]
    assert nodes["kernel_name"].null_count() == (4 if flavor == "cuda" else 0)  # CUDA: no kernel arg
    launches = wh.launches(rid, by="graph")
    assert launches.height == 3 and (launches["capture"] == 1).all() and (launches["ops"] == 4).all()
    replay = wh.sql("SELECT * FROM graph_replay(?)", [rid])
    names = {i: e["name"] for i, e in enumerate(events)}
    kernels = [names[i] for i in replay.sort("launch_ts_ns", "graph_position")["event_index"].head(4)]
    assert replay.height == 12 and all(
        r["op_name"] == GRAPH_CAPTURE_OPS[r["graph_position"] - 1][1] for r in replay.iter_rows(named=True))
    capture_names = [e["args"].get("kernel") for _, i in captured_launches(events) for e in [events[i]]]
    if flavor == "rocm":
        assert capture_names == kernels and replay["name_match"].all()
    assert wh.sql("SELECT kind FROM runs")["kind"].to_list() == ["replay"]
    res = CliRunner().invoke(app, ["launches", "-w", str(wh.root), "--by", "graph", "-f", "csv"])
    assert res.exit_code == 0 and res.output.count("\n") == 4, res.output
