"""`tracewh mcp` through the MCP SDK's stdio client: tools, results equal to the CLI's JSON.

Each tool must return what the command of the same name prints with ``--format json`` (the
rows under ``result``, the object of diff/check as it is), for the same run and options.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app

runner = CliRunner()

TOOLS = {
    "runs", "kernels", "gaps", "launches", "queue", "steps", "ops", "modules", "memory",
    "roofline", "diff", "history", "changes", "check", "ranks", "collectives", "critical_path",
    "schema", "sql",
}


def cli_json(*args: str) -> Any:
    """What ``tracewh ARGS --format json`` prints, parsed."""
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code in (0, 1), result.output  # check exits 1 on a regression
    return json.loads(result.stdout)


def calls(wh: Path, open_session: Callable[..., Any], todo: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Call the tools in one server session; each result."""

    async def main() -> list[Any]:
        async with open_session(wh) as s:
            return [await s.call_tool(name, args) for name, args in todo]

    return anyio.run(main)


def rows_of(result: Any) -> list[dict[str, Any]]:
    assert not result.isError, result.content
    rows = result.structuredContent["result"]
    assert json.loads(result.content[0].text) == rows  # the text block is the same JSON
    return rows  # type: ignore[no-any-return]


def test_list_tools_has_every_tool_with_schemas(history: Path, open_session: Any) -> None:
    async def main() -> Any:
        async with open_session(history / "wh") as s:
            return (await s.list_tools()).tools

    tools = {t.name: t for t in anyio.run(main)}
    assert set(tools) >= TOOLS
    for tool in tools.values():
        assert tool.description and len(tool.description) > 40, tool.name
        assert tool.inputSchema["type"] == "object"
        assert tool.outputSchema is not None, tool.name
        assert tool.annotations is not None and tool.annotations.readOnlyHint
    kernels = tools["kernels"].inputSchema["properties"]
    assert kernels["by"]["enum"] == ["total", "mean", "max", "calls"]
    assert kernels["top"]["default"] == 20 and "Run selector" in kernels["run"]["description"]


def test_kernels_tool_equals_the_cli_top_5(history: Path, open_session: Any) -> None:
    wh = str(history / "wh")
    first = Warehouse(wh).runs()["run_id"][-1]  # the first night: not what `latest` picks
    got = calls(history / "wh", open_session, [("kernels", {"run": first, "top": 5}),
                                               ("kernels", {"top": 5})])
    expected = cli_json("kernels", "-w", wh, "--run", first, "--top", "5")
    assert rows_of(got[0]) == expected and len(expected) == 5
    assert rows_of(got[1]) == cli_json("kernels", "-w", wh, "--top", "5")
    assert rows_of(got[1]) != expected  # another run (flash_fwd is 30% slower there)
    assert "note: showing 5 of" in got[0].content[1].text


@pytest.mark.slow
def test_tools_equal_the_cli_json(history: Path, open_session: Any) -> None:
    wh = str(history / "wh")
    runs = Warehouse(wh).runs()
    first, last = runs["run_id"][-1], runs["run_id"][0]  # latest ingest first
    todo: list[tuple[str, dict[str, Any]]] = [
        ("kernels", {"run": first, "top": 5}),
        ("kernels", {"group_by": "category", "by": "calls"}),
        ("gaps", {"run": first}),
        ("gaps", {"breakdown": True, "threshold_us": 10}),
        ("steps", {}),
        ("launches", {"by": "step"}),
        ("queue", {}),
        ("ops", {"top": 3}),
        ("memory", {}),
        ("roofline", {"top": 3}),
        ("runs", {"where": {"model": "demo"}}),
        ("history", {"kernel": "flash_fwd"}),
        ("changes", {"since": "all"}),
        ("ranks", {}),
        ("collectives", {"by": "rank"}),
        ("diff", {"a": first, "b": last, "top": 5}),
        ("check", {}),
    ]
    cli = [
        cli_json("kernels", "-w", wh, "--run", first, "--top", "5"),
        cli_json("kernels", "-w", wh, "--group-by", "category", "--by", "calls"),
        cli_json("gaps", "-w", wh, "--run", first),
        cli_json("gaps", "-w", wh, "--breakdown", "--threshold-us", "10"),
        cli_json("steps", "-w", wh),
        cli_json("launches", "-w", wh, "--by", "step"),
        cli_json("queue", "-w", wh),
        cli_json("ops", "-w", wh, "--top", "3"),
        cli_json("memory", "-w", wh),
        cli_json("roofline", "-w", wh, "--top", "3"),
        cli_json("runs", "-w", wh, "--where", "model=demo"),
        cli_json("history", "-w", wh, "--kernel", "flash_fwd"),
        cli_json("changes", "-w", wh, "--since", "all"),
        cli_json("ranks", "-w", wh),
        cli_json("collectives", "-w", wh, "--by", "rank"),
        cli_json("diff", first, last, "-w", wh, "--top", "5"),
        cli_json("check", "-w", wh),
    ]
    got = calls(history / "wh", open_session, todo)
    for (name, args), result, expected in zip(todo, got, cli, strict=True):
        assert not result.isError, (name, result.content)
        if name in ("diff", "check"):
            assert result.structuredContent == expected, name
            assert json.loads(result.content[0].text) == expected
        else:
            assert rows_of(result) == expected, (name, args)
    # the data behind the comparison is real: 5 kernels, the regression found
    assert len(got[0].structuredContent["result"]) == 5
    assert got[-1].structuredContent["status"] == "regression"
    flash = [r for r in got[-1].structuredContent["regressions"] if "flash" in str(r["metric"])]
    assert flash and flash[0]["since_day"] == REG_DAY


