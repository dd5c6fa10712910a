"""`--format markdown`: the terminal table's cells as a GitHub-flavoured Markdown table."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.cli.display import Column
from tracewh.cli.markdown import cell, table
from tracewh.synth import SynthConfig, write_trace


def test_cells_escape_pipes_and_keep_markup_as_code() -> None:
    assert cell("a|b", numeric=False) == "a\\|b"
    assert cell("void at::native::k<4, float>(int)", numeric=False) == "`void at::native::k<4, float>(int)`"
    assert cell("x`y", numeric=False) == "``x`y``"
    assert cell("  relu", numeric=False) == "\u00a0\u00a0relu"  # tree indentation kept
    assert cell("1,234.5", numeric=True) == "1,234.5"
    assert cell("two\nlines", numeric=False) == "two lines"


def test_table_aligns_numbers_right() -> None:
    cols = [Column("name", ["a", "b_c"], False, "name"), Column("total (ms)", ["1.5", "20.0"], True, "total_ns")]
    assert table(cols) == [
        "| name | total (ms) |",
        "|---|---:|",
        "| a | 1.5 |",
        "| `b_c` | 20.0 |",
    ]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("markdown")
    trace = base / "t.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=2, layers=1, seed=4))
    assert Warehouse(base / "wh").ingest([trace]).ok
    return base / "wh"


@pytest.mark.parametrize("args", [["kernels", "--top", "5"], ["gaps"], ["steps"], ["modules"],
                                  ["runs"], ["sql", "SELECT 1 AS n, 'a|b' AS s"], ["history"]])
def test_table_commands_print_markdown(warehouse: Path, args: list[str]) -> None:
    res = CliRunner().invoke(app, [*args, "-w", str(warehouse), "--format", "markdown"],
                             env={"COLUMNS": "60"})
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].startswith("**") and lines[0].endswith("**")
    rows = [line for line in lines if line.startswith("|")]
    assert len(rows) >= 3, res.stdout
    widths = {line.replace("\\|", "").count("|") for line in rows}
    assert len(widths) == 1, "every row has as many cells as the header"
    assert set(rows[1]) <= set("|-:")
    # the same rows as the terminal table, none elided for width (COLUMNS=60)
    assert "…" not in res.stdout


def test_markdown_matches_the_table_values(warehouse: Path) -> None:
    md = CliRunner().invoke(app, ["kernels", "--top", "3", "-w", str(warehouse), "--format", "markdown"],
                            env={"COLUMNS": "400"}).stdout
    tab = CliRunner().invoke(app, ["kernels", "--top", "3", "-w", str(warehouse)],
                             env={"COLUMNS": "400"}).stdout
    md_rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in md.splitlines()
               if line.startswith("| ")][1:]
    for row in md_rows:
        numbers = [c for c in row if c and c[0].isdigit()]
        assert numbers and all(n in tab for n in numbers)
