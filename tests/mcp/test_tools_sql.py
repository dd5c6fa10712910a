"""The MCP `sql` tool: the sandbox of `tracewh sql`, and its row, time and memory limits.

Through the SDK's stdio client, as an agent calls it: a read returns the right rows; writes,
ATTACH, files outside the warehouse are error results that leave nothing behind; a huge
cross join stops at the time limit; a cancelled request frees the worker at once; a killed
client leaves no server process behind.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp.types import CancelledNotification, CancelledNotificationParams, ClientNotification

from tracewh.core.categories import GPU_OP_CATEGORIES

# six copies: ~1.4e15 rows, which no machine counts before a time limit (four copies, 1.3e10
# rows, were counted in under 2 s by DuckDB's vectorised cross product on a quiet machine)
CROSS_JOIN = ("SELECT count(*) AS n FROM gpu_ops a, gpu_ops b, gpu_ops c, gpu_ops d, gpu_ops e,"
              " gpu_ops f")


def gpu_ops_in_traces(folder: Path) -> int:
    """GPU ops with a duration in the trace files themselves (not through the warehouse)."""
    n = 0
    for path in sorted(folder.rglob("*.pt.trace.json.gz")):
        with gzip.open(path, "rt") as f:
            events = json.load(f)["traceEvents"]
        n += sum(1 for e in events if e.get("ph") == "X" and e.get("cat") in GPU_OP_CATEGORIES)
    return n


def run_calls(wh: Path, open_session: Any, todo: list[tuple[str, dict[str, Any]]], *extra: str) -> list[Any]:
    async def main() -> list[Any]:
        async with open_session(wh, *extra) as s:
            return [await s.call_tool(name, args) for name, args in todo]

    return anyio.run(main)


def test_sql_reads_and_limits_rows(history: Path, open_session: Any) -> None:
    got = run_calls(history / "wh", open_session, [
        ("sql", {"query": "SELECT count(*) AS n FROM gpu_ops"}),
        ("sql", {"query": "SELECT range AS i FROM range(5000)"}),
        ("sql", {"query": "SELECT range AS i FROM range(5000)", "max_rows": 7}),
        ("sql", {"query": "SELECT count(*) AS n FROM stream_gaps(run('latest'))"}),
    ])  # fmt: skip
    assert not any(r.isError for r in got), [r.content for r in got if r.isError]
    count, many, few, per_run = (r.structuredContent for r in got)
    assert count == {"result": [{"n": gpu_ops_in_traces(history / "traces")}], "truncated": False,
                     "max_rows": 1000}  # fmt: skip
    assert many["truncated"] and many["result"] == [{"i": i} for i in range(1000)]
    assert few["truncated"] and len(few["result"]) == 7 and few["max_rows"] == 7
    assert per_run["result"][0]["n"] >= 1
    assert "note: only the first 1000 rows" in got[1].content[1].text


def test_sql_sandbox_escapes_are_errors_and_touch_nothing(history: Path, tmp_path: Path, open_session: Any) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2-outside-the-warehouse\n")
    written, attached = tmp_path / "out.csv", tmp_path / "other.duckdb"
    got = run_calls(history / "wh", open_session, [
        ("sql", {"query": f"COPY (SELECT * FROM runs) TO '{written}'"}),
        ("sql", {"query": f"COPY runs TO '{written}' (FORMAT parquet)"}),
        ("sql", {"query": f"ATTACH '{attached}' AS other"}),
        ("sql", {"query": f"SELECT * FROM read_text('{secret}')"}),
        ("sql", {"query": f"SELECT * FROM read_csv('{secret}', header = false)"}),
        ("sql", {"query": "INSTALL httpfs"}),
        ("sql", {"query": "SET enable_external_access = true"}),
        ("sql", {"query": "SELECT count(*) AS n FROM runs"}),  # the server still answers
    ])  # fmt: skip
    assert [r.isError for r in got] == [True] * 7 + [False]
    for r in got[:7]:
        text = r.content[0].text
        assert "query failed" in text and "hunter2" not in text, text
    assert "COPY statements are not allowed" in got[0].content[0].text
    assert "ATTACH statements are not allowed" in got[2].content[0].text
    assert "Permission Error" in got[3].content[0].text
    assert not written.exists() and not attached.exists()
    assert got[7].structuredContent["result"] == [{"n": 6}]


def test_huge_cross_join_stops_at_the_time_limit(history: Path, open_session: Any) -> None:
    async def main() -> tuple[Any, float, Any]:
        async with open_session(history / "wh", "--time-limit", "2") as s:
            start = time.monotonic()
            result = await s.call_tool("sql", {"query": CROSS_JOIN})
            took = time.monotonic() - start
            after = await s.call_tool("sql", {"query": "SELECT 1 AS one"})
            return result, took, after

    result, took, after = anyio.run(main)
    assert result.isError
    assert "stopped at the time limit (2 s)" in result.content[0].text
    assert took < 60  # interrupted at 2 s; the bound only proves it did not run to its end
    assert after.structuredContent["result"] == [{"one": 1}]


def test_a_call_cannot_raise_the_time_limit(history: Path, open_session: Any) -> None:
    got = run_calls(history / "wh", open_session,
                    [("sql", {"query": CROSS_JOIN, "time_limit_s": 3600})], "--time-limit", "1")
    assert got[0].isError and "stopped at the time limit (1 s)" in got[0].content[0].text


def test_cancelled_request_frees_the_worker(history: Path, open_session: Any) -> None:
    """One worker, a 10-minute limit: the next call is answered only if the cancel interrupted."""

    async def main() -> Any:
        async with open_session(history / "wh", "--workers", "1", "--time-limit", "600") as s:
            request_id = s._request_id  # the id the next request gets (the SDK counts from 0)
            outcome: list[Any] = []

            async def long_call() -> None:
                try:
                    outcome.append(await s.call_tool("sql", {"query": CROSS_JOIN}))
                except Exception as exc:  # the server answers a cancelled request with an error
                    outcome.append(exc)

            async with anyio.create_task_group() as tg:
                tg.start_soon(long_call)
                await anyio.sleep(2)
                await s.send_notification(ClientNotification(CancelledNotification(
                    params=CancelledNotificationParams(requestId=request_id, reason="test"),
                )))  # fmt: skip
            with anyio.fail_after(120):
                after = await s.call_tool("sql", {"query": "SELECT 2 AS two"})
            return outcome, after

    outcome, after = anyio.run(main)
    assert "cancelled" in str(outcome[0]).lower(), outcome
    assert after.structuredContent["result"] == [{"two": 2}]


CLIENT = """
import os, sys, anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def main():
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "tracewh", "mcp", "-w", sys.argv[1], "--time-limit", "600"],
                                   env=dict(os.environ))  # TMPDIR too (the SDK passes a few only)
    async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        print("ready", flush=True)
        await s.call_tool("sql", {"query": sys.argv[2]})

