"""Module attribution at ingest: gpu_ops.module_path, module_spans and the module macros.

Expected values come from plain-``json`` loops over the trace (each GPU op's launch by
correlation id, the ``nn.Module: X`` spans enclosing it on the launch's thread), from
the structure of a model captured with torch, and from synthetic traces.
"""

from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from helpers_ingest import GPU_CATS, RUNTIME_CATS, load_trace, ns, run_id_of
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.ingest.pipeline import IngestOptions, ingest_file
from tracewh.synth import SynthConfig, write_trace

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
BERT = TRACES / "tracelens__mi300__bert-small-uncased.json.gz"
TIMESFORMER = TRACES / "tracelens__h100__timesformer-base-k400.json.gz"
PREFIX = "nn.Module: "


def _spans(events: list[Any]) -> dict[int, dict[str, Any]]:
    """Every module span (positive duration): index -> name, thread, times, path, depth, parent."""
    by_thread: dict[tuple[Any, Any], list[tuple[int, int, int, str]]] = defaultdict(list)
    for i, e in enumerate(events):
        if (e.get("ph") == "X" and e.get("cat") == "python_function"
                and str(e.get("name", "")).startswith(PREFIX) and ns(e.get("dur"))):
            t = ns(e["ts"])
            assert t is not None
            by_thread[(e["pid"], e["tid"])].append((t, t + (ns(e["dur"]) or 0), i, e["name"][len(PREFIX):]))
    out: dict[int, dict[str, Any]] = {}
    for (pid, tid), spans in by_thread.items():
        # outer first: earlier start, then longer, then earlier in the file
        spans.sort(key=lambda s: (s[0], -s[1], s[2]))
        for k, (t0, t1, i, name) in enumerate(spans):
            outer = [s for s in spans[:k] if s[0] <= t0 and t1 <= s[1]]
            out[i] = {"pid": pid, "tid": tid, "ts_ns": t0, "dur_ns": t1 - t0, "name": name,
                      "module_path": "/".join([s[3] for s in outer] + [name]),
                      "depth": len(outer) + 1, "parent_event_index": outer[-1][2] if outer else None}
    return out


def _op_paths(events: list[Any]) -> dict[int, str | None]:
    """GPU op index -> module path of its launch (linked by correlation id) or None."""
    spans = _spans(events)
    launch: dict[Any, tuple[int, int, Any]] = {}
    for i, e in enumerate(events):
        c = (e.get("args") or {}).get("correlation")
        if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and c is not None:
            t = ns(e["ts"])
            assert t is not None
            if c not in launch or (t, i) < launch[c][:2]:
                launch[c] = (t, i, e)
    out: dict[int, str | None] = {}
    for i, e in enumerate(events):
        c = (e.get("args") or {}).get("correlation")
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS and c in launch:
            t, _, rt = launch[c]
            enclosing = [s for s in spans.values() if (s["pid"], s["tid"]) == (rt["pid"], rt["tid"])
                         and s["ts_ns"] <= t < s["ts_ns"] + s["dur_ns"]]
            out[i] = max(enclosing, key=lambda s: s["depth"])["module_path"] if enclosing else None
    return out


def _got_paths(wh: Warehouse, rid: str) -> dict[int, str | None]:
    df = wh.sql("SELECT event_index, module_path FROM gpu_ops WHERE run_id = ? "
                "AND link_method = 'correlation'", [rid])
    return dict(df.iter_rows())


def _got_spans(wh: Warehouse, rid: str) -> dict[int, dict[str, Any]]:
    """module_spans rows of run ``rid``, timestamps relative to the trace's base time."""
    base = wh.sql("SELECT coalesce(base_time_ns, 0) AS b FROM runs WHERE run_id = ?", [rid])["b"][0]
    df = wh.sql("SELECT * EXCLUDE (run_id, ingest_id, day) FROM module_spans WHERE run_id = ?", [rid])
    return {r.pop("event_index"): {**r, "ts_ns": r["ts_ns"] - base} for r in df.iter_rows(named=True)}


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    if not BERT.exists() or not TIMESFORMER.exists():
        pytest.skip("shared traces absent")
    wh = Warehouse(tmp_path_factory.mktemp("modules") / "wh")
    assert wh.ingest([BERT, TIMESFORMER]).ok
    return wh


