"""Ingest of the real traces in ../shared/traces, checked against plain-json computations.

The default suite ingests every real trace below ~1.2 MB gzip (ns_resolution
included); the five largest are checked under ``slow``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers_ingest import (
    CPU_OP_CATS,
    GPU_CATS,
    RUNTIME_CATS,
    expected_rows,
    incomplete_runs,
    load_trace,
    ns,
    one_line_error,
    read_runs,
    run_id_of,
    visible_column,
    visible_state,
)

from tracewh.api import Warehouse

NOT_KINETO = "execution_trace__benchmark_simple_add_et.json.gz"
BIG = 1_200_000  # bytes of gzip above which a trace is only checked under `slow`
ALL = sorted(
    p.name
    for p in (Path(__file__).resolve().parents[2] / ".." / "shared" / "traces").glob("*.json*")
)
WITH_BASE = [
    "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "mtia_inference_trace__mtia_inference_rank_0.json.gz",
    "nccl_parser_config__nccl_data.json.gz",
    "triton_example__triton_example.json.gz",
]
NS_TRACE = "ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


def _params(names: list[str]) -> list[Any]:
    root = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
    out = []
    for name in names:
        big = (root / name).is_file() and (root / name).stat().st_size > BIG
        out.append(pytest.param(name, id=name.split("__")[0], marks=[pytest.mark.slow] if big else []))
    return out


@pytest.fixture(scope="module")
def real(shared_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A warehouse holding the small real traces; ``get(name)`` ingests a big one on demand."""
    wh = Warehouse(tmp_path_factory.mktemp("real") / "wh")
    small = [p for p in sorted(shared_traces.glob("*.json*")) if p.stat().st_size <= BIG]
    report = wh.ingest(small, jobs=2)
    results = {Path(r.path).name: r for r in report.results}
    cache: dict[str, Any] = {}

    class Real:
        warehouse = wh
        root = wh.root

        def get(self, name: str) -> tuple[Any, dict[str, Any]]:
            if name not in results:
                results[name] = wh.ingest([shared_traces / name]).results[0]
                cache.clear()
            if "runs" not in cache:
                cache["runs"] = {r["run_id"]: r for r in read_runs(wh.root)}
            return results[name], cache["runs"].get(run_id_of(shared_traces / name), {})

        def counts(self) -> dict[str, dict[str, int]]:
            if "state" not in cache:
                cache["state"] = visible_state(wh.root)
            return dict(cache["state"]["counts"])

    yield Real()


def test_the_not_kineto_file_fails_clearly(real: Any, shared_traces: Path) -> None:
    result, run = real.get(NOT_KINETO)
    assert result.outcome == "failed"
    error = one_line_error(result, shared_traces / NOT_KINETO)
    assert "not a Kineto trace" in error
    assert run == {}


@pytest.mark.parametrize("name", _params([n for n in ALL if n != NOT_KINETO]))
def test_rows_per_table_match_a_plain_json_count(real: Any, shared_traces: Path, name: str) -> None:
    result, run = real.get(name)
    assert result.outcome == "ingested", result.error
    doc = load_trace(shared_traces / name)
    events = doc["traceEvents"]
    assert run["n_events"] == len(events)
    expected = expected_rows(events)
    counts = real.counts()
    got = {t: counts[t].get(run["run_id"], 0) for t in expected}
    assert got == expected
    recorded = json.loads(run["rows_json"])
    assert {t: recorded.get(t, 0) for t in expected} == expected
    # header keys (before traceEvents) and trailer keys (after it) both land in metadata_json
    meta = json.loads(run["metadata_json"])
    assert set(doc) - {"traceEvents"} <= set(meta)
    if "traceName" in doc:
        assert run["trace_name"] == doc["traceName"]
    dist = doc.get("distributedInfo") if isinstance(doc.get("distributedInfo"), dict) else {}
    assert run["rank"] == dist.get("rank")
    assert run["base_time_ns"] == doc.get("baseTimeNanoseconds")
    assert run["job"] == str(shared_traces)
    assert run["source_path"] == str(shared_traces / name)


def test_no_visible_run_is_incomplete(real: Any) -> None:
    assert incomplete_runs(real.root) == []
    assert real.warehouse.verify().ok


@pytest.mark.parametrize("name", _params([NS_TRACE, *WITH_BASE]))
def test_every_event_time_is_exact_to_the_nanosecond(real: Any, shared_traces: Path, name: str) -> None:
    result, run = real.get(name)
    assert result.outcome == "ingested", result.error
    doc = load_trace(shared_traces / name, exact=True)
    base = int(doc.get("baseTimeNanoseconds") or 0)
    expected = {
        i: (base + ns(ev["ts"]), ns(ev.get("dur")))
        for i, ev in enumerate(doc["traceEvents"])
        if ev.get("ph") == "X" and ev.get("cat") != "python_function"
    }
    rows = visible_column(real.root, "events", run["run_id"], ["event_index", "ts_ns", "dur_ns"])
    got = {r["event_index"]: (r["ts_ns"], r["dur_ns"]) for r in rows}
    assert len(got) == len(expected)
    mismatches = [i for i, v in expected.items() if got.get(i) != v]
    assert mismatches == [], f"{len(mismatches)} mismatches, e.g. #{mismatches[:3]}"
    if name == NS_TRACE:  # float64 would have lost nanoseconds here: the check has teeth
        lossy = sum(
            1 for ev in doc["traceEvents"][:5000]
            if ev.get("ph") == "X" and int(float(ev["ts"]) * 1000) != ns(ev["ts"])
        )
        assert lossy > 0


