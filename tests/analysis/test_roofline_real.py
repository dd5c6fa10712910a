"""The roofline on TraceLens's real H100 and MI300X traces, against plain-json computations.

For each trace (loaded with ``json``), every GPU op is linked to its launching runtime call by
correlation and to the CPU operator by the runtime call's ``External id`` (the innermost op, as
Kineto records it); the GPU time per (operator, Input Dims) is summed from the raw durations.
GEMM and attention FLOPs are the textbook formulas applied to the raw ``Input Dims``: 2*M*N*K
(+ M*N for addmm's bias), 2*B*M*N*K for bmm, 4*B*H*S_q*S_kv*D for non-causal attention. In
these traces every launcher has a perf model or none reached from it, so each GPU op's time
stays with its launcher.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from fixtures import load_trace, to_ns

from tracewh.api import Warehouse

TRACES = {
    "h100": ("tracelens__h100__timesformer-base-k400.json.gz", "H100 SXM"),
    "mi300": ("tracelens__mi300__bert-small-uncased.json.gz", "MI300X"),
}
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "hip_runtime"}


def _dims(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def independent(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (operator name, Input Dims JSON): GPU ns, op instances, and the raw args seen."""
    doc = load_trace(path)
    ops: dict[int, dict[str, Any]] = {}
    runtime: dict[int, int] = {}
    gpu: list[dict[str, Any]] = []
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        args = e.get("args") or {}
        if e.get("cat") == "cpu_op" and "External id" in args:
            ops[int(args["External id"])] = e
        elif e.get("cat") in RUNTIME_CATS and "correlation" in args and "External id" in args:
            runtime[int(args["correlation"])] = int(args["External id"])
        elif e.get("cat") in GPU_CATS:
            gpu.append(e)
    out: dict[tuple[str, str], dict[str, Any]] = defaultdict(lambda: {"gpu_ns": 0, "calls": set(), "args": None})
    for k in gpu:
        ext = runtime.get(int(k["args"]["correlation"]))
        op = ops.get(ext) if ext is not None else None
        if op is None:
            continue
        key = (op["name"], _dims(op["args"]["Input Dims"]))
        out[key]["gpu_ns"] += to_ns(k["dur"]) or 0
        out[key]["calls"].add(ext)
        out[key]["args"] = op["args"]
    return dict(out)


def textbook_flops(name: str, args: dict[str, Any]) -> float | None:
    d = args["Input Dims"]
    if name == "aten::addmm":  # bias, A [M, K], B [K, N]
        (m, k), (_, n) = d[1], d[2]
        return 2 * m * n * k + m * n
    if name == "aten::mm":
        (m, k), (_, n) = d[0], d[1]
        return 2 * m * n * k
    if name == "aten::bmm":  # [B, M, K] x [B, K, N]
        (b, m, k), (_, _, n) = d[0], d[1]
        return 2 * b * m * n * k
    if name == "aten::_flash_attention_forward":  # [B, S, H, D], is_causal = arg 9
        assert args["Concrete Inputs"][8] == "False"
        (b, sq, h, dq), (_, skv, _, _), (_, _, _, dv) = d[0], d[1], d[2]
        return 2 * b * h * sq * skv * dq + 2 * b * h * sq * skv * dv
    return None


