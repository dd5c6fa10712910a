"""Roofline figures never above the device's peak unflagged (issue 30, items 2-3 and 5).

Synthetic traces name a device (A100 SXM4 80GB, MI250X): their kernel durations must be
physically possible on it. Expected rates are computed here from the raw JSON: each GEMM
kernel's FLOPs from its operator's ``Input Dims`` (2*M*N*K + M*N for the bias) over its
duration, against the datasheet peaks (A100 TF32 156 TFLOP/s, 2.039 TB/s; MI250X GCD FP32
matrix 47.85 TFLOP/s).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from helpers_ingest import load_trace, ns, run_id_of
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.report.roof import roofline_section
from tracewh.synth import Straggler, SynthConfig, write_trace
from tracewh.synth.options import parse_regression

PEAK = {"cuda": 156.0, "rocm": 47.85}  # TFLOP/s of the roof an FP32 GEMM is compared with


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Warehouse, dict[str, Path]]:
    root = tmp_path_factory.mktemp("plausible")
    paths = {}
    for flavor in ("cuda", "rocm"):
        # a -60% "regression" on the GEMMs: the fastest they may be made, still under peak
        # three ranks, rank 2 a straggler: the median rank differs from the mean
        cfg = SynthConfig(flavor=flavor, steps=2, layers=2, ranks=3, seed=11, night=dt.date(2025, 1, 2),  # type: ignore[arg-type]
                          straggler=Straggler(2, 0.5),
                          regressions=(parse_regression("gemm:-60%@2025-01-01"),
                                       parse_regression("Cijk:-60%@2025-01-01")))
        for rank in range(3):
            path = root / flavor / f"rank-{rank}.pt.trace.json"
            path.parent.mkdir(exist_ok=True)
            write_trace(path, cfg, rank=rank)
            paths[f"{flavor}{rank}"] = path
    wh = Warehouse(root / "wh")
    assert wh.ingest([root / "cuda", root / "rocm"]).ok
    return wh, paths


def _gemm_tflops(path: Path) -> list[float]:
    """TFLOP/s of every addmm kernel, from the raw trace (operator dims by correlation)."""
    events = load_trace(path, exact=True)["traceEvents"]
    ops = sorted(((ns(e["ts"]) or 0, ns(e["dur"]) or 0, e) for e in events
                  if e.get("cat") == "cpu_op" and e.get("name") == "aten::addmm"), key=lambda t: t[0])
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "hip_runtime") and "correlation" in (e.get("args") or {})}
    out = []
    for e in events:
        if e.get("cat") != "kernel":
            continue
        call = launches.get(e["args"].get("correlation"))
        if call is None:
            continue
        t = ns(call["ts"]) or 0
        op = next((o for t0, d, o in ops if t0 <= t < t0 + d), None)
        if op is None:
            continue
        bias, x, w = op["args"]["Input Dims"][:3]
        m, k, n = x[0], x[1], w[1]
        flops = 2 * m * n * k + m * n
        assert bias == [n]
        out.append(flops / (ns(e["dur"]) or 1) / 1e3)
    return out


@pytest.mark.parametrize("flavor", ["cuda", "rocm"])
def test_synthetic_gemms_stay_under_the_device_peak(synth: tuple[Warehouse, dict[str, Path]], flavor: str) -> None:
    wh, paths = synth
    rates = _gemm_tflops(paths[f"{flavor}0"])
    assert len(rates) >= 8
    assert max(rates) <= 0.9 * PEAK[flavor] * 1.0001, max(rates)  # MAX_FRACTION (to 1 ns) after -60%
    rows = wh.roofline(run_id_of(paths[f"{flavor}0"]))
    pct = [p for p in rows["pct_of_peak"].to_list() if p is not None]
    assert pct and max(pct) <= 100 and not rows["above_peak"].any()


def test_above_peak_is_flagged_with_its_likely_cause(synth: tuple[Warehouse, dict[str, Path]]) -> None:
    """A peak below what was measured (a wrong --peak-tflops): flagged everywhere."""
    wh, paths = synth
    rid = run_id_of(paths["cuda0"])
    rows = wh.roofline(rid, peak_tflops=1.0)
    above = rows.filter(rows["above_peak"])
    assert above.height >= 4
    assert all("likely cause" in n for n in above["note"].to_list())
    assert (above["pct_of_peak"] > 100).all()
    res = CliRunner().invoke(app, ["roofline", "-w", str(wh.root), "--run", rid, "--peak-tflops", "1",
                                   "--top", "0"], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    assert "! above peak" in res.output and "row(s) above 100% of peak" in res.output
    section = roofline_section(rows)
    md = "".join(t.markdown() for t in section.tables)
    assert "! above peak" in md and "flagged" in section.text
    res = CliRunner().invoke(app, ["roofline", "-w", str(wh.root), "--run", rid, "--peak-tflops", "1", "-f", "json"])
    data = json.loads(res.stdout)
    assert all(isinstance(r["pct_of_peak"], float | None) for r in data)  # JSON keeps the number


def test_ranks_imbalance_names_max_over_median(synth: tuple[Warehouse, dict[str, Path]]) -> None:
    """The header says max ÷ median, and that is what the column holds (by hand from the JSON)."""
    wh, paths = synth
    per_rank: dict[str, list[int]] = {}
    for key in ("cuda0", "cuda1", "cuda2"):
        for e in load_trace(paths[key], exact=True)["traceEvents"]:
            if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e.get("ph") == "X":
                per_rank.setdefault(e["name"], [0, 0, 0])[int(key[-1])] += ns(e["dur"]) or 0
    res = CliRunner().invoke(app, ["ranks", "-w", str(wh.root), "--run", run_id_of(paths["cuda0"]), "-f", "json"])
    assert res.exit_code == 0
    rows = json.loads(res.stdout)
    checked = 0
    for r in rows:
        totals = sorted(per_rank[r["name"]])
        if not all(totals):
            continue
        assert r["imbalance"] == pytest.approx(totals[2] / totals[1])  # max / median of three
        checked += totals[2] / totals[1] != pytest.approx(totals[2] / (sum(totals) / 3))
    assert checked >= 3  # rows where max / mean would differ
    res = CliRunner().invoke(app, ["ranks", "-w", str(wh.root), "--run", run_id_of(paths["cuda0"])],
                             env={"COLUMNS": "200"})
    assert "max ÷ median" in res.output and "÷ mean" not in res.output