def test_string_pids_keep_their_label(real: Any, shared_traces: Path) -> None:
    name = "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    _, run = real.get(name)
    events = load_trace(shared_traces / name)["traceEvents"]
    want = {
        i: ev["pid"] for i, ev in enumerate(events) if isinstance(ev.get("pid"), str) and ev["ph"] != "M"
    }
    assert "Spans" in want.values()
    got: dict[int, Any] = {}
    for table in ("events", "instants"):
        for r in visible_column(real.root, table, run["run_id"], ["event_index", "pid", "pid_label"]):
            if r["event_index"] in want:
                assert r["pid"] is not None
                got[r["event_index"]] = r["pid_label"]
    assert got == want
    threads = visible_column(real.root, "threads", run["run_id"], ["pid", "pid_label"])
    meta_labels = {ev["pid"] for ev in events if ev["ph"] == "M" and isinstance(ev["pid"], str)}
    assert "Spans" in meta_labels
    assert {r["pid_label"] for r in threads} - {None} == meta_labels


def test_backends_are_detected(real: Any) -> None:
    expect = {
        "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz": "rocm",
        "mtia_inference_trace__mtia_inference_rank_0.json.gz": "mtia",
        "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz": "cpu",
        "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz": "cuda",
    }
    assert {n: real.get(n)[1]["backend"] for n in expect} == expect


def test_legacy_trace_links_every_kernel(real: Any, shared_traces: Path) -> None:
    name = "trace_file_list__inference_rank_1.json.gz"
    _, run = real.get(name)
    events = load_trace(shared_traces / name)["traceEvents"]
    runtime = {
        ev["args"]["correlation"]: ev["name"]
        for ev in events if ev.get("ph") == "X" and ev.get("cat") == "Runtime"
    }
    kernels = {
        i: runtime[ev["args"]["correlation"]]
        for i, ev in enumerate(events) if ev.get("ph") == "X" and ev.get("cat") == "Kernel"
    }
    rows = visible_column(real.root, "gpu_ops", run["run_id"], ["event_index", "cat", "launch_name"])
    assert {r["event_index"]: r["launch_name"] for r in rows} == kernels
    assert {r["cat"] for r in rows} == {"Kernel"}
    assert run["n_unlinked_gpu_ops"] == 0
    flows = visible_column(real.root, "flows", run["run_id"], ["cat"])
    assert {r["cat"] for r in flows} == {"async_gpu"}


@pytest.mark.parametrize(
    "name",
    [
        "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
        "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    ],
)
def test_linkage_matches_a_brute_force_search(real: Any, shared_traces: Path, name: str) -> None:
    """launch = runtime call with the same correlation; op = innermost enclosing CPU op (O(n²))."""
    _, run = real.get(name)
    doc = load_trace(shared_traces / name, exact=True)
    base = int(doc.get("baseTimeNanoseconds") or 0)
    xs = [(i, ev) for i, ev in enumerate(doc["traceEvents"]) if ev.get("ph") == "X"]
    runtime: dict[int, tuple[int, dict[str, Any]]] = {}
    for i, ev in xs:
        corr = (ev.get("args") or {}).get("correlation")
        if ev.get("cat") not in RUNTIME_CATS or corr is None:
            continue
        if corr not in runtime or (ns(ev["ts"]), i) < (ns(runtime[corr][1]["ts"]), runtime[corr][0]):
            runtime[corr] = (i, ev)
    ops = [
        ev for _, ev in xs
        if ev.get("cat") in CPU_OP_CATS and not ev["name"].startswith("ProfilerStep#")
        and ns(ev.get("dur")) and ns(ev["dur"]) > 0
    ]
    expected: dict[int, tuple[Any, Any, Any]] = {}
    for i, ev in xs:
        if ev.get("cat") not in GPU_CATS:
            continue
        hit = runtime.get((ev.get("args") or {}).get("correlation"))
        if hit is None:
            expected[i] = (None, None, None)
            continue
        rt = hit[1]
        t = ns(rt["ts"])
        enclosing = [
            o for o in ops
            if o["pid"] == rt["pid"] and o["tid"] == rt["tid"]
            and ns(o["ts"]) <= t < ns(o["ts"]) + ns(o["dur"])
        ]
        inner = max(enclosing, key=lambda o: (ns(o["ts"]), -ns(o["dur"])), default=None)
        expected[i] = (rt["name"], base + t, inner["name"] if inner else None)
    assert expected and any(v[2] for v in expected.values())
    rows = visible_column(
        real.root, "gpu_ops", run["run_id"], ["event_index", "launch_name", "launch_ts_ns", "op_name"]
    )
    got = {r["event_index"]: (r["launch_name"], r["launch_ts_ns"], r["op_name"]) for r in rows}
    assert got == expected