anyio.run(main)
"""


def test_killed_client_leaves_no_server(history: Path, tmp_path: Path) -> None:
    """Nothing left: no server process, no private spill folder of the interrupted query."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    client = subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(history / "wh"), CROSS_JOIN],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "TMPDIR": str(temp)},  # the server's temporary folders go there
    )  # fmt: skip
    servers: list[psutil.Process] = []
    try:
        assert client.stdout is not None
        assert client.stdout.readline().strip() == "ready"
        servers = psutil.Process(client.pid).children(recursive=True)
        assert servers, "the client started no server"
        deadline = time.monotonic() + 120  # the cross join starts in the server: its spill folder
        while not [p for p in temp.iterdir() if p.name.startswith("tracewh-sql-")]:
            assert time.monotonic() < deadline, "the query did not start"
            time.sleep(0.1)
        time.sleep(1)  # the cross join is running in the server
        assert all(p.is_running() for p in servers)
        os.kill(client.pid, signal.SIGKILL)
        client.wait(timeout=30)
        _, alive = psutil.wait_procs(servers, timeout=60)
        assert not alive, [p.cmdline() for p in alive]
        assert not [p.name for p in temp.iterdir() if p.name.startswith("tracewh-sql-")]
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
        if client.stdout is not None:
            client.stdout.close()
        for p in servers:
            if p.is_running():
                p.kill()


@pytest.mark.parametrize("limit", ["64MB"])
def test_memory_limit_fails_the_query_not_the_server(history: Path, open_session: Any, limit: str) -> None:
    big = "SELECT list(range) AS l FROM range(50000000) GROUP BY range % 3"
    got = run_calls(history / "wh", open_session,
                    [("sql", {"query": big}), ("sql", {"query": "SELECT 3 AS three"})],
                    "--memory-limit", limit, "--spill-limit", "1MB")  # fmt: skip
    assert got[0].isError and f"more than the memory limit ({limit})" in got[0].content[0].text
    assert got[1].structuredContent["result"] == [{"three": 3}]