REG_DAY = "2025-01-05"


def test_errors_are_tool_errors_and_the_server_goes_on(history: Path, open_session: Any) -> None:
    got = calls(history / "wh", open_session, [
        ("kernels", {"run": "nosuch=1"}),
        ("kernels", {"by": "fastest"}),
        ("diff", {"a": "latest"}),
        ("history", {"kernel": "x", "op": "y"}),
        ("kernels", {"top": 1}),
    ])  # fmt: skip
    assert [r.isError for r in got] == [True, True, True, True, False]
    assert "matches no run" in got[0].content[0].text
    assert "total" in got[1].content[0].text  # the allowed values
    assert "give one of --kernel, --category, --op or --critical-path" in got[3].content[0].text


def test_resources_and_the_regression_prompt(history: Path, open_session: Any) -> None:
    async def main() -> tuple[Any, ...]:
        async with open_session(history / "wh") as s:
            listed = (await s.list_resources()).resources
            skill = await s.read_resource("tracewh://skill")  # type: ignore[arg-type]
            gaps = await s.read_resource("tracewh://definitions/sql/20_gaps")  # type: ignore[arg-type]
            prompts = (await s.list_prompts()).prompts
            prompt = await s.get_prompt("investigate_regression", {"run": "model=demo"})
            return listed, skill, gaps, prompts, prompt

    listed, skill, gaps, prompts, prompt = anyio.run(main)
    uris = {str(r.uri) for r in listed}
    assert "tracewh://skill" in uris and "tracewh://definitions/sql/10_kernels" in uris
    assert "check" in skill.contents[0].text and "per step" in skill.contents[0].text
    assert "kernel_wait_threshold_ns" in gaps.contents[0].text  # the header, in words
    assert [p.name for p in prompts] == ["investigate_regression"]
    text = prompt.messages[0].content.text
    order = [text.index(f"`{tool}`") for tool in ("check", "changes", "diff", "kernels")]
    assert order == sorted(order) and "'model=demo'" in text


def test_schema_describes_tables_views_macros(history: Path, open_session: Any) -> None:
    got = calls(history / "wh", open_session, [("schema", {}), ("schema", {"name": "gaps"})])
    full, gaps = (r.structuredContent for r in got)
    assert full == cli_json("schema") and gaps == cli_json("schema", "gaps")  # `tracewh schema`
    tables = {t["name"]: t for t in full["tables"]}
    assert {c["name"] for c in tables["gpu_ops"]["columns"]} >= {"run_id", "ts_ns", "dur_ns"}
    macros = {m["name"]: m for m in full["macros"]}
    assert macros["stream_gaps"]["parameters"][0] == "run"
    assert "grain: one row per (device, stream)" in macros["stream_gaps"]["description"]
    assert {m["name"] for m in gaps["macros"]} >= {"stream_gaps", "largest_gaps"}
    assert [v["name"] for v in gaps["views"]] == ["gpu_op_gaps"]
    assert all("gaps" in m["name"] for m in gaps["macros"]) and not gaps["tables"]


def test_shared_trace_kernels_equal_the_cli(shared_traces: Path, tmp_path: Path, open_session: Any) -> None:
    trace = shared_traces / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
    if not trace.is_file():
        pytest.skip(f"{trace.name} is not among the shared traces")
    shutil.copy(trace, tmp_path / trace.name)  # a copy in the test's folder, deleted with it
    assert Warehouse(tmp_path / "wh").ingest([tmp_path / trace.name], jobs=1).ok
    wh = str(tmp_path / "wh")
    got = calls(tmp_path / "wh", open_session, [("kernels", {"top": 5}), ("steps", {})])
    assert rows_of(got[0]) == cli_json("kernels", "-w", wh, "--top", "5")
    assert len(rows_of(got[0])) == 5
    assert rows_of(got[1]) == cli_json("steps", "-w", wh)


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch, history: Path) -> None:
    import importlib.metadata

    real = importlib.metadata.version

    def version(name: str) -> str:
        if name == "mcp":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    result = runner.invoke(app, ["mcp", "-w", str(history / "wh")])
    assert result.exit_code == 2
    assert "pip install 'tracewh[mcp]'" in result.output
