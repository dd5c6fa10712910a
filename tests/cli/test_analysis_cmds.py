"""Analysis commands in-process through Typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from tracewh.cli import app
from tracewh.synth import SynthConfig, write_trace

runner = CliRunner()


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("cli")
    write_trace(base / "t" / "a.pt.trace.json.gz", SynthConfig(steps=2, layers=1, seed=5))
    result = runner.invoke(app, ["ingest", str(base / "t"), "-w", str(base / "wh")])
    assert result.exit_code == 0, result.output
    return str(base / "wh")


COMMANDS = [
    ["kernels"], ["kernels", "--group-by", "category"], ["kernels", "--by", "calls"],
    ["gaps"], ["gaps", "--largest", "3"], ["gaps", "--breakdown"],
    ["launches"], ["launches", "--by", "step"], ["launches", "--by", "linkage"],
    ["queue"], ["steps"], ["ops"], ["ops", "--cpu"], ["memcpy"], ["breakdown"], ["ranks"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: "-".join(a))
def test_every_analysis_command_prints_json_rows(wh: str, args: list[str]) -> None:
    result = runner.invoke(app, [*args, "-w", wh, "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert isinstance(rows, list) and rows and isinstance(rows[0], dict)


@pytest.mark.parametrize("args", COMMANDS[:4], ids=lambda a: "-".join(a))
def test_tables_show_units(wh: str, args: list[str]) -> None:
    result = runner.invoke(app, [*args, "-w", wh])
    assert result.exit_code == 0, result.output
    assert "(ms)" in result.output or "(µs)" in result.output


def test_top_and_csv(wh: str) -> None:
    result = runner.invoke(app, ["kernels", "-w", wh, "--top", "3", "--format", "csv"])
    assert result.exit_code == 0
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("name,calls,total_ns")
    assert len(lines) == 4


def test_sql_out_files(wh: str, tmp_path: Path) -> None:
    for ext in ("csv", "json", "parquet"):
        out = tmp_path / f"r.{ext}"
        q = "SELECT cat, count(*) AS n FROM gpu_ops GROUP BY cat ORDER BY cat"
        result = runner.invoke(app, ["sql", q, "-w", wh, "--out", str(out), "-f", "csv"])
        assert result.exit_code == 0, result.output
        assert out.stat().st_size > 0
    df = pl.read_parquet(tmp_path / "r.parquet")
    assert set(df["cat"]) == {"kernel", "gpu_memcpy", "gpu_memset"}
    bad = runner.invoke(app, ["sql", "SELECT 1", "-w", wh, "--out", str(tmp_path / "x.txt")])
    assert bad.exit_code == 2


def test_bad_query_and_selector_exit_2_without_traceback(wh: str, tmp_path: Path) -> None:
    bad = runner.invoke(app, ["sql", "SELEC nope", "-w", wh])
    assert bad.exit_code == 2
    assert "Traceback" not in bad.output and "syntax error" in bad.output.lower()
    unknown = runner.invoke(app, ["kernels", "-w", wh, "--run", "model=nothing"])
    assert unknown.exit_code == 2 and "matches no run" in unknown.output
    missing = runner.invoke(app, ["kernels", "-w", str(tmp_path / "none")])
    assert missing.exit_code == 2 and "does not exist" in missing.output


def test_runs_json_shape(wh: str) -> None:
    result = runner.invoke(app, ["runs", "-w", wh, "--format", "json"])
    rows = json.loads(result.stdout)
    assert {"run_id", "source_path", "day", "job", "labels_json"} <= set(rows[0])
