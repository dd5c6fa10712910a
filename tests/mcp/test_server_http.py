"""`tracewh mcp --http`: the streamable-HTTP transport, on 127.0.0.1 by default."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import psutil
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_http_transport_on_localhost(history: Path) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "tracewh", "mcp", "-w", str(history / "wh"), "--http",
         "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}/mcp"
        deadline = time.monotonic() + 60
        while not any(c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN
                      for c in psutil.Process(server.pid).net_connections()):  # fmt: skip
            assert server.poll() is None, "the server exited"
            assert time.monotonic() < deadline, "the server did not listen"
            time.sleep(0.2)
        listening = [c.laddr.ip for c in psutil.Process(server.pid).net_connections()
                     if c.status == psutil.CONN_LISTEN]  # fmt: skip
        assert listening == ["127.0.0.1"]

        async def main() -> Any:
            async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as s:
                await s.initialize()
                names = {t.name for t in (await s.list_tools()).tools}
                return names, await s.call_tool("kernels", {"top": 2})

        names, kernels = anyio.run(main)
        assert {"kernels", "sql", "check"} <= names
        assert len(kernels.structuredContent["result"]) == 2
        # DNS rebinding: a request naming another host is refused
        r = httpx.post(url, headers={"Host": "evil.example", "Content-Type": "application/json"},
                       json={"jsonrpc": "2.0", "id": 1, "method": "ping"})  # fmt: skip
        assert r.status_code in (400, 421), r.status_code
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
