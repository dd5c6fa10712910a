"""An agent-style session with `tracewh mcp`, printed as a Markdown transcript.

Starts ``tracewh mcp -w WAREHOUSE`` as a subprocess, talks to it with the MCP SDK's stdio
client and walks the "investigate a regression" path an agent follows: ``check`` ->
``changes`` -> ``diff`` -> ``kernels`` -> ``critical_path``, each call chosen from the
previous result. Run it on
the ``make demo`` warehouse::

    make demo && .venv/bin/python examples/mcp_session.py ./warehouse

Needs the mcp extra (``pip install 'tracewh[mcp]'``).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

#: Items of a list shown in the transcript (the rest elided, their count said).
SHOWN = 3
#: Longer strings are elided in the middle (kernel names run to 300 characters).
LONGEST = 60


def _trim(value: Any) -> Any:
    """``value`` for reading: lists cut to :data:`SHOWN` items, long strings elided."""
    if isinstance(value, list):
        items = [_trim(v) for v in value[:SHOWN]]
        return items + ([f"... {len(value) - SHOWN} more"] if len(value) > SHOWN else [])
    if isinstance(value, dict):
        return {k: _trim(v) for k, v in value.items()}
    if isinstance(value, str) and len(value) > LONGEST:
        half = LONGEST // 2
        return f"{value[:half]}...{value[-half:]}"
    return value


def _text(doc: dict[str, Any]) -> str:
    """A result for reading: one key a line, one row a line (compact JSON, trimmed)."""
    lines = ["{"]
    for key, value in doc.items():
        if isinstance(value, list) and value and isinstance(value[0], dict):
            rows = [json.dumps(r) for r in _trim(value)]
            lines.append(f' "{key}": [\n  ' + ",\n  ".join(rows) + "\n ],")
        else:
            lines.append(f' "{key}": {json.dumps(_trim(value))},')
    return "\n".join(lines).rstrip(",") + "\n}"


async def _call(s: ClientSession, name: str, args: dict[str, Any]) -> Any:
    print(f"**call** `{name}` `{json.dumps(args)}`\n")
    result = await s.call_tool(name, args)
    if result.isError:
        print(f"**error**: {result.content[0].text}\n")  # type: ignore[union-attr]
        return None
    print("```json")
    print(_text(result.structuredContent or {}))
    print("```\n")
    return result.structuredContent


async def main(warehouse: str) -> None:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "tracewh", "mcp", "-w", warehouse])  # fmt: skip
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        init = await s.initialize()
        tools = (await s.list_tools()).tools
        print(f"server `{init.serverInfo.name}`: {len(tools)} tools: "
              + ", ".join(f"`{t.name}`" for t in tools) + "\n")  # fmt: skip

        print("### 1. Did the latest run regress?\n")
        check = await _call(s, "check", {})
        if not check or not check["regressions"]:
            return
        worst = max(check["regressions"], key=lambda r: r["change_ns"] or 0)
        since, rank = worst["since_run_id"], worst["rank"]
        print(f"(the largest regression: rank {rank}, {worst['metric_kind']} {worst['metric'][:40]}, "
              f"since run {since})\n")

        print(f"### 2. Since when, and what else changed with it? (rank {rank})\n")
        await _call(s, "changes", {"run": worst["run_id"], "since": "all", "top": 6})

        print("### 3. What changed between the last run before the change and the first after?\n")
        runs = await s.call_tool("runs", {"where": {"rank": str(rank)}})
        rows = runs.structuredContent["result"]  # type: ignore[index]
        ids = [r["run_id"] for r in sorted(rows, key=lambda r: r["start_ns"])]
        before = ids[ids.index(since) - 1]
        print(f"(from `runs` with where rank={rank}: the run before {since} is {before})\n")
        await _call(s, "diff", {"a": before, "b": since, "top": 5})

        print("### 4. How much of the GPU time do those kernels take now?\n")
        await _call(s, "kernels", {"run": since, "group_by": "short_name", "top": 5})

        print("### 5. What bounds that run's steps now? (the critical path)\n")
        await _call(s, "critical_path", {"run": since, "by": "step", "top": 3})


if __name__ == "__main__":
    anyio.run(main, sys.argv[1] if len(sys.argv) > 1 else "./warehouse")
