"""Annotation attribution apart from operator attribution, and reading older warehouses.

Expected values come from plain-``json`` loops over the traces: each GPU op's launch (by
correlation id), the innermost ``cpu_op`` and the ``user_annotation`` spans enclosing it on
the launch's thread, the ``gpu_user_annotation`` spans enclosing the op on its GPU track.
"""

from __future__ import annotations

import warnings
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers_ingest import GPU_CATS, RUNTIME_CATS, load_trace, ns, run_id_of
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.schema import arrow as schema
from tracewh.synth import SynthConfig, write_trace

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
VLLM = TRACES / "tracelens__vllm_decode_full__graph_execution.json.gz"
CAPTURE = TRACES / "tracelens__vllm_decode_full__capture_rank_0.pt.trace.json.gz"
BERT = TRACES / "tracelens__mi300__bert-small-uncased.json.gz"
ALL = [VLLM, CAPTURE, BERT]


def _nest(spans: list[tuple[int, int, int, str]]) -> dict[int, tuple[str, int, int | None]]:
    """Spans of one track (start, end, index, name) -> index: (path, depth, parent)."""
    spans = sorted(spans, key=lambda s: (s[0], -s[1], s[2]))
    out: dict[int, tuple[str, int, int | None]] = {}
    for k, (t0, t1, i, name) in enumerate(spans):
        outer = [s for s in spans[:k] if s[0] <= t0 and t1 <= s[1]]
        out[i] = ("/".join([s[3] for s in outer] + [name]), len(outer) + 1,
                  outer[-1][2] if outer else None)
    return out


def _tracks(events: list[Any], keep: Any) -> dict[tuple[Any, Any], list[tuple[int, int, int, str]]]:
    by: dict[tuple[Any, Any], list[tuple[int, int, int, str]]] = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("ph") == "X" and keep(e) and ns(e.get("dur")):
            t = ns(e["ts"]) or 0
            by[(e["pid"], e["tid"])].append((t, t + (ns(e["dur"]) or 0), i, e["name"]))
    return by


def _is_ann(e: dict[str, Any]) -> bool:
    return e.get("cat") == "user_annotation" and not e["name"].startswith("ProfilerStep#")


def expected(events: list[Any]) -> dict[str, Any]:
    """Per GPU op: (innermost cpu_op name, annotation path, GPU-side annotation path)."""
    ann = _tracks(events, _is_ann)
    gpu_ann = _tracks(events, lambda e: e.get("cat") == "gpu_user_annotation")
    ops = _tracks(events, lambda e: e.get("cat") == "cpu_op")
    launch: dict[Any, tuple[int, int, Any]] = {}
    for i, e in enumerate(events):
        c = (e.get("args") or {}).get("correlation")
        if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and c is not None:
            t = ns(e["ts"]) or 0
            if c not in launch or (t, i) < launch[c][:2]:
                launch[c] = (t, i, e)
    ann_paths = {i: v for spans in ann.values() for i, v in _nest(spans).items()}
    gpu_paths = {i: v for spans in gpu_ann.values() for i, v in _nest(spans).items()}

    def inner(spans: list[tuple[int, int, int, str]], t: int) -> int | None:
        hits = [s for s in spans if s[0] <= t < s[1]]
        return max(hits, key=lambda s: (s[0], -s[1], s[2]))[2] if hits else None

    per_op: dict[int, tuple[Any, Any, Any]] = {}
    for i, e in enumerate(events):
        if e.get("ph") != "X" or e.get("cat") not in GPU_CATS:
            continue
        g = inner(gpu_ann.get((e["pid"], e["tid"]), []), ns(e["ts"]) or 0)
        gpu_path = gpu_paths[g][0] if g is not None else None
        c = (e.get("args") or {}).get("correlation")
        if c not in launch:
            per_op[i] = (None, None, gpu_path)
            continue
        t, _, rt = launch[c]
        o = inner(ops.get((rt["pid"], rt["tid"]), []), t)
        a = inner(ann.get((rt["pid"], rt["tid"]), []), t)
        per_op[i] = (events[o]["name"] if o is not None else None,
                     ann_paths[a][0] if a is not None else None, gpu_path)
    return {"ops": per_op, "spans": ann_paths, "gpu_spans": gpu_paths}


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    if not all(p.exists() for p in ALL):
        pytest.skip("shared traces absent")
    wh = Warehouse(tmp_path_factory.mktemp("ann") / "wh")
    assert wh.ingest(ALL).ok
    return wh


@pytest.mark.parametrize("trace", ALL, ids=["vllm", "capture", "bert"])
def test_operators_and_annotations_of_real_traces(real: Warehouse, trace: Path) -> None:
    events = load_trace(trace, exact=True)["traceEvents"]
    want = expected(events)
    rid = run_id_of(trace)
    got = real.sql("SELECT event_index, op_name, annotation_path FROM gpu_ops WHERE run_id = ?", [rid])
    assert {r[0]: r[1:] for r in got.iter_rows()} == {i: v[:2] for i, v in want["ops"].items()}
    spans = real.sql("SELECT event_index, annotation_path, depth, parent_event_index "
                     "FROM annotation_spans WHERE run_id = ?", [rid])
    assert {r[0]: r[1:] for r in spans.iter_rows()} == want["spans"]
    # GPU time per annotation path (inclusive) and per GPU-side annotation path
    dur = {i: ns(events[i]["dur"]) or 0 for i in want["ops"]}
    for source, column in (("user_annotation", 1), ("gpu_user_annotation", 2)):
        inclusive: Counter[str | None] = Counter()
        for i, v in want["ops"].items():
            names = v[column].split("/") if v[column] else []
            for d in range(1, len(names) + 1):
                inclusive["/".join(names[:d])] += dur[i]
            if not names:
                inclusive[None] += dur[i]
        tree = real.sql("SELECT * FROM annotation_tree(?, source := ?)", [rid, source])
        assert {r["annotation_path"]: r["gpu_ns"] for r in tree.iter_rows(named=True)} == {
            k: v for k, v in inclusive.items() if v or k is not None}, source


