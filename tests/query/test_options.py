"""The options of the per-run analyses are declared once (tracewh.query.options): the CLI, the
MCP tools, the API, the macro calls and the analyses all default to the dataclass's values and
offer the choices declared there; the SQL macros and the Polars twins use the same threshold."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
import typer.main

from tracewh.analysis import collectives as collectives_analysis
from tracewh.analysis import memory as memory_analysis
from tracewh.analysis import roofline as roofline_analysis
from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.core.errors import UsageError
from tracewh.query import macros
from tracewh.query.options import (
    COLLECTIVE_VIEWS,
    KERNEL_GROUPS,
    KERNEL_ORDERS,
    KERNEL_WAIT_THRESHOLD_NS,
    KERNEL_WAIT_THRESHOLD_US,
    LAUNCH_VIEWS,
    RANK_VIEWS,
    AnnotationsOptions,
    CollectivesOptions,
    GapsOptions,
    KernelsOptions,
    LaunchesOptions,
    MemoryOptions,
    ModulesOptions,
    OpsOptions,
    RanksOptions,
    RooflineOptions,
    StepsOptions,
    threshold_ns,
)

REPO = Path(__file__).resolve().parents[2]

#: options class -> the CLI command and the MCP tool that offer it
FRONT_ENDS: list[tuple[type, str, str]] = [
    (KernelsOptions, "kernels", "kernels"),
    (GapsOptions, "gaps", "gaps"),
    (LaunchesOptions, "launches", "launches"),
    (StepsOptions, "steps", "steps"),
    (OpsOptions, "ops", "ops"),
    (ModulesOptions, "modules", "modules"),
    (AnnotationsOptions, "annotations", None),  # type: ignore[list-item]  # no MCP tool
    (RanksOptions, "ranks", "ranks"),
    (MemoryOptions, "memory", "memory"),
    (RooflineOptions, "roofline", "roofline"),
    (CollectivesOptions, "collectives", "collectives"),
]

#: field -> the front ends' parameter, where the names differ (threshold_ns: given in µs)
RENAMED = {"cats": "cat", "threshold_ns": "threshold_us"}
#: fields a front end offers differently: GapsOptions.largest is the API's count of
#: largest_gaps; the CLI's --largest N (and the tool's largest) chooses that view, None: not it
OTHER = {"largest"}


def _fields(options: type) -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(options)}


def _defaults(fn: Any) -> dict[str, Any]:
    return {n: p.default for n, p in inspect.signature(fn).parameters.items()
            if p.default is not inspect.Parameter.empty}


def _cli(name: str) -> dict[str, Any]:
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    return {p.name: p for p in command.params}


def _front_value(name: str, value: Any) -> Any:
    """A dataclass default as the CLI and the tools take it."""
    if name == "threshold_ns":
        return value / 1000
    if name == "cats":
        return None if value is None else ",".join(value)
    return value


@pytest.mark.parametrize(("options", "command"), [(o, c) for o, c, _ in FRONT_ENDS])
def test_every_cli_default_is_the_dataclass_default(options: type, command: str) -> None:
    params = _cli(command)
    checked = 0
    for name, default in _fields(options).items():
        if name in OTHER:
            continue
        param = params[RENAMED.get(name, name)]
        assert param.default == _front_value(name, default), (command, name, param.default)
        checked += 1
    assert checked == len(_fields(options)) - len(OTHER & set(_fields(options)))


def _mcp_tools() -> dict[str, dict[str, Any]]:
    pytest.importorskip("mcp.server.fastmcp", reason="the mcp extra is not installed")
    from tracewh.mcp.server import build_server

    tools = asyncio.run(build_server(REPO / "no-warehouse").list_tools())
    return {t.name: t.inputSchema["properties"] for t in tools}


@pytest.mark.parametrize(("options", "tool"), [(o, t) for o, _, t in FRONT_ENDS if t])
def test_every_mcp_default_is_the_dataclass_default(options: type, tool: str) -> None:
    props = _mcp_tools()[tool]
    for name, default in _fields(options).items():
        if name in OTHER:
            continue
        prop = props[RENAMED.get(name, name)]
        want = _front_value(name, default)
        if name == "top":
            want = default or 0  # the tools' top: 0 is all
        elif name == "cats":
            want = None if default is None else list(default)
        assert prop.get("default") == want, (tool, name, prop.get("default"), want)


def test_every_api_and_macro_default_is_the_dataclass_default() -> None:
    """The facade, the macro calls and the analyses behind it (``top`` of the API: all rows)."""
    cases: list[tuple[Any, type, set[str]]] = [
        (Warehouse.kernels, KernelsOptions, {"cats", "group_by", "by"}),
        (macros.kernels, KernelsOptions, {"cats", "group_by", "by"}),
        (Warehouse.gaps, GapsOptions, {"threshold_ns"}),
        (macros.gaps, GapsOptions, {"threshold_ns"}),
        (Warehouse.idle_breakdown, GapsOptions, {"threshold_ns"}),
        (macros.idle_breakdown, GapsOptions, {"threshold_ns"}),
        (Warehouse.launches, LaunchesOptions, {"by"}),
        (macros.launches, LaunchesOptions, {"by"}),
        (Warehouse.steps, StepsOptions, {"threshold_ns"}),
        (macros.steps, StepsOptions, {"threshold_ns"}),
        (Warehouse.ops, OpsOptions, {"cpu"}),
        (macros.ops, OpsOptions, {"cpu"}),
        (Warehouse.modules, ModulesOptions, {"depth"}),
        (macros.modules, ModulesOptions, {"depth"}),
        (Warehouse.annotations, AnnotationsOptions, {"gpu", "depth"}),
        (macros.annotation_tree, AnnotationsOptions, {"gpu", "depth"}),
        (Warehouse.ranks, RanksOptions, {"view"}),
        (Warehouse.memory, MemoryOptions, {"view", "device", "top", "buckets"}),
        (memory_analysis.memory, MemoryOptions, {"view", "device", "top", "buckets"}),
        (Warehouse.roofline, RooflineOptions, {"op", "peak_tflops", "peak_tbs"}),
        (roofline_analysis.roofline, RooflineOptions, {"op", "peak_tflops", "peak_tbs"}),
        (Warehouse.collectives, CollectivesOptions, {"by", "link", "link_peak_gbps"}),
        (collectives_analysis.collectives, CollectivesOptions, {"by", "link", "link_peak_gbps"}),
    ]
    for fn, options, names in cases:
        got, want = _defaults(fn), _fields(options)
        for name in names:
            assert got[name] == want[name], (fn.__qualname__, name, got[name], want[name])
        if "top" in got and "top" not in names:
            assert got["top"] is None, fn.__qualname__  # the API returns every row unless asked
    for fn in (Warehouse.largest_gaps, macros.largest_gaps):
        got = _defaults(fn)
        assert (got["n"], got["threshold_ns"]) == (GapsOptions.largest, GapsOptions.threshold_ns)


def test_the_choices_are_declared_once() -> None:
    """What an option may be: the CLI's metavar, the tool's enum and the check agree."""
    tools = _mcp_tools()
    choices = [
        ("kernels", "group_by", KERNEL_GROUPS), ("kernels", "by", KERNEL_ORDERS),
        ("launches", "by", LAUNCH_VIEWS), ("ranks", "view", RANK_VIEWS),
        ("memory", "view", tuple(memory_analysis.VIEWS)),
        ("collectives", "by", COLLECTIVE_VIEWS),
    ]
    for command, name, allowed in choices:
        assert _cli(command)[name].metavar == "|".join(allowed), (command, name)
        assert tuple(tools[command][name]["enum"]) == allowed, (command, name)
    assert tuple(macros._LAUNCHES) == LAUNCH_VIEWS
    assert collectives_analysis.BY == COLLECTIVE_VIEWS
    for bad in ({"group_by": "nope"}, {"by": "nope"}):
        with pytest.raises(UsageError):
            macros.kernels(**bad)
    with pytest.raises(UsageError):
        macros.launches(by="nope")


def test_one_kernel_wait_threshold() -> None:
    """The SQL macros' default, the Polars twins', the reports' and the µs the front ends take."""
    import tracewh.analysis.gaps as polars_gaps
    from tracewh.report.build import build_report
    from tracewh.report.site import build_site
    from tracewh.report.source import collect_run

    sql = "".join((REPO / "sql" / name).read_text(encoding="utf-8")
                  for name in ("20_gaps.sql", "40_steps.sql"))
    found = {int(v) for v in re.findall(r"kernel_wait_threshold_ns := (\d+)", sql)}
    assert found == {KERNEL_WAIT_THRESHOLD_NS}
    assert polars_gaps.KERNEL_WAIT_THRESHOLD_NS == KERNEL_WAIT_THRESHOLD_NS
    for fn in (build_report, build_site, collect_run):
        assert _defaults(fn)["threshold_ns"] == KERNEL_WAIT_THRESHOLD_NS, fn.__qualname__
    assert threshold_ns(KERNEL_WAIT_THRESHOLD_US) == KERNEL_WAIT_THRESHOLD_NS
    assert threshold_ns(0.5) == 500 and threshold_ns(0) == 0
    with pytest.raises(UsageError, match="--threshold-us must be >= 0"):
        threshold_ns(-1)