@pytest.fixture(scope="module")
def wh(shared_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    w = Warehouse(tmp_path_factory.mktemp("roofline") / "wh")
    report = w.ingest([shared_traces / f for f, _ in TRACES.values()])
    assert not report.failed
    return w


@pytest.mark.parametrize("key", sorted(TRACES))
def test_gpu_time_calls_and_textbook_flops(wh: Warehouse, shared_traces: Path, key: str) -> None:
    file, device = TRACES[key]
    expected = independent(shared_traces / file)
    rows = wh.roofline(_run(wh, key))
    assert set(rows["device"].drop_nulls()) == {device}
    got: dict[tuple[str, str], dict[str, Any]] = defaultdict(lambda: {"gpu_ns": 0, "calls": 0, "flops": set()})
    for r in rows.iter_rows(named=True):
        if r["op_name"] is None:
            continue
        g = got[(r["op_name"], r["input_dims"])]
        g["gpu_ns"] += r["gpu_ns"]
        g["calls"] += r["calls"]
        g["flops"].add(r["flops"])
    assert set(got) == set(expected)
    checked = 0
    for k, e in expected.items():
        assert got[k]["gpu_ns"] == e["gpu_ns"], k
        assert got[k]["calls"] == len(e["calls"]), k
        flops = textbook_flops(k[0], e["args"])
        if flops is not None:
            assert len(got[k]["flops"]) == 1, k
            assert got[k]["flops"].pop() == pytest.approx(flops), k
            checked += 1
    assert checked >= (5 if key == "mi300" else 10)
    # rates from those numbers: TFLOP/s = flops * calls / gpu_ns / 1e3
    for r in rows.filter(rows["family"] == "gemm").iter_rows(named=True):
        assert r["tflops_per_s"] == pytest.approx(r["flops"] * r["calls"] / r["gpu_ns"] / 1e3)
        assert 0 < r["pct_of_peak"] < 100


def _run(wh: Warehouse, key: str) -> str:
    run_id: str = wh.runs(where={"file_name": TRACES[key][0]})["run_id"][0]
    return run_id


def test_h100_large_gemms_are_compute_bound_near_the_bf16_roof(wh: Warehouse) -> None:
    rows = wh.roofline(_run(wh, "h100"), op="aten::addmm")
    big = rows.filter(rows["flops"] > 5e10)
    assert big.height >= 4
    # cuBLAS on an H100 SXM reaches 60-80 % of 989.5 BF16 TFLOP/s on these shapes
    assert big["bound"].to_list() == ["compute"] * big.height
    assert all(55 < p < 90 for p in big["pct_of_peak"])


def test_mi300_attention_row(wh: Warehouse) -> None:
    r = wh.roofline(_run(wh, "mi300"), op="_flash_attention_forward").row(0, named=True)
    # B=1, H=8, S=141, D=64: 4 * 8 * 141^2 * 64; Q, K, V, O of 1*141*8*64 bf16 each
    assert r["flops"] == 4 * 8 * 141 * 141 * 64
    assert r["bytes"] == 4 * 141 * 8 * 64 * 2
    assert (r["calls"], r["dtype"], r["family"], r["device"]) == (4, "bf16", "attention", "MI300X")
    assert r["params"] == "B=1 H=8 S_q=141 S_kv=141 D=64"


def test_roofline_chart_draws_the_operators_under_the_roofs(wh: Warehouse) -> None:
    from tracewh.report.render import png, spec
    from tracewh.report.roof import roofline_chart

    rows = wh.roofline(_run(wh, "mi300"))
    chart = roofline_chart(rows, device="MI300X")
    vl = spec(chart)
    text = json.dumps(vl)
    assert '"bf16 roof"' in text and '"vector roof"' in text and "aten::addmm" in text
    assert png(vl, key="roofline")[:8] == b"\x89PNG\r\n\x1a\n"


def test_ops_without_shapes_are_listed_without_numbers(shared_traces: Path, tmp_path: Path) -> None:
    # the A100 AlexNet benchmark was profiled without record_shapes
    w = Warehouse(tmp_path / "wh")
    w.ingest([shared_traces / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"])
    rows = w.roofline()
    assert rows.height > 5 and rows["flops"].null_count() == rows.height
    assert all("record_shapes" in n for n in rows["note"])
    assert rows["params"].null_count() == rows.height and set(rows["device"]) == {"A100 SXM4 40GB"}


VLLM_CAPTURE = "tracelens__vllm_decode_full__capture_rank_0.pt.trace.json.gz"
VLLM_REPLAY = "tracelens__vllm_decode_full__graph_execution.json.gz"


def _capture_launchers(path: Path) -> dict[tuple[str, str], int]:
    """Plain json: per (operator, Input Dims), the kernel launches recorded into the graph (the
    launch calls between hipStreamBeginCapture and EndCapture on that thread), each counted at
    the innermost cpu_op enclosing it."""
    events = load_trace(path)["traceEvents"]
    begin = next(e for e in events if e.get("name") == "hipStreamBeginCapture")
    end = next(e for e in events if e.get("name") == "hipStreamEndCapture")
    t0, t1 = to_ns(begin["ts"]) or 0, to_ns(end["ts"]) or 0
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("tid") == begin["tid"] and "dur" in e]
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for e in events:
        ts = to_ns(e.get("ts"))
        if (e.get("cat") not in RUNTIME_CATS or "Launch" not in e.get("name", "")
                or e.get("tid") != begin["tid"] or ts is None or not t0 < ts < t1):
            continue
        around = [o for o in ops if (to_ns(o["ts"]) or 0) <= ts < (to_ns(o["ts"]) or 0) + (to_ns(o["dur"]) or 0)]
        inner = max(around, key=lambda o: (to_ns(o["ts"]) or 0, -(to_ns(o["dur"]) or 0)))
        counts[(inner["name"], _dims(inner["args"]["Input Dims"]))] += 1
    return dict(counts)


def test_graph_replay_is_attributed_to_the_capturing_operators(shared_traces: Path, tmp_path: Path) -> None:
    """vLLM decode on MI300X: one hipGraphLaunch replays 421 kernels recorded by the capture
    trace; its three addmm shapes (24 layers each) get the capture's GEMM FLOPs."""
    w = Warehouse(tmp_path / "wh")
    assert not w.ingest([shared_traces / VLLM_CAPTURE, shared_traces / VLLM_REPLAY]).failed
    replay = next(r for r in w.runs().iter_rows(named=True) if r["file_name"] == VLLM_REPLAY)
    rows = w.roofline(replay["run_id"])
    recorded = _capture_launchers(shared_traces / VLLM_CAPTURE)
    gpu_ns = sum(to_ns(e["dur"]) or 0 for e in load_trace(shared_traces / VLLM_REPLAY)["traceEvents"]
                 if e.get("cat") in GPU_CATS and e.get("ph") == "X")
    assert int(rows["gpu_ns"].sum()) == gpu_ns  # every GPU op of the replay, once
    addmm = rows.filter(rows["op_name"] == "aten::addmm")
    assert addmm.height == 3
    for r in addmm.iter_rows(named=True):
        dims = json.loads(r["input_dims"])
        assert r["flops"] == textbook_flops("aten::addmm", {"Input Dims": dims})
        # one call per capture operator that recorded a kernel (one graph launch), as recorded
        assert r["calls"] == r["kernels"] == recorded[("aten::addmm", _dims(dims))] == 24
        assert r["pct_of_peak"] is not None and r["device"] == "MI300X"
    assert not rows.filter(rows["note"].str.contains("no capture").fill_null(False)).height
    # the batched roofline (the site's), of the replay alone, reads the capture's day too;
    # with both runs it gives each run's rows
    alone = w.roofline_runs([replay["run_id"]])
    assert list(alone) == [replay["run_id"]] and alone[replay["run_id"]].equals(rows)
    ids = w.runs()["run_id"].to_list()
    both = w.roofline_runs(ids)
    assert set(both) == set(ids)
    assert all(both[r].equals(w.roofline(r)) for r in ids)


def test_rooflines_of_many_runs_in_one_query_equal_each_runs(wh: Warehouse) -> None:
    ids = wh.runs()["run_id"].to_list()
    assert len(ids) == len(TRACES)
    batch = wh.roofline_runs([*ids, ids[0]])  # a run named twice comes once
    assert list(batch) == ids
    for run_id in ids:
        one = wh.roofline(run_id)
        assert one.height > 0 and batch[run_id].equals(one)
    assert wh.roofline_runs([]) == {}
