"""Query errors through the CLI: one clear line on stderr, exit code 2, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracewh.cli import app
from tracewh.synth import SynthConfig, write_trace

runner = CliRunner()


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> str:
    base = tmp_path_factory.mktemp("queries")
    write_trace(base / "t" / "a.pt.trace.json.gz", SynthConfig(steps=1, layers=1, seed=71))
    result = runner.invoke(app, ["ingest", str(base / "t"), "-w", str(base / "wh")])
    assert result.exit_code == 0, result.output
    return str(base / "wh")


@pytest.fixture(scope="module")
def empty_wh(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A created warehouse with no run (its only file failed)."""
    base = tmp_path_factory.mktemp("empty")
    (base / "bad.json").write_text("{}")
    result = runner.invoke(app, ["ingest", str(base / "bad.json"), "-w", str(base / "wh")])
    assert result.exit_code == 1
    return str(base / "wh")


def _clean_error(result: object, code: int = 2) -> str:
    assert result.exit_code == code, (result.exit_code, result.output)  # type: ignore[attr-defined]
    err: str = result.stderr  # type: ignore[attr-defined]
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in result.output  # type: ignore[attr-defined]
    return err


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("SELEC 1", "syntax error"),
        ("SELECT * FROM no_such_table", "no_such_table"),
        ("SELECT no_such_column FROM runs", "no_such_column"),
        ("SELECT 1/'x'", "query failed"),
    ],
)
def test_malformed_sql_gives_duckdbs_message(wh: str, query: str, message: str) -> None:
    err = _clean_error(runner.invoke(app, ["sql", query, "-w", wh]))
    assert "query failed" in err and message in err


@pytest.mark.parametrize(
    "args",
    [["kernels", "--run", "ffffffffffff"], ["kernels", "--run", "model=nope"],
     ["steps", "--run", "rank=99"], ["gaps", "--run", "no_such_key=1"]],
    ids=["id-prefix", "label", "field", "unknown-key"],
)
def test_unknown_run_selector(wh: str, args: list[str]) -> None:
    err = _clean_error(runner.invoke(app, [*args, "-w", wh]))
    assert "matches no run" in err and args[2] in err


@pytest.mark.parametrize("args", [["runs"], ["kernels"], ["sql", "SELECT 1"]])
def test_empty_warehouse(empty_wh: str, args: list[str]) -> None:
    err = _clean_error(runner.invoke(app, [*args, "-w", empty_wh]))
    assert "ingest something first" in err


@pytest.mark.parametrize("args", [["runs"], ["kernels"], ["sql", "SELECT 1"], ["verify"], ["compact"]])
def test_nonexistent_warehouse(tmp_path: Path, args: list[str]) -> None:
    missing = tmp_path / "no" / "such" / "warehouse"
    err = _clean_error(runner.invoke(app, [*args, "-w", str(missing)]))
    assert "does not exist" in err and str(missing) in err
    assert not missing.exists()  # a query never creates a warehouse


def test_a_directory_that_is_not_a_warehouse(tmp_path: Path) -> None:
    (tmp_path / "stuff").mkdir()
    result = runner.invoke(app, ["runs", "-w", str(tmp_path / "stuff")])
    assert result.exit_code != 0
    err = _clean_error(result, result.exit_code)
    assert "not a tracewh warehouse" in err