def test_ops_never_lands_on_an_annotation(real: Warehouse) -> None:
    """The vLLM replay's kernels used to be attributed to its one user_annotation (96%)."""
    rid = run_id_of(VLLM)
    names = set(real.sql("SELECT DISTINCT name FROM annotation_spans WHERE run_id = ?", [rid])["name"])
    assert names
    ops = real.ops(rid)
    assert not names & set(ops["op_name"].drop_nulls())
    tree = real.annotations(rid, depth=1)
    top = tree.row(0, named=True)
    assert top["annotation_path"].startswith("execute_32_context_0") and top["pct"] > 95


def test_annotations_cli(real: Warehouse) -> None:
    for args, want in ((["--run", run_id_of(CAPTURE)], "capture_32_FULL"),
                       (["--run", run_id_of(CAPTURE), "--gpu", "-f", "json"], '"capture_32_FULL"')):
        res = CliRunner().invoke(app, ["annotations", "-w", str(real.root), *args])
        assert res.exit_code == 0 and want in res.output, res.output


def test_synthetic_annotations(tmp_path: Path) -> None:
    """synth wraps its graph replay in a CUDAGraph.replay annotation: no operator there."""
    trace = tmp_path / "s.pt.trace.json"
    write_trace(trace, SynthConfig(steps=2, layers=1, seed=2))
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([trace]).ok
    events = load_trace(trace, exact=True)["traceEvents"]
    want = expected(events)["ops"]
    got = wh.sql("SELECT event_index, op_name, annotation_path FROM gpu_ops")
    assert {r[0]: r[1:] for r in got.iter_rows()} == {i: v[:2] for i, v in want.items()}
    replay = [v for v in want.values() if v[1] == "CUDAGraph.replay"]
    assert len(replay) == 8 and all(v[0] is None for v in replay)  # 4 kernels a step


def test_torch_record_function_tree(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch = pytest.importorskip("torch")
        from torch.profiler import ProfilerActivity, profile, record_function

        model, x = torch.nn.Linear(8, 8), torch.randn(4, 8)
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(2):
                with record_function("step"), record_function("forward"):
                    model(x)
                with record_function("step"), record_function("optimizer"):
                    x = x * 1.0
        trace = tmp_path / "rf.pt.trace.json"
        prof.export_chrome_trace(str(trace))
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([trace]).ok
    got = wh.sql("SELECT annotation_path, count(*) AS n, min(depth) AS d FROM annotation_spans "
                 "GROUP BY 1 ORDER BY 1")
    assert got.rows() == [("step", 4, 1), ("step/forward", 2, 2), ("step/optimizer", 2, 2)]


def test_a_warehouse_written_before_columns_were_added(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files and Delta schemas without the added columns read as NULL; a new ingest adds them."""
    a, b = tmp_path / "a.pt.trace.json", tmp_path / "b.pt.trace.json"
    write_trace(a, SynthConfig(steps=1, layers=1, seed=1))
    write_trace(b, SynthConfig(steps=1, layers=1, seed=2))
    root = tmp_path / "wh"
    with monkeypatch.context() as m:  # as a tracewh before ADDED_COLUMNS wrote it
        m.setattr(schema, "SCHEMA_KEY", "a schema before ADDED_COLUMNS")  # its marker's key
        for table, added in schema.ADDED_COLUMNS.items():
            spec = schema.TABLES[table]
            old = pa.schema([f for f in spec.schema if f.name not in added])
            m.setitem(schema.TABLES, table, schema.TableSpec(spec.name, old, spec.partition_by, spec.doc))
        assert Warehouse(root).ingest([a]).ok
    old_wh = Warehouse(root)
    assert old_wh.store.missing_columns("gpu_ops") == list(schema.ADDED_COLUMNS["gpu_ops"])
    # read before any new ingest: the columns are NULL
    got = old_wh.sql("SELECT count(*) AS n, count(annotation_path) AS a FROM gpu_ops")
    assert got.row(0) == (got["n"][0], 0) and got["n"][0] > 0
    assert old_wh.annotations("latest").height == 1  # everything in the NULL row
    # a new ingest evolves the schema; old rows stay NULL, new rows are filled
    assert old_wh.ingest([b]).ok
    assert old_wh.store.missing_columns("gpu_ops") == []
    per_run = old_wh.sql("SELECT run_id, count(annotation_path) AS a FROM gpu_ops GROUP BY 1")
    assert dict(per_run.iter_rows()) == {run_id_of(a): 0, run_id_of(b): 4}
    assert len(old_wh.store.file_uris("gpu_ops")) == 2  # the old file (no annotation_path), a new one
    scanned = old_wh.scan("gpu_ops").collect()  # Polars reads the old file's column as NULL
    assert scanned["annotation_path"].drop_nulls().len() == 4 and scanned.height > 4
    assert old_wh.verify().ok
    compact = old_wh.compact(retain_hours=0)
    assert compact is not None and old_wh.verify().ok
    assert dict(old_wh.sql("SELECT run_id, count(annotation_path) AS a FROM gpu_ops GROUP BY 1")
                .iter_rows()) == {run_id_of(a): 0, run_id_of(b): 4}
    assert old_wh.scan("gpu_ops").collect()["annotation_path"].drop_nulls().len() == 4