@pytest.mark.parametrize("trace", [BERT, TIMESFORMER], ids=["bert", "timesformer"])
def test_module_paths_of_real_traces(real: Warehouse, trace: Path) -> None:
    events = load_trace(trace, exact=True)["traceEvents"]
    expected = _op_paths(events)
    assert sum(p is not None for p in expected.values()) > 50
    assert _got_paths(real, run_id_of(trace)) == expected
    assert _got_spans(real, run_id_of(trace)) == _spans(events)


def test_pure_staging_path_and_skip_python_give_the_same_paths(tmp_path: Path) -> None:
    if not BERT.exists():
        pytest.skip("shared traces absent")
    expected = _op_paths(load_trace(BERT, exact=True)["traceEvents"])
    for name, options in (("pure", IngestOptions(native=False)),
                          ("skip", IngestOptions(skip_python=True)),
                          ("pure-skip", IngestOptions(native=False, skip_python=True))):
        wh = Warehouse(tmp_path / name)
        wh.store.create()
        assert ingest_file(wh.store, BERT, options).outcome == "ingested"
        assert _got_paths(wh, run_id_of(BERT)) == expected, name
        n_py = wh.sql("SELECT count(*) AS n FROM python")["n"][0]
        n_mod = wh.sql("SELECT count(*) AS n FROM module_spans")["n"][0]
        assert n_mod == 84 and (n_py == 84 if options.skip_python else n_py > 84), name


@pytest.mark.parametrize("flavor", ["cuda", "rocm"])
def test_synthetic_module_tree(tmp_path: Path, flavor: str) -> None:
    trace = tmp_path / f"{flavor}.pt.trace.json"
    write_trace(trace, SynthConfig(steps=2, layers=3, python=True, seed=4, flavor=flavor))
    events = load_trace(trace, exact=True)["traceEvents"]
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([trace]).ok
    rid = run_id_of(trace)
    expected = _op_paths(events)
    assert _got_paths(wh, rid) == expected
    # known answer of the synthetic model: DiT_0 holds 3 blocks, each with 2 LayerNorms,
    # 4 Linears and one Attention, numbered per class across the step
    paths = {p for p in expected.values() if p}
    blocks = {p.split("/")[1] for p in paths if p.startswith("DiT_0/")}
    assert blocks == {"DiTBlock_0", "DiTBlock_1", "DiTBlock_2"}
    assert "DiT_0/DiTBlock_2/Linear_11" in paths and "DiT_0/DiTBlock_1/Attention_1" in paths
    tree = wh.modules(rid, depth=2)
    got = {r["module_path"]: r for r in tree.iter_rows(named=True)}
    for block in blocks:
        node = got[f"DiT_0/{block}"]
        ops = [i for i, p in expected.items()
               if p and (p == f"DiT_0/{block}" or p.startswith(f"DiT_0/{block}/"))]
        assert node["kernels"] == len(ops)
        assert node["gpu_ns"] == sum(ns(events[i]["dur"]) or 0 for i in ops)
        assert node["calls"] == 2  # once per step
    # the NULL row and the roots add up to the run's GPU time
    total = sum(ns(e["dur"]) or 0 for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS)
    assert sum(r["gpu_ns"] for r in tree.iter_rows(named=True) if r["depth"] <= 1) == total


def test_module_macros_against_plain_loops(real: Warehouse) -> None:
    events = load_trace(TIMESFORMER, exact=True)["traceEvents"]
    rid = run_id_of(TIMESFORMER)
    paths = _op_paths(events)
    dur = {i: ns(e["dur"]) or 0 for i, e in enumerate(events)
           if e.get("ph") == "X" and e.get("cat") in GPU_CATS}
    for i in dur:  # GPU ops linked otherwise or not at all have their own (NULL here) path
        paths.setdefault(i, None)
    calls = Counter(s["module_path"] for s in _spans(events).values())
    # flat, cut at 3 names: each op under its cut path
    flat: Counter[str | None] = Counter()
    for i, p in paths.items():
        flat["/".join(p.split("/")[:3]) if p else None] += dur[i]
    got = real.sql("SELECT * FROM module_gpu_time(?, max_depth := 3)", [rid])
    assert {r["module_path"]: r["gpu_ns"] for r in got.iter_rows(named=True)} == dict(flat)
    assert {r["module_path"]: r["calls"] for r in got.iter_rows(named=True) if r["module_path"]} == {
        p: calls[p] for p in flat if p}
    assert abs(got["pct"].sum() - 100.0) < 1e-9
    # tree: inclusive time of every prefix
    inclusive: Counter[str] = Counter()
    for i, p in paths.items():
        names = p.split("/") if p else []
        for d in range(1, len(names) + 1):
            inclusive["/".join(names[:d])] += dur[i]
    tree = real.modules(rid)
    got_tree = {r["module_path"]: r["gpu_ns"] for r in tree.iter_rows(named=True) if r["module_path"]}
    assert got_tree == dict(inclusive)
    # depth first: every node comes after its parent
    seen: set[str] = set()
    for p in tree["module_path"].drop_nulls():
        assert "/" not in p or p.rsplit("/", 1)[0] in seen
        seen.add(p)
    top = real.modules(rid, top=10)
    assert top.height == 10 and set(top["module_path"].drop_nulls()) <= set(inclusive)
    assert all(p.rsplit("/", 1)[0] in set(top["module_path"]) for p in top["module_path"] if "/" in p)


