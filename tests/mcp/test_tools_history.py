"""The job-level tools through the SDK's stdio client: `collectives` and `critical_path`.

Each returns what `tracewh collectives --format json` / `tracewh critical-path --format json`
prints for the same runs and options (issue 32). The data: a 4-rank job made from the shared
NCCL trace with rank 2 arriving late at every collective (tests/helpers_collectives.py), so
the figures are real, and known from the construction.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from helpers_collectives import LATE_RANK, WORLD, make_job
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app

ALEXNET = "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"


def cli_json(*args: str) -> Any:
    """What ``tracewh ARGS --format json`` prints, parsed."""
    result = CliRunner().invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def calls(wh: Path, open_session: Callable[..., Any], todo: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Call the tools in one server session; each result."""

    async def main() -> list[Any]:
        async with open_session(wh) as s:
            return [await s.call_tool(name, args) for name, args in todo]

    return anyio.run(main)


def rows_of(result: Any) -> list[dict[str, Any]]:
    assert not result.isError, result.content
    rows: list[dict[str, Any]] = result.structuredContent["result"]
    assert json.loads(result.content[0].text) == rows  # the text block is the same JSON
    return rows


@pytest.fixture(scope="module")
def job_wh(shared_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (shared_traces / "nccl_parser_config__nccl_data.json.gz").is_file():
        pytest.skip("the shared NCCL trace is absent")
    root = tmp_path_factory.mktemp("mcpjob")
    make_job(shared_traces, root / "job")
    report = Warehouse(root / "wh").ingest([root / "job"], jobs=1)
    assert report.ok, report.to_dict()
    return root / "wh"


def test_critical_path_on_a_real_trace_equals_the_cli(
    shared_traces: Path, tmp_path: Path, open_session: Any
) -> None:
    """HTA's own critical-path test trace (AlexNet on an A100): the tool's object is the
    CLI's, its bounds sum to the path and its edges are in path order."""
    trace = shared_traces / ALEXNET
    if not trace.is_file():
        pytest.skip(f"{ALEXNET} is not among the shared traces")
    shutil.copy(trace, tmp_path / ALEXNET)  # a copy in the test's folder, deleted with it
    assert Warehouse(tmp_path / "wh").ingest([tmp_path / ALEXNET], jobs=1).ok
    got = calls(tmp_path / "wh", open_session, [("critical_path", {}),
                                                ("critical_path", {"step": 999_999})])
    doc = got[0].structuredContent
    assert not got[0].isError and doc == cli_json("critical-path", "-w", str(tmp_path / "wh"))
    assert json.loads(got[0].content[0].text) == doc
    assert doc["step"] is None and doc["total_ns"] > 0 and doc["edges"]
    assert sum(doc["by_bound"].values()) == doc["total_ns"]
    starts = [e["ts_ns"] for e in doc["edges"]]
    assert starts == sorted(starts)  # path order is time order
    assert got[1].isError and "has no step 999999" in got[1].content[0].text


@pytest.mark.slow
def test_collectives_and_critical_path_equal_the_cli(job_wh: Path, open_session: Any) -> None:
    wh = str(job_wh)
    late = f"rank={LATE_RANK}"
    got = calls(job_wh, open_session, [
        ("collectives", {"top": 0}),
        ("collectives", {"by": "rank", "runs": [late]}),
        ("critical_path", {"run": late}),
        ("critical_path", {"run": late, "by": "edge", "top": 5}),
        ("critical_path", {"run": "rank=0", "by": "step"}),
    ])  # fmt: skip
    for result in got:
        assert not result.isError, result.content
    matched = rows_of(got[0])
    assert matched == cli_json("collectives", "-w", wh, "--top", "0")
    assert len(matched) == 21 and {m["last_rank"] for m in matched} == {LATE_RANK}
    assert all(m["ranks"] == list(range(WORLD)) for m in matched)
    per_rank = rows_of(got[1])
    assert per_rank == cli_json("collectives", late, "-w", wh, "--by", "rank")
    assert {r["rank"]: r["late"] for r in per_rank}[LATE_RANK] == 21
    doc = got[2].structuredContent
    assert doc == cli_json("critical-path", late, "-w", wh)
    assert json.loads(got[2].content[0].text) == doc
    assert doc["rank"] == LATE_RANK and doc["total_ns"] > 0
    assert sum(doc["by_bound"].values()) == doc["total_ns"]  # every ns of the path has a bound
    assert sum(e["dur_ns"] for e in doc["edges"] if e["dur_ns"] > 0) >= doc["total_ns"]
    assert rows_of(got[3]) == cli_json("critical-path", late, "-w", wh, "--by", "edge", "--top", "5")
    assert rows_of(got[4]) == cli_json("critical-path", "rank=0", "-w", wh, "--by", "step")


@pytest.mark.slow
def test_critical_path_by_run_and_a_bad_option(job_wh: Path, open_session: Any) -> None:
    got = calls(job_wh, open_session, [
        ("critical_path", {"by": "nosuch"}),
        ("critical_path", {"run": "rank=1", "by": "run", "where": {"rank": "1"}}),
    ])  # fmt: skip
    assert [r.isError for r in got] == [True, False]
    assert "bound" in got[0].content[0].text  # the allowed values
    runs = rows_of(got[1])
    assert runs == cli_json("critical-path", "-w", str(job_wh), "--by", "run", "--where", "rank=1")
    assert len(runs) == 1
