"""Critical path: a hand-built trace with a known path, and parity with HTA on real traces.

The HTA figures below were measured with HTA 0.6.1 (pip ``traceinsight``, a bench-only venv):
``HTA_DISABLE_NS_ROUNDING=1 /work/hta-venv/bin/python bench/hta_critical_path.py TRACE [0]``
(``0``: the first ProfilerStep; without it the whole trace), microseconds x 1000.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from tracewh.analysis.critical_path import BOUNDS
from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.core.errors import UsageError

T0 = 1_700_000_000_000_000  # us


def _x(cat: str, name: str, ts: int, dur: int, tid: int = 1, pid: int = 100, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0 + ts, "dur": dur,
            "args": args}


def _trace(path: Path, *, rank: int = 0, world: int = 1, k2_late_us: int = 0) -> None:
    """Step 1: op A launches K1 and K2 (stream 7), then cudaDeviceSynchronize waits for them.

    Known path (us): A's start -> L1's start (cpu 10) -> K1's start (launch delay 15) -> K1
    (compute 50) -> K2 (kernel-kernel 0, compute 200) -> sync's end (0) -> B (a top-level op:
    dependency 0, cpu 40): 315 us. The CPU's own path (A 100, then the sync call, weightless,
    then B) is shorter. HTA 0.6.1 gives the same 315 us and bounds on this trace.
    """
    k = {"device": 0, "stream": 7}
    k2: dict[str, Any] = {"correlation": 2, **k}
    k2_name = "k2"
    if world > 1:  # K2 is an all-reduce of the job's ranks
        k2_name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
        k2.update({"Collective name": "allreduce", "Process Group Name": "0",
                   "Process Group Ranks": str(list(range(world))), "Group size": world,
                   "dtype": "Float", "In msg nelems": 1000, "Out msg nelems": 1000})
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 1000),
        _x("cpu_op", "aten::A", 10, 100),
        _x("cuda_runtime", "cudaLaunchKernel", 20, 10, correlation=1),
        _x("cuda_runtime", "cudaLaunchKernel", 40, 10, correlation=2),
        _x("cuda_runtime", "cudaDeviceSynchronize", 120, 300, correlation=3),
        _x("kernel", "k1", 35, 50, pid=0, tid=7, correlation=1, **k),
        _x("kernel", k2_name, 85 + k2_late_us, 200 - k2_late_us, pid=0, tid=7, **k2),
        _x("cuda_sync", "Context Sync", 280, 10, pid=0, tid=7, correlation=3, device=0,
           stream=-1, cuda_sync_kind="Context Sync"),
        _x("cpu_op", "aten::B", 500, 40),  # after the sync: a top-level op, weightless link
    ]
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}],
           "distributedInfo": {"rank": rank, "world_size": world}, "traceEvents": events}
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(doc, f)


def test_known_path(tmp_path: Path) -> None:
    trace = tmp_path / "t.pt.trace.json.gz"
    _trace(trace)
    wh = Warehouse(tmp_path / "wh")
    wh.ingest([trace], jobs=1)
    for step in (None, 1):
        p = wh.critical_path("latest", step=step)
        assert p.total_ns == 315_000
        assert p.by_bound == {**dict.fromkeys(BOUNDS, 0), "cpu_bound": 50_000,
                              "gpu_kernel_launch_overhead": 15_000, "gpu_compute_bound": 250_000}
        kinds = [(r["kind"], r["name"], r["dur_ns"]) for r in p.edges.iter_rows(named=True)]
        assert kinds == [
            ("operator", "aten::A", 10_000), ("kernel_launch_delay", None, 15_000),
            ("operator", "k1", 50_000), ("kernel_kernel_delay", "k2", 0),
            ("operator", "k2", 200_000), ("sync", None, 0), ("dependency", None, 0),
            ("operator", "aten::B", 40_000),
        ]
    loading = wh.critical_path("latest", data_loading=["^aten::B$"])
    assert loading.by_bound["data_loading"] == 40_000 and loading.by_bound["cpu_bound"] == 10_000
    with pytest.raises(UsageError):
        wh.critical_path("latest", step=7)
    res = CliRunner().invoke(app, ["critical-path", "-w", str(tmp_path / "wh"), "--step", "1",
                                   "--format", "json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout.splitlines()[0])
    assert got["total_ns"] == 315_000 and set(got["by_bound"]) == set(BOUNDS)
    assert [e["kind"] for e in got["edges"]][:2] == ["operator", "kernel_launch_delay"]
    assert set(got["edges"][0]) >= {"kind", "name", "ts_ns", "dur_ns"}
    steps = wh.critical_path_steps("latest")
    assert steps["step"].to_list() == [1] and steps["total_ns"].to_list() == [315_000]
    assert steps["gpu_compute_bound_ns"].to_list() == [250_000]


#: HTA 0.6.1's critical path (total and by bound, ns): trace -> (first step or whole, figures)
HTA = {
    "critical_path__cuda_event_sync__event_sync_trace.json.gz": (True, 2_411_000, {
        "cpu_bound": 2_365_000, "gpu_compute_bound": 36_000, "gpu_kernel_launch_overhead": 10_000}),
    "critical_path__cuda_event_sync_multi_stream__event_sync_trace.json.gz": (False, 1_178_000, {
        "cpu_bound": 1_025_000, "gpu_compute_bound": 124_000, "gpu_kernel_kernel_overhead": 15_000,
        "gpu_kernel_launch_overhead": 14_000}),
    "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz": (False, 43_355_486_000, {
        "cpu_bound": 43_294_205_000, "gpu_compute_bound": 59_215_000,
        "gpu_kernel_kernel_overhead": 50_000, "gpu_kernel_launch_overhead": 2_016_000}),
    "timeline_analysis__sampled_rank-0.json.gz": (True, 301_476_000, {}),
}


@pytest.mark.parametrize("name", sorted(HTA))
def test_parity_with_hta(name: str, shared_traces: Path, tmp_path: Path) -> None:
    first_step, total, by = HTA[name]
    wh = Warehouse(tmp_path / "wh")
    wh.ingest([shared_traces / name], jobs=1)
    step = wh.sql("SELECT min(step) AS s FROM steps")["s"][0] if first_step else None
    p = wh.critical_path("latest", step=step)
    assert p.total_ns == pytest.approx(total, rel=0.01)
    for bound, ns in by.items():
        assert 100 * p.by_bound[bound] / p.total_ns == pytest.approx(100 * ns / total, abs=2)


def test_cross_rank_path_names_the_late_rank(tmp_path: Path) -> None:
    """Two ranks; rank 1's all-reduce (K2) starts 30 us after rank 0's, both end together.

    On rank 0's path K2 is 200 us of communication, 30 of them waiting for rank 1, whose latest
    GPU op before its all-reduce is k1 (held_by).
    """
    job = tmp_path / "job"
    job.mkdir()
    _trace(job / "rank-0.pt.trace.json.gz", rank=0, world=2)
    _trace(job / "rank-1.pt.trace.json.gz", rank=1, world=2, k2_late_us=30)
    wh = Warehouse(tmp_path / "wh")
    wh.ingest([job], jobs=1)
    r0 = wh.sql("SELECT run_id FROM runs WHERE rank = 0")["run_id"][0]
    p = wh.critical_path(r0, step=1)
    assert p.by_bound["gpu_communication_bound"] == 200_000
    cross = p.extra["cross_rank"]
    assert cross.select("collective", "on_path_ns", "waited_ns", "last_rank", "held_by").rows() == [
        ("all_reduce", 200_000, 30_000, 1, "k1")]
    res = CliRunner().invoke(app, ["critical-path", r0, "-w", str(tmp_path / "wh"), "--step", "1",
                                   "-f", "json"])
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout.splitlines()[0])
    assert got["cross_rank"]["waited_on_ns"] == {"1": 30_000}


def test_history_series_of_shares(tmp_path: Path) -> None:
    """Two runs of the known trace (rank 0, rank 1): one row each, oldest first, shares of 315 us."""
    job = tmp_path / "job"
    job.mkdir()
    _trace(job / "rank-0.pt.trace.json.gz", rank=0, world=2)
    _trace(job / "rank-1.pt.trace.json.gz", rank=1, world=2, k2_late_us=30)
    wh = Warehouse(tmp_path / "wh")
    wh.ingest([job], jobs=1)
    h = wh.critical_path_history()
    assert h.height == 2 and h["step"].to_list() == [1, 1]
    r0 = h.filter(pl.col("run_id") == wh.sql("SELECT run_id FROM runs WHERE rank = 0")["run_id"][0])
    assert r0["total_ns"].to_list() == [315_000]
    assert r0["cpu_bound_pct"][0] == pytest.approx(100 * 50 / 315)
    assert sum(r0[f"{b}_pct"][0] for b in BOUNDS) == pytest.approx(100.0)
    assert wh.critical_path_history(where={"rank": "1"}).height == 1
    with pytest.raises(UsageError):
        wh.critical_path_history(step_index=-1)
    res = CliRunner().invoke(app, ["critical-path", "-w", str(tmp_path / "wh"), "--by", "run",
                                   "--format", "json"])
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout.splitlines()[0])) == 2


def test_steps_read_once_equal_each_step_alone(shared_traces: Path, tmp_path: Path) -> None:
    """critical_path_steps (the rows of all steps read once, each step's taken by the macros'
    window rule) equals run_critical_path of each step, bound by bound, on a real trace whose
    steps walk the backward thread as part of the forward one (cp_step_thread_merge)."""
    from tracewh.analysis.critical_run import run_critical_path

    wh = Warehouse(tmp_path / "wh")
    wh.ingest([shared_traces / "nccl_parser_config__nccl_data.json.gz"], jobs=1)
    ref = wh.resolve_run("latest")
    merges = wh.call("cp_step_thread_merge", ref.run_id, first_step=0, last_step=10**9)
    assert merges.height == 3  # every step has a merge: the batched path must apply it per step
    steps = wh.critical_path_steps("latest")
    assert steps.height == 3 and steps["step"].is_sorted()
    for row in steps.iter_rows(named=True):
        alone = run_critical_path(wh, ref, step=row["step"])
        assert row["total_ns"] == alone.total_ns > 0
        assert {b: row[f"{b}_ns"] for b in BOUNDS} == alone.by_bound
    assert wh.critical_path_steps("latest", max_steps=2)["step"].to_list() == steps["step"][:2].to_list()