def test_module_segments_give_the_innermost_module(real: Warehouse) -> None:
    events = load_trace(BERT, exact=True)["traceEvents"]
    spans = _spans(events)
    seg = real.sql("SELECT s.module_path, s.start_ns - coalesce(r.base_time_ns, 0) AS start_ns, "
                   "s.end_ns - coalesce(r.base_time_ns, 0) AS end_ns FROM module_segments(?) s, "
                   "runs r WHERE r.run_id = ?", [run_id_of(BERT), run_id_of(BERT)])
    assert seg.height > 100
    starts = sorted(seg["start_ns"])
    assert starts == sorted(set(starts))
    rows = seg.iter_rows(named=True)
    for r in rows:
        t = r["start_ns"]
        open_spans = [s for s in spans.values() if s["ts_ns"] <= t < s["ts_ns"] + s["dur_ns"]]
        assert r["module_path"] == max(open_spans, key=lambda s: s["depth"])["module_path"]
        assert r["end_ns"] > t


def test_modules_cli_shows_a_tree(real: Warehouse) -> None:
    res = CliRunner().invoke(app, ["modules", "-w", str(real.root), "--run", run_id_of(BERT),
                                   "--depth", "4", "--top", "8"])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert any(ln.startswith("BertLMHeadModel_0") for ln in lines)
    assert any(ln.startswith("      BertLayer_0") for ln in lines)  # depth 4: six spaces
    res = CliRunner().invoke(app, ["modules", "-w", str(real.root), "--run", run_id_of(BERT),
                                   "--depth", "0"])
    assert res.exit_code == 2 and "--depth" in res.output


def test_torch_capture_module_tree(tmp_path: Path) -> None:
    """A CPU trace captured with torch: module spans are the model's structure, per call."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch = pytest.importorskip("torch")
        from torch.profiler import ProfilerActivity, profile

        class Block(torch.nn.Module):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.fc = torch.nn.Linear(8, 8)
                self.act = torch.nn.ReLU()

            def forward(self, x: Any) -> Any:
                return self.act(self.fc(x))

        class Net(torch.nn.Module):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.blocks = torch.nn.Sequential(Block(), Block())
                self.head = torch.nn.Linear(8, 2)

            def forward(self, x: Any) -> Any:
                return self.head(self.blocks(x))

        model, x = Net(), torch.randn(4, 8)
        with profile(activities=[ProfilerActivity.CPU], with_stack=True, with_modules=True) as prof:
            for _ in range(3):
                model(x)
        trace = tmp_path / "net.pt.trace.json"
        prof.export_chrome_trace(str(trace))
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([trace]).ok
    got = wh.sql("SELECT module_path, count(*) AS calls, min(depth) AS depth FROM module_spans "
                 "GROUP BY 1 ORDER BY 1")
    structure = {
        "Net_0": 1, "Net_0/Linear_2": 2, "Net_0/Sequential_0": 2,
        "Net_0/Sequential_0/Block_0": 3, "Net_0/Sequential_0/Block_0/Linear_0": 4,
        "Net_0/Sequential_0/Block_0/ReLU_0": 4, "Net_0/Sequential_0/Block_1": 3,
        "Net_0/Sequential_0/Block_1/Linear_1": 4, "Net_0/Sequential_0/Block_1/ReLU_1": 4,
    }
    assert {r[0]: (r[1], r[2]) for r in got.iter_rows()} == {p: (3, d) for p, d in structure.items()}
    assert _got_spans(wh, run_id_of(trace)) == _spans(load_trace(trace, exact=True)["traceEvents"])
