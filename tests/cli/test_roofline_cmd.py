"""`tracewh roofline` and `tracewh history --op` in-process, on synthetic nights.

Three synthetic nights of one model (no noise), the flash-attention kernel 30% slower from the
third night on: the attention operator's TFLOP/s must drop by exactly 1/1.3 that night, since
its FLOPs (4*B*H*S^2*D of the trace's shapes, B=8 H=16 S=1024 D=72) do not change.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from tracewh.cli import app
from tracewh.synth import SynthConfig, parse_regression, write_trace

runner = CliRunner()
ATTN_FLOPS = 4 * 8 * 16 * 1024 * 1024 * 72


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("roof")
    regress = (parse_regression("flash_fwd:+30%@2025-01-03"),)
    for day in (1, 2, 3):
        night = dt.date(2025, 1, day)
        cfg = SynthConfig(steps=2, layers=1, seed=day, noise=0.0, night=night, regressions=regress,
                          memory=False)
        write_trace(base / "t" / f"n{day}.pt.trace.json.gz", cfg)
    result = runner.invoke(app, ["ingest", str(base / "t"), "-w", str(base / "wh")])
    assert result.exit_code == 0, result.output
    return str(base / "wh")


def _json(args: list[str]) -> list[dict[str, object]]:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    rows: list[dict[str, object]] = json.loads(result.stdout)  # notes go to stderr
    return rows


def test_roofline_json_rows(wh: str) -> None:
    rows = _json(["roofline", "-w", wh, "--format", "json", "--top", "50"])
    names = {r["op_name"] for r in rows}
    assert {"aten::addmm", "aten::_flash_attention_forward", "aten::native_layer_norm"} <= names
    attn = next(r for r in rows if r["op_name"] == "aten::_flash_attention_forward")
    assert attn["flops"] == ATTN_FLOPS and attn["family"] == "attention"
    assert attn["device"] == "A100 SXM4 80GB" and attn["peak_tflops"] == 312.0
    for col in ("op_name", "input_dims", "dtype", "calls", "flops", "bytes", "gpu_ns", "tflops_per_s",
                "tb_per_s", "intensity", "pct_of_peak", "bound", "non_contiguous"):
        assert col in attn


def test_roofline_table_op_top_and_out(wh: str, tmp_path: Path) -> None:
    out = tmp_path / "roof.parquet"
    result = runner.invoke(app, ["roofline", "-w", wh, "--op", "addmm", "--top", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "roofline on A100 SXM4 80GB" in result.output and "showing 2 of 4" in result.output
    df = pl.read_parquet(out)
    assert set(df["op_name"]) == {"aten::addmm"} and df.height == 2  # --out: the rows shown
    every = runner.invoke(app, ["roofline", "-w", wh, "--op", "addmm", "--top", "0", "--out", str(out)])
    assert every.exit_code == 0 and pl.read_parquet(out).height == 4  # --top 0: all rows
    assert "peak_tflops" in df.columns and "params" in df.columns


def test_peak_overrides_on_the_command_line(wh: str) -> None:
    rows = _json(["roofline", "-w", wh, "--format", "json", "--op", "flash",
                  "--peak-tflops", "bf16=100,vector=10", "--peak-tbs", "1"])
    assert (rows[0]["peak_tflops"], rows[0]["peak_tbs"]) == (100.0, 1.0)
    one = _json(["roofline", "-w", wh, "--format", "json", "--op", "flash", "--peak-tflops", "50"])
    assert one[0]["peak_tflops"] == 50.0 and one[0]["peak_tbs"] == 2.039


@pytest.mark.parametrize("args", [
    ["--peak-tflops", "fast"], ["--peak-tflops", "bf17=3"], ["--peak-tflops", "-1"],
    ["--peak-tbs", "0"], ["--top", "-1"], ["--run", "nope"],
])
def test_bad_usage_exits_2_with_one_line(wh: str, args: list[str]) -> None:
    result = runner.invoke(app, ["roofline", "-w", wh, *args])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and result.output.count("\n") == 1


def test_empty_warehouse_exits_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["roofline", "-w", str(tmp_path / "none")])
    assert result.exit_code == 2 and result.output.startswith("error: ")


def test_history_follows_the_attention_tflops_over_nights(wh: str) -> None:
    rows = _json(["history", "-w", wh, "--op", "_flash_attention_forward", "--format", "json"])
    assert [r["day"] for r in rows] == ["2025-01-01", "2025-01-02", "2025-01-03"]
    t1, t2, t3 = (float(r["tflops_per_s"]) for r in rows)  # type: ignore[arg-type]
    assert all(r["flops"] == ATTN_FLOPS * r["calls"] for r in rows)
    assert t2 == pytest.approx(t1, rel=0.05)
    assert t3 / t1 == pytest.approx(1 / 1.3, rel=0.05)


def test_history_op_is_exclusive_with_kernel(wh: str) -> None:
    result = runner.invoke(app, ["history", "-w", wh, "--op", "mm", "--kernel", "gemm"])
    assert result.exit_code == 2 and "one of" in result.output
