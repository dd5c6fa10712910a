"""roofline (sql/78_roofline.sql) and run_device (sql/77_device_peaks.sql) on hand-made tables.

Expected numbers are worked out by hand in each test: the FLOPs of an addmm, its GPU time,
the device's peaks from its datasheet, the rates and the bound.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fixtures import DAY, query, warehouse

H100 = {"name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85018279936, "computeMajor": 9,
        "computeMinor": 0, "numSms": 132, "warpSize": 32}
BF16 = "c10::BFloat16"
ADDMM = {"Input Dims": [[32], [64, 128], [128, 32], [], []],
         "Input type": [BF16, BF16, BF16, "Scalar", "Scalar"],
         "Input Strides": [[1], [128, 1], [1, 128], [], []], "Concrete Inputs": ["", "", "", "1", "1"]}
# 2*M*N*K + M*N (bias) and (A + B + out + bias) * 2 bytes
ADDMM_FLOPS = 2 * 64 * 32 * 128 + 64 * 32
ADDMM_BYTES = (64 * 128 + 128 * 32 + 64 * 32 + 32) * 2


def _run(run_id: str, device: dict[str, Any] | None) -> dict[str, Any]:
    meta = {"deviceProperties": [device]} if device else {}
    return {"run_id": run_id, "day": DAY, "start_ns": 0, "metadata_json": json.dumps(meta),
            "device_name": device["name"] if device else None}


def _op(run_id: str, idx: int, name: str, ts: int, dur: int, args: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"run_id": run_id, "event_index": idx, "cat": "cpu_op", "name": name, "pid": 1, "tid": 7,
            "ts_ns": ts, "dur_ns": dur, "args_json": json.dumps(args or {"Input Dims": [[4]], "Input type": ["float"]})}


def _gpu(run_id: str, idx: int, op: dict[str, Any] | None, dur: int, *, kind: str = "kernel",
         memcpy: str | None = None, launch: str = "cudaLaunchKernel") -> dict[str, Any]:
    row: dict[str, Any] = {"run_id": run_id, "event_index": idx, "name": f"k{idx}", "ts_ns": 10_000 + idx,
                           "dur_ns": dur, "op_kind": kind, "memcpy_kind": memcpy}
    if op is not None:
        row.update(launch_name=launch, launch_pid=1, launch_tid=7, op_name=op["name"],
                   op_ts_ns=op["ts_ns"], op_dur_ns=op["dur_ns"])
    return row


SDPA = {"Input Dims": [[1, 2, 16, 8]] * 3 + [[]] * 5, "Input type": [BF16] * 3 + ["", "Scalar", "Scalar", "", "Scalar"],
        "Concrete Inputs": ["", "", "", "", "0.", "False", "", "False"]}
ADD = {"Input Dims": [[8], [8], []], "Input type": [BF16, BF16, "Scalar"]}
MM = {"Input Dims": [[8, 8], [8, 8]], "Input type": [BF16, BF16]}
COPY = {"Input Dims": [[256], [256], []], "Input type": ["float", "float", "Scalar"]}


@pytest.fixture(scope="module")
def con() -> Any:
    linear = _op("r1", 100, "aten::linear", 0, 1000, {"Input Dims": [[64, 128], [32, 128], [32]],
                                                        "Input type": [BF16] * 3})
    addmm = _op("r1", 101, "aten::addmm", 100, 800, ADDMM)
    addmm2 = _op("r1", 102, "aten::addmm", 7000, 500, ADDMM)
    sdpa = _op("r1", 110, "aten::scaled_dot_product_attention", 2000, 1000, SDPA)
    foo = _op("r1", 111, "aten::foo", 2100, 200)  # no model: its kernel goes to the SDPA above
    add = _op("r1", 112, "aten::add", 2400, 200, ADD)  # modelled, but inside the absorbing SDPA
    bar = _op("r1", 120, "aten::bar", 4000, 500)  # no model and no modelled ancestor
    mm = _op("r1", 130, "aten::mm", 5000, 500, MM)  # launches a graph
    copy = _op("r1", 140, "aten::copy_", 6000, 500, COPY)  # a host-to-device copy
    other = _op("r2", 101, "aten::addmm", 100, 800, ADDMM)  # same op on an unknown device
    events = [linear, addmm, addmm2, sdpa, foo, add, bar, mm, copy, other]
    gpu = [
        _gpu("r1", 1, addmm, 1000), _gpu("r1", 2, addmm, 100, kind="memset"), _gpu("r1", 3, addmm2, 900),
        _gpu("r1", 4, foo, 200), _gpu("r1", 5, add, 300), _gpu("r1", 6, bar, 50),
        _gpu("r1", 7, None, 70), _gpu("r1", 8, mm, 400, launch="cudaGraphLaunch"),
        _gpu("r1", 9, copy, 1000, kind="memcpy", memcpy="HtoD"), _gpu("r2", 1, other, 2000),
    ]
    return warehouse(runs=[_run("r1", H100), _run("r2", {"name": "Some Future GPU", "warpSize": 32})],
                     events=events, gpu_ops=gpu)


@pytest.fixture(scope="module")
def r1(con: Any) -> dict[Any, dict[str, Any]]:
    return _rows(con, "r1")


def _rows(con: Any, run: str, **params: Any) -> dict[Any, dict[str, Any]]:
    named = "".join(f", {k} := ${k}" for k in params)
    df = con.sql(f"SELECT * FROM roofline($run{named})", params={"run": run, **params}).pl()
    return {r["op_name"]: r for r in df.iter_rows(named=True)}


def test_linear_time_goes_to_its_addmm_and_calls_add_up(r1: dict[Any, dict[str, Any]]) -> None:
    rows = r1
    r = rows["aten::addmm"]
    assert "aten::linear" not in rows
    assert (r["calls"], r["kernels"], r["gpu_ns"]) == (2, 3, 1000 + 100 + 900)
    assert r["flops"] == ADDMM_FLOPS and r["bytes"] == ADDMM_BYTES
    assert r["tflops_per_s"] == pytest.approx(ADDMM_FLOPS * 2 / 2000 / 1e3)
    assert r["tb_per_s"] == pytest.approx(ADDMM_BYTES * 2 / 2000 / 1e3)
    assert r["intensity"] == pytest.approx(ADDMM_FLOPS / ADDMM_BYTES)
    # H100 SXM: 989.5 dense BF16 TFLOP/s, 3.35 TB/s; ridge 295.4 FLOP/byte > 18.3: memory bound
    assert (r["device"], r["peak_tflops"], r["peak_tbs"]) == ("H100 SXM", 989.5, 3.35)
    assert r["bound"] == "memory"
    assert r["pct_of_peak"] == pytest.approx(100 * (ADDMM_BYTES * 2 / 2000 / 1e3) / 3.35)
    assert r["note"] is None


def test_an_ancestor_reached_from_an_unmodelled_launcher_owns_its_subtree(r1: dict[Any, dict[str, Any]]) -> None:
    rows = r1
    r = rows["aten::scaled_dot_product_attention"]
    assert "aten::foo" not in rows and "aten::add" not in rows
    assert (r["calls"], r["kernels"], r["gpu_ns"]) == (1, 2, 200 + 300)
    assert r["flops"] == 4 * 1 * 2 * 16 * 16 * 8  # 4 * B*H * S^2 * D


def test_unmodelled_unlinked_graph_and_host_copy_rows(r1: dict[Any, dict[str, Any]]) -> None:
    rows = r1
    assert rows["aten::bar"]["flops"] is None and "no perf model" in rows["aten::bar"]["note"]
    assert rows["aten::bar"]["gpu_ns"] == 50
    # no launch call at all: unlinked (the one name for it, docs/concepts/figures.md#unlinked)
    assert rows[None]["gpu_ns"] == 70 and "unlinked: no launch call found" in rows[None]["note"]
    g = rows["aten::mm"]
    assert g["flops"] is None and g["gpu_ns"] == 400 and "graph replay" in g["note"]
    c = rows["aten::copy_"]
    assert c["bytes"] == 256 * 4 * 2 and c["bound"] is None and c["pct_of_peak"] is None
    assert "link" in c["note"]
    # every GPU op of the run is in exactly one row
    assert sum(r["gpu_ns"] for r in rows.values()) == 1000 + 100 + 900 + 200 + 300 + 50 + 70 + 400 + 1000


def test_unknown_device_gets_rates_without_percentages(con: Any) -> None:
    r = _rows(con, "r2")["aten::addmm"]
    assert r["device"] is None and r["peak_tflops"] is None and r["pct_of_peak"] is None
    assert r["bound"] is None and "no peak" in r["note"]
    assert r["tflops_per_s"] == pytest.approx(ADDMM_FLOPS / 2000 / 1e3)


def test_peak_overrides(con: Any) -> None:
    r = _rows(con, "r2", peak_tflops="2.0", peak_tbs=0.01)["aten::addmm"]
    # ridge 2.0 / 0.01 = 200 FLOP/byte > 18.3: memory bound against the 0.01 TB/s given
    assert (r["peak_tflops"], r["peak_tbs"], r["bound"]) == (2.0, 0.01, "memory")
    assert r["pct_of_peak"] == pytest.approx(100 * (ADDMM_BYTES / 2000 / 1e3) / 0.01)
    r = _rows(con, "r2", peak_tflops='{"bf16": 0.1}', peak_tbs=1.0)["aten::addmm"]
    # ridge 0.1 FLOP/byte < 18.3: compute bound against 0.1 TFLOP/s
    assert r["bound"] == "compute"
    assert r["pct_of_peak"] == pytest.approx(100 * (ADDMM_FLOPS / 2000 / 1e3) / 0.1)
    r = _rows(con, "r1", peak_tflops='{"fp32": 1.0}')["aten::addmm"]
    assert r["peak_tflops"] == 989.5  # a roof the override does not name keeps the table's


def test_op_pattern(con: Any) -> None:
    assert set(_rows(con, "r1", op_pattern="ADDmm")) == {"aten::addmm"}
    assert set(_rows(con, "r1", op_pattern="aten::[bm]*")) == {"aten::bar", "aten::mm"}


def test_roofline_history_follows_an_op_over_runs(con: Any) -> None:
    df = query(con, "SELECT * FROM roofline_history(op_pattern := 'addmm')")
    by_run = {r["run_id"]: r for r in df.iter_rows(named=True)}
    assert by_run["r1"]["tflops_per_s"] == pytest.approx(ADDMM_FLOPS * 2 / 2000 / 1e3)
    assert by_run["r2"]["tflops_per_s"] == pytest.approx(ADDMM_FLOPS / 2000 / 1e3)
    assert by_run["r1"]["pct_of_peak"] == pytest.approx(100 * (ADDMM_BYTES * 2 / 2000 / 1e3) / 3.35)
    assert by_run["r2"]["pct_of_peak"] is None


DEVICES = [
    # (deviceProperties name, totalGlobalMem GiB, computeMajor, computeMinor, numSms, warpSize) -> device
    ("Tesla V100-SXM2-32GB", 32, 7, 0, 80, 32, "V100 SXM2"),
    ("Tesla V100-PCIE-16GB", 16, 7, 0, 80, 32, "V100 PCIe"),
    ("NVIDIA A100-PG509-200", 39.4, 8, 0, 108, 32, "A100 SXM4 40GB"),
    ("NVIDIA A100-SXM4-80GB", 79.2, 8, 0, 108, 32, "A100 SXM4 80GB"),
    ("NVIDIA A100 80GB PCIe", 79.2, 8, 0, 108, 32, "A100 PCIe 80GB"),
    ("NVIDIA H100 80GB HBM3", 79.2, 9, 0, 132, 32, "H100 SXM"),
    ("NVIDIA H100 PCIe", 79.2, 9, 0, 114, 32, "H100 PCIe"),
    ("NVIDIA H100 NVL", 93.1, 9, 0, 132, 32, "H100 NVL"),
    ("NVIDIA H200", 139.8, 9, 0, 132, 32, "H200 SXM"),
    ("NVIDIA B200", 178.4, 10, 0, 148, 32, "B200"),
    ("AMD Instinct MI210", 64, 9, 0, 104, 64, "MI210"),
    ("AMD Instinct MI250X", 64, 9, 0, 110, 64, "MI250X (one GCD)"),
    ("AMD Instinct MI250", 64, 9, 0, 104, 64, "MI250 (one GCD)"),
    ("AMD Instinct MI300X VF", 191.5, 9, 4, 304, 64, "MI300X"),
    ("AMD Instinct MI325X", 256, 9, 4, 304, 64, "MI325X"),
    ("AMD Instinct MI355X", 288, 9, 5, 256, 64, "MI355X"),
    ("AMD Radeon Graphics", 64, 9, 0, 104, 64, "MI210 / MI250 (one GCD)"),  # ROCm 6.2 MI250 trace
    ("", 192, 9, 4, 304, 64, "MI300X"),  # TraceLens's vLLM graph trace
    ("NVIDIA GeForce RTX 4090", 24, 8, 9, 128, 32, None),
]


def test_device_names_match_the_peak_table() -> None:
    runs = []
    for i, (name, gib, major, minor, sms, warp, _) in enumerate(DEVICES):
        props = {"name": name, "totalGlobalMem": int(gib * 2**30), "computeMajor": major,
                 "computeMinor": minor, "numSms": sms, "warpSize": warp}
        runs.append({"run_id": f"d{i}", "metadata_json": json.dumps({"deviceProperties": [props]})})
    con = warehouse(runs=runs)
    df = query(con, "SELECT run_id, device, bf16_tflops, hbm_tbs FROM run_device(?)", [[r["run_id"] for r in runs]])
    got = {r["run_id"]: r["device"] for r in df.iter_rows(named=True)}
    assert got == {f"d{i}": d[-1] for i, d in enumerate(DEVICES)}
    every = query(con, "SELECT device, hbm_tbs, fp32_tflops, vector_tflops, source FROM device_peaks")
    assert every.filter(every["hbm_tbs"].is_null() | every["fp32_tflops"].is_null()
                        | every["vector_tflops"].is_null() | every["source"].is_null()).is_empty()


def test_every_roofline_macro_runs_on_an_empty_warehouse() -> None:
    con = warehouse()
    for sql in (
        "SELECT * FROM op_signatures(['x'])", "SELECT * FROM op_work(['x'])",
        "SELECT * FROM device_peaks", "SELECT * FROM run_device(['x'])",
        "SELECT * FROM cpu_op_parents(['x'])", "SELECT * FROM roofline_ops(['x'])",
        "SELECT * FROM roofline_runs(['x'])", "SELECT * FROM roofline('x')",
        "SELECT * FROM roofline_history()", "SELECT * FROM op_series_values(['x'])",
    ):  # fmt: skip
        assert con.execute(sql).fetchall() is not None


def _tree(rng: Any, run_id: str, tid: int, start: int, end: int, depth: int,
          out: list[dict[str, Any]]) -> None:
    """Nested cpu_ops on one thread inside [start, end): siblings may touch (end == start)."""
    t = start
    while depth < 5 and t < end - 4 and rng.random() < 0.9:
        a = rng.randrange(t, min(end - 3, t + 20) + 1)
        b = rng.randrange(a + 2, min(end, a + 40 * (5 - depth)) + 1)
        modelled = rng.random() < 0.5
        op = _op(run_id, len(out), "aten::add" if modelled else "aten::foo", a, b - a,
                 ADD if modelled else None)
        op["tid"] = tid
        out.append(op)
        _tree(rng, run_id, tid, a + 1 if rng.random() < 0.7 else a, b - (rng.random() < 0.5), depth + 1, out)
        t = b if rng.random() < 0.3 else b + 1


def test_attribution_matches_an_ancestor_walk_on_random_trees() -> None:
    import random

    rng = random.Random(20)
    events: list[dict[str, Any]] = []
    for tid in range(7, 13):
        _tree(rng, "rt", tid, 0, 3000, 0, events)
    ops = {e["event_index"]: e for e in events}

    def ancestors(op: dict[str, Any]) -> list[dict[str, Any]]:
        """Innermost first: the ops on its thread whose span holds it (by start, longer first)."""
        key = (op["ts_ns"], -op["dur_ns"], op["event_index"])
        outer = [o for o in events if o["tid"] == op["tid"] and o is not op
                 and o["ts_ns"] <= op["ts_ns"] and op["ts_ns"] + op["dur_ns"] <= o["ts_ns"] + o["dur_ns"]
                 and (o["ts_ns"], -o["dur_ns"], o["event_index"]) < key]
        return sorted(outer, key=lambda o: (o["ts_ns"], -o["dur_ns"], o["event_index"]), reverse=True)

    launchers = [o for o in events if rng.random() < 0.5]
    gpu = []
    for i, op in enumerate(launchers):
        g = _gpu("rt", i + 1, op, 10 + i)
        gpu.append(g)
        g["launch_tid"] = op["tid"]
    # plain walk: the nearest modelled op from the launcher outwards; an ancestor found so
    # owns every launcher below it; the outermost such owner wins
    nearest = {}
    for op in launchers:
        chain = [op, *ancestors(op)]
        nearest[op["event_index"]] = next((o["event_index"] for o in chain if o["name"] == "aten::add"), None)
    owners = {n for lid, n in nearest.items() if n is not None and n != lid}
    expected = {}
    for i, op in enumerate(launchers):
        chain = [op, *ancestors(op)]
        owning = [o["event_index"] for o in chain if o["event_index"] in owners]
        expected[i + 1] = owning[-1] if owning else (nearest[op["event_index"]] or op["event_index"])
    con = warehouse(runs=[_run("rt", H100)], events=events, gpu_ops=gpu)
    df = query(con, "SELECT gpu_event_index, op_event_index FROM roofline_ops(['rt'])")
    got = dict(df.iter_rows())
    assert len(launchers) > 30 and len(owners) > 3  # the random trees do exercise both sweeps
    assert got == expected
    assert {ops[v]["name"] for v in got.values()} == {"aten::add", "aten::foo"}


def test_graph_replayed_kernels_go_to_the_capturing_operator() -> None:
    """A graph captured in one trace (an addmm and an unmodelled op record one kernel each)
    and replayed twice in another trace of the same job: the replayed kernels' time is the
    capture's operators', one call per replay, with the addmm's FLOPs."""
    cap = [
        {**_op("cap", 201, "aten::addmm", 100, 800, ADDMM)},
        {"run_id": "cap", "event_index": 202, "cat": "cuda_runtime", "name": "cudaLaunchKernel",
         "pid": 1, "tid": 7, "ts_ns": 150, "dur_ns": 10},
        {**_op("cap", 203, "aten::foo", 2000, 100)},
        {"run_id": "cap", "event_index": 204, "cat": "cuda_runtime", "name": "cudaLaunchKernel",
         "pid": 1, "tid": 7, "ts_ns": 2010, "dur_ns": 10},
    ]
    nodes = [
        {"run_id": "cap", "capture": 1, "capture_ts_ns": 0, "position": 1, "launch_event_index": 202,
         "launch_name": "cudaLaunchKernel", "launch_kind": "kernel", "launch_ts_ns": 150,
         "kernel_name": "k_gemm", "op_name": "aten::addmm", "op_ts_ns": 100},
        {"run_id": "cap", "capture": 1, "capture_ts_ns": 0, "position": 2, "launch_event_index": 204,
         "launch_name": "cudaLaunchKernel", "launch_kind": "kernel", "launch_ts_ns": 2010,
         "kernel_name": "k_foo", "op_name": "aten::foo", "op_ts_ns": 2000},
    ]
    replay_ops = [_op("rep", 300, "aten::replay", 4990, 100), _op("rep", 301, "aten::replay", 8990, 100)]
    gpu = []
    for i, (op, durs) in enumerate(zip(replay_ops, ((1000, 50), (1200, 70)), strict=True)):
        for pos, (kname, dur) in enumerate(zip(("k_gemm", "k_foo"), durs, strict=True), start=1):
            g = _gpu("rep", 10 * i + pos, op, dur, launch="cudaGraphLaunch")
            g.update(name=kname, launch_kind="graph", graph_position=pos, launch_ts_ns=op["ts_ns"] + 5,
                     ts_ns=op["ts_ns"] + 20 + pos)
            gpu.append(g)
    runs = [{**_run("cap", H100), "job": "j", "start_ns": 0}, {**_run("rep", H100), "job": "j", "start_ns": 1}]
    con = warehouse(runs=runs, events=cap + replay_ops, gpu_ops=gpu, graph_nodes=nodes)
    rows = _rows(con, "rep")
    assert set(rows) == {"aten::addmm", "aten::foo"}  # not the operator around the graph launch
    mm = rows["aten::addmm"]
    assert (mm["calls"], mm["kernels"], mm["gpu_ns"]) == (2, 2, 1000 + 1200)
    assert mm["flops"] == ADDMM_FLOPS and mm["tflops_per_s"] == pytest.approx(ADDMM_FLOPS * 2 / 2200 / 1e3)
    foo = rows["aten::foo"]
    assert (foo["calls"], foo["gpu_ns"], foo["flops"]) == (2, 50 + 70, None)
    assert "no perf model" in foo["note"]
    # without the capture in the warehouse, the replayed kernels stay unmodelled under the launch's operator
    alone = warehouse(runs=runs[1:], events=replay_ops, gpu_ops=gpu)
    r = _rows(alone, "rep")["aten::replay"]
    assert r["flops"] is None and r["gpu_ns"] == 1000 + 50 + 1200 + 70 and "no capture" in r["note"]
