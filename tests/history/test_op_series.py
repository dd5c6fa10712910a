"""Operators' achieved TFLOP/s as change-point series (sql/94_op_series.sql): changes/check --op.

Eight synthetic nights of one model (the kernels' own noise of a few percent), the
flash-attention kernel 30% slower from the sixth night on. The attention operator's FLOPs do
not change (its shapes are the same every night), so its achieved TFLOP/s drops to 1/1.3 of
what it was: a change of 100 * (1/1.3 - 1) = -23.1%, which `check --op` must call a
regression (higher is better) and plain `check`/`changes` must not compute at all.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.core.errors import UsageError
from tracewh.synth import SynthConfig, parse_regression, write_trace

runner = CliRunner()
DROP_PCT = 100 * (1 / 1.3 - 1)


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("opseries")
    regress = (parse_regression("flash_fwd:+30%@2025-01-06"),)
    for day in range(1, 9):
        night = dt.date(2025, 1, day)
        cfg = SynthConfig(steps=2, layers=1, seed=day, noise=0.01, night=night, regressions=regress,
                          memory=False)
        write_trace(base / "t" / f"n{day}.pt.trace.json.gz", cfg)
    result = runner.invoke(app, ["ingest", str(base / "t"), "-w", str(base / "wh")])
    assert result.exit_code == 0, result.output
    return str(base / "wh")


def test_changes_op_finds_the_tflops_drop(wh: str) -> None:
    report = Warehouse(wh).changes(since=None, op="_flash_attention_forward")
    rows = report.to_dicts()
    assert {r["metric"] for r in rows} == {"op_tflops"}
    attn = [r for r in rows if r["name"] == "aten::_flash_attention_forward"]
    assert len(attn) == 1
    assert attn[0]["day"] == "2025-01-06" and attn[0]["unit"] == "TFLOP/s"
    assert attn[0]["change_pct"] == pytest.approx(DROP_PCT, abs=2.0)
    assert attn[0]["after"] / attn[0]["before"] == pytest.approx(1 / 1.3, rel=0.03)


def test_changes_without_op_has_no_op_series(wh: str) -> None:
    assert "op_tflops" not in {r["metric"] for r in Warehouse(wh).changes(since=None).to_dicts()}


def test_check_op_calls_the_drop_a_regression(wh: str) -> None:
    w = Warehouse(wh)
    report = w.check("latest", op="flash")
    ops = [f for f in report.regressions if f.metric_kind == "op_tflops"]
    assert [f.name for f in ops] == ["aten::_flash_attention_forward"]
    assert ops[0].change_fraction == pytest.approx(1 / 1.3 - 1, abs=0.02)
    assert ops[0].to_dict()["unit"] == "TFLOP/s"
    assert not [f for f in report.improvements if f.metric_kind == "op_tflops"]
    plain = w.check("latest")
    assert not [f for f in (*plain.regressions, *plain.improvements) if f.metric_kind == "op_tflops"]


def test_cli_check_op_text_and_json(wh: str) -> None:
    text = runner.invoke(app, ["check", "-w", wh, "--op", "flash"])
    assert text.exit_code == 1, text.output
    assert "operator aten::_flash_attention_forward" in text.output and "TFLOP/s vs baseline" in text.output
    out = runner.invoke(app, ["changes", "-w", wh, "--since", "all", "--op", "flash", "--format", "json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert rows and all(r["metric"] == "op_tflops" and r["unit"] == "TFLOP/s" for r in rows)


def test_op_is_exclusive_with_the_other_selections(wh: str) -> None:
    with pytest.raises(UsageError, match="one of"):
        Warehouse(wh).changes(since=None, op="mm", kernel="gemm")
    result = runner.invoke(app, ["changes", "-w", wh, "--op", "mm", "--category", "gemm"])
    assert result.exit_code == 2 and "one of" in result.output
