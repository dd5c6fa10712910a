"""Tests of the synthetic trace generator: structure checked from the JSON, independently."""

from __future__ import annotations

import datetime as dt
import gzip
import itertools
import json
import re
import statistics
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tracewh.cli import app
from tracewh.core.errors import UsageError
from tracewh.synth import (
    SynthConfig,
    parse_regression,
    parse_size,
    parse_straggler,
    write_history,
    write_trace,
)

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
Event = dict[str, Any]


def load(path: Path) -> dict[str, Any]:
    """Plain json.load (Decimal timestamps so nanoseconds compare exactly)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        doc: dict[str, Any] = json.load(fh, parse_float=Decimal)
    return doc


def raw_text(path: Path) -> str:
    if path.suffix != ".gz":
        return path.read_text()
    with gzip.open(path, "rt") as fh:
        return fh.read()


def ns(value: Decimal) -> int:
    return int(value * 1000)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    path = tmp_path_factory.mktemp("synth") / "t.json"
    write_trace(path, SynthConfig(steps=3, layers=2, python=True, seed=7))
    return path, load(path)


def events(doc: dict[str, Any], cat: str | None = None) -> list[Event]:
    evs: list[Event] = doc["traceEvents"]
    return [e for e in evs if cat is None or e.get("cat") == cat]


# ---- option parsing ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1GB", 10**9), ("1gb", 10**9), ("500MB", 500 * 10**6), ("2KB", 2000), ("1GiB", 2**30),
     ("3 MiB", 3 * 2**20), ("1.5KiB", 1536), ("12345", 12345), ("7B", 7)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "GB", "1XB", "-1MB", "0", "1 G B"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        parse_size(text)


def test_parse_regression_and_straggler() -> None:
    r = parse_regression("void at::native::*gelu*:+30%@2025-01-10")
    assert (r.pattern, r.factor, r.since) == ("void at::native::*gelu*", 0.3, dt.date(2025, 1, 10))
    assert r.matches("void at::native::vectorized_gelu_kernel") and not r.matches("gelu")
    sub = parse_regression("flash_fwd:-10%@2025-02-01")
    assert sub.factor == pytest.approx(-0.1) and sub.matches("void flash_fwd_kernel<1>(x)")
    assert parse_straggler("1:20%").rank == 1 and parse_straggler("1:+20").factor == pytest.approx(0.2)
    for bad in ("flash:+30%", "flash@2025-01-01", "x:abc@2025-01-01", "x:+30%@2025-13-01"):
        with pytest.raises(UsageError):
            parse_regression(bad)
    with pytest.raises(UsageError):
        parse_straggler("a:20")
    with pytest.raises(UsageError):
        SynthConfig(ranks=2, straggler=parse_straggler("2:10%"))


# ---- file layout ---------------------------------------------------------------------


def test_header_before_and_trailer_after_events(small: tuple[Path, dict[str, Any]]) -> None:
    path, doc = small
    text = raw_text(path)
    pos = {k: text.index(f'"{k}"') for k in
           ("schemaVersion", "deviceProperties", "distributedInfo", "displayTimeUnit",
            "baseTimeNanoseconds", "traceEvents", "traceName")}
    header = [pos[k] for k in pos if k not in ("traceEvents", "traceName")]
    assert max(header) < pos["traceEvents"] < pos["traceName"]
    assert text.rindex('"traceName"') > text.rindex('"ph"')
    assert list(doc)[-1] == "traceName"
    assert doc["baseTimeNanoseconds"] == 1735696800 * 10**9


def test_distributed_info_in_trailer(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    write_trace(path, SynthConfig(steps=1, layers=1, distributed_info_in_trailer=True))
    text = path.read_text()
    assert text.index('"traceEvents"') < text.index('"distributedInfo"')
    assert load(path)["distributedInfo"]["world_size"] == 1


def test_timestamps_are_relative_decimal_microseconds(small: tuple[Path, dict[str, Any]]) -> None:
    path, _ = small
    text = raw_text(path)
    values = re.findall(r'"(?:ts|dur)": ([0-9.]+)', text)
    assert values and all(re.fullmatch(r"\d+\.\d{3}", v) for v in values)
    # relative to baseTimeNanoseconds: the trace spans seconds, not decades
    assert all(Decimal(v) < Decimal(10**8) for v in values)
    assert any(not v.endswith("000") for v in values)  # nanosecond digits are used


def test_summary_counts_match_json(tmp_path: Path) -> None:
    path = tmp_path / "t.pt.trace.json.gz"
    summary = write_trace(path, SynthConfig(steps=2, layers=1))
    doc = load(path)
    evs = events(doc)
    by_cat = Counter(e.get("cat", "__metadata" if e["ph"] == "M" else "__instant") for e in evs)
    assert dict(by_cat) == dict(summary.by_category)
    assert summary.events == len(evs)
    assert summary.kernels == by_cat["kernel"] > 0
    assert summary.uncompressed_bytes == len(raw_text(path).encode())
    assert summary.steps == 2 == sum(e["name"].startswith("ProfilerStep#") for e in evs)


# ---- structure -------------------------------------------------------------------------


def test_every_gpu_op_has_a_launch(small: tuple[Path, dict[str, Any]]) -> None:
    _, doc = small
    runtime = {e["args"]["correlation"]: e for e in events(doc, "cuda_runtime")}
    per_corr: dict[int, list[Event]] = defaultdict(list)
    for e in events(doc):
        if e.get("cat") in GPU_CATS:
            assert e["args"]["correlation"] in runtime, e["name"]
            launch = runtime[e["args"]["correlation"]]
            assert launch["args"]["External id"] == e["args"]["External id"]
            per_corr[e["args"]["correlation"]].append(e)
    names = {runtime[c]["name"] for c in per_corr}
    assert {"cudaLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync", "cudaGraphLaunch"} <= names
    graphs = [c for c in per_corr if runtime[c]["name"] == "cudaGraphLaunch"]
    assert graphs and all(len(per_corr[c]) >= 2 for c in graphs)
    cats = Counter(e["cat"] for ops in per_corr.values() for e in ops)
    assert cats["gpu_memcpy"] and cats["gpu_memset"] and cats["kernel"]
    memcpy_names = {e["name"] for e in events(doc, "gpu_memcpy")}
    assert {"Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)",
            "Memcpy DtoD (Device -> Device)"} <= memcpy_names
    for e in events(doc, "gpu_memcpy") + events(doc, "gpu_memset"):
        assert e["args"]["bytes"] > 0 and e["args"]["memory bandwidth (GB/s)"] > 0
    k = events(doc, "kernel")[0]["args"]
    for key in ("grid", "block", "registers per thread", "shared memory", "blocks per SM",
                "warps per SM", "est. achieved occupancy %", "device", "stream"):
        assert key in k


def test_flows_pair_up(small: tuple[Path, dict[str, Any]]) -> None:
    _, doc = small
    starts = {e["id"]: e for e in events(doc) if e["ph"] == "s" and e["cat"] == "ac2g"}
    finishes: dict[int, list[Event]] = defaultdict(list)
    for e in events(doc):
        if e["ph"] == "f" and e["cat"] == "ac2g":
            assert e["bp"] == "e"
            finishes[e["id"]].append(e)
    assert starts and set(starts) == set(finishes)
    runtime = {e["args"]["correlation"]: e for e in events(doc, "cuda_runtime")}
    gpu = {(e["args"]["correlation"], e["ts"]): e for e in events(doc) if e.get("cat") in GPU_CATS}
    for fid, s in starts.items():
        r = runtime[fid]
        assert (s["ts"], s["tid"], s["pid"]) == (r["ts"], r["tid"], r["pid"])
        for f in finishes[fid]:
            g = gpu[(fid, f["ts"])]
            assert (f["tid"], f["pid"]) == (g["tid"], g["pid"])


def test_streams_never_overlap_and_lag(small: tuple[Path, dict[str, Any]]) -> None:
    _, doc = small
    per_stream: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for e in events(doc):
        if e.get("cat") in GPU_CATS:
            per_stream[(e["pid"], e["tid"])].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    assert {7, 40, 25} <= {tid for _, tid in per_stream}
    gaps = []
    for spans in per_stream.values():
        spans.sort()
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end
            gaps.append(start - end)
    assert max(gaps) > 100_000  # host-bound stretches leave the GPU idle
    runtime = {e["args"]["correlation"]: e for e in events(doc, "cuda_runtime")}
    lags = []
    for e in events(doc):
        if e.get("cat") in GPU_CATS:
            launch = runtime[e["args"]["correlation"]]
            assert ns(e["ts"]) > ns(launch["ts"])
            lags.append(ns(e["ts"]) - ns(launch["ts"]))
    assert max(lags) > 1_000_000  # the GPU queue lags the CPU by over a millisecond somewhere


def test_steps_and_ops_nest(small: tuple[Path, dict[str, Any]]) -> None:
    _, doc = small
    steps = [e for e in events(doc, "user_annotation") if e["name"].startswith("ProfilerStep#")]
    assert [s["name"] for s in steps] == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2"]
    spans = sorted((ns(s["ts"]), ns(s["ts"]) + ns(s["dur"])) for s in steps)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))

    def inside(e: Event, outer: Event) -> bool:
        return (ns(outer["ts"]) <= ns(e["ts"]) and ns(e["ts"]) + ns(e["dur"]) <= ns(outer["ts"]) + ns(outer["dur"])
                and e["tid"] == outer["tid"])

    ops = events(doc, "cpu_op")
    names = {e["name"] for e in ops}
    assert {"aten::linear", "aten::addmm", "aten::softmax", "aten::layer_norm", "aten::add", "aten::gelu",
            "aten::_flash_attention_forward", "aten::copy_", "c10d::allreduce_", "record_param_comms"} <= names
    for e in ops:
        assert any(inside(e, s) for s in steps), e["name"]
        assert "Input Dims" in e["args"] and "Input type" in e["args"]
    linears = [e for e in ops if e["name"] == "aten::linear"]
    addmm = [e for e in ops if e["name"] == "aten::addmm"]
    assert all(any(inside(a, lin) for lin in linears) for a in addmm)
    parents = ops + events(doc, "user_annotation")
    for r in events(doc, "cuda_runtime"):
        owners = [p for p in parents if p["args"]["External id"] == r["args"]["External id"]]
        assert len(owners) == 1 and inside(r, owners[0]), r["name"]


def test_metadata_memory_and_python_events(small: tuple[Path, dict[str, Any]]) -> None:
    _, doc = small
    meta = {(e["name"], e["pid"], e["tid"]): e["args"] for e in events(doc) if e["ph"] == "M"}
    assert meta[("thread_name", 0, 7)] == {"name": "stream 7 "}
    assert meta[("process_labels", 0, 0)] == {"labels": "GPU 0"}
    assert any(k[0] == "process_name" for k in meta)
    mem = [e for e in events(doc) if e.get("name") == "[memory]"]
    assert mem and all(e["ph"] == "i" and e["s"] == "t" for e in mem)
    assert set(mem[0]["args"]) == {"Addr", "Bytes", "Total Allocated", "Total Reserved", "Device Type", "Device Id"}
    assert any(e["args"]["Bytes"] < 0 for e in mem)
    py = events(doc, "python_function")
    assert py and len({e["args"]["Python id"] for e in py}) == len(py)


def test_rocm_flavor(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_trace(path, SynthConfig(steps=1, layers=1, flavor="rocm"))
    doc = load(path)
    runtime = {e["name"] for e in events(doc, "cuda_runtime")}
    assert {"hipLaunchKernel", "hipExtModuleLaunchKernel", "hipMemcpyAsync"} <= runtime
    assert not any(n.startswith("cuda") for n in runtime)
    kernels = events(doc, "kernel")
    assert any(k["name"].startswith("Cijk_Alik_Bljk_SB_MT128x128x16") for k in kernels)
    assert 0 in {k["tid"] for k in kernels}
    assert doc["deviceProperties"][0]["name"] == "AMD Instinct MI250X"


def test_deterministic(tmp_path: Path) -> None:
    cfg = SynthConfig(steps=2, layers=1, seed=3)
    a, b, c = tmp_path / "a.pt.trace.json.gz", tmp_path / "b.pt.trace.json.gz", tmp_path / "c.pt.trace.json.gz"
    write_trace(a, cfg)
    write_trace(b, cfg)
    write_trace(c, SynthConfig(steps=2, layers=1, seed=4))
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()


def test_size_target(tmp_path: Path) -> None:
    path = tmp_path / "s.pt.trace.json.gz"
    summary = write_trace(path, SynthConfig(size_bytes=parse_size("3MB")))
    size = len(raw_text(path).encode())
    assert size == summary.uncompressed_bytes
    assert abs(size - 3_000_000) < 300_000


# ---- ranks, history, CLI ---------------------------------------------------------------


def _mean_dur(doc: dict[str, Any], needle: str) -> float:
    return statistics.mean(float(e["dur"]) for e in events(doc, "kernel") if needle in e["name"])


def test_cli_ranks_and_straggler(tmp_path: Path) -> None:
    out = tmp_path / "ranks"
    result = CliRunner().invoke(app, ["synth", str(out), "--ranks", "2", "--steps", "2", "--layers", "1",
                                      "--straggler", "1:50%"])
    assert result.exit_code == 0, result.output
    files = sorted(p.name for p in out.iterdir())
    assert files == ["rank-0.pt.trace.json.gz", "rank-1.pt.trace.json.gz"]
    d0, d1 = load(out / files[0]), load(out / files[1])
    assert (d0["distributedInfo"]["rank"], d1["distributedInfo"]["rank"]) == (0, 1)
    assert {e["pid"] for e in events(d1, "kernel")} == {1}
    assert 1.4 < _mean_dur(d1, "cutlass") / _mean_dur(d0, "cutlass") < 1.6
    assert _mean_dur(d0, "ncclDevKernel") > _mean_dur(d1, "ncclDevKernel")  # rank 0 waits


def test_cli_single_file_and_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["synth", str(tmp_path / "t.json"), "--steps", "1", "--layers", "1"])
    assert result.exit_code == 0, result.output
    assert load(tmp_path / "t.json")["traceEvents"]
    bad = runner.invoke(app, ["synth", str(tmp_path / "u.json"), "--size", "12XB"])
    assert bad.exit_code == 2 and not (tmp_path / "u.json").exists()
    assert runner.invoke(app, ["synth", str(tmp_path / "v.json"), "--ranks", "2"]).exit_code == 2
    assert runner.invoke(app, ["synth", str(tmp_path / "w.json"), "--flavor", "tpu"]).exit_code == 2


def test_history_with_regression(tmp_path: Path) -> None:
    reg = parse_regression("flash_fwd:+30%@2025-03-04")
    write_history(tmp_path, SynthConfig(steps=2, layers=1, seed=1), runs=6, start=dt.date(2025, 3, 1),
                  regressions=[reg])
    nights = sorted(p.name for p in tmp_path.iterdir())
    assert nights == [f"2025-03-0{i}" for i in range(1, 7)]
    flash: dict[str, float] = {}
    gelu: dict[str, float] = {}
    for night in nights:
        labels = json.loads((tmp_path / night / "run.json").read_text())
        assert labels["branch"] == "main" and len(labels["commit"]) == 40 and labels["model"]
        doc = load(tmp_path / night / "rank-0.pt.trace.json.gz")
        midnight = dt.datetime.fromisoformat(night).replace(tzinfo=dt.UTC).timestamp()
        assert doc["baseTimeNanoseconds"] == (int(midnight) + 2 * 3600) * 10**9
        flash[night] = _mean_dur(doc, "flash_fwd")
        gelu[night] = _mean_dur(doc, "Gelu")
    before = statistics.mean(flash[n] for n in nights[:3])
    after = statistics.mean(flash[n] for n in nights[3:])
    assert 1.2 < after / before < 1.4
    gelu_ratio = statistics.mean(gelu[n] for n in nights[3:]) / statistics.mean(gelu[n] for n in nights[:3])
    assert 0.9 < gelu_ratio < 1.1
    assert len({round(v, 3) for v in gelu.values()}) > 1  # night-to-night noise


def test_cli_history(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["synth", str(tmp_path), "--runs", "2", "--start", "2025-05-01",
                                      "--steps", "1", "--layers", "1", "--regress", "flash:+30%@2025-05-02"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "2025-05-02" / "rank-0.pt.trace.json.gz").exists()
    assert (tmp_path / "2025-05-01" / "run.json").exists()


@pytest.mark.slow
def test_large_size_streams(tmp_path: Path) -> None:
    path = tmp_path / "big.pt.trace.json.gz"
    summary = write_trace(path, SynthConfig(size_bytes=parse_size("200MB")))
    assert abs(summary.uncompressed_bytes - 200_000_000) < 2_000_000
    with gzip.open(path) as fh:
        fh.seek(0, 2)
        assert fh.tell() == summary.uncompressed_bytes
