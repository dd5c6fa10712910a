"""The tracewh MCP server: the tools, resources and prompt over one warehouse, on a transport.

``tracewh mcp -w WAREHOUSE`` serves over stdio (the client starts the server as a
subprocess and talks on its stdin/stdout; logs go to stderr). ``--http`` serves the
streamable-HTTP transport at ``http://HOST:PORT/mcp`` instead, bound to 127.0.0.1 unless a
host is given (the SDK then checks Host and Origin headers against localhost: DNS
rebinding protection). The server only reads the warehouse.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from mcp.server.fastmcp import FastMCP

from tracewh.mcp import guide, tools_history, tools_run, tools_sql
from tracewh.mcp.calls import Calls, SqlBounds

__all__ = ["INSTRUCTIONS", "build_server", "serve"]

#: What the client shows the model about this server.
INSTRUCTIONS = """\
tracewh: a warehouse of PyTorch profiler (Kineto) traces, many runs over months, with exact
figures. Units are in the names: *_ns nanoseconds (timestamps since the Unix epoch), bytes,
*_fraction 0-1, pct %. Per-step figures let runs with different step counts compare.
Start with `runs` (what is there) or `check` (did the latest run regress?). A regression:
check -> changes -> diff -> kernels (prompt `investigate_regression`). One run: kernels,
steps, gaps, launches, queue, ops, modules, memory, roofline. Over time: history, changes.
Anything else: `schema`, then a read-only `sql` query (bounded in rows, time and memory).
Run selectors: 'latest', a run_id prefix, or KEY=VALUE terms joined by commas.
Definitions of every figure: resources tracewh://definitions/..., workflow: tracewh://skill.
"""


def build_server(
    root: str | Path,
    *,
    sql: SqlBounds | None = None,
    workers: int = 2,
    host: str = "127.0.0.1",
    port: int = 8000,
) -> FastMCP[Any]:
    """The MCP server of the warehouse at ``root`` (not started).

    Parameters
    ----------
    root
        The warehouse directory or object-store URL.
    sql
        The bounds of the ``sql`` tool (default: 1000 rows, 30 s, 2GB of memory).
    workers
        Tool calls running at once (each in a thread of its own).
    host, port
        Where the streamable-HTTP transport listens.
    """
    server: FastMCP[Any] = FastMCP(
        name="tracewh", instructions=INSTRUCTIONS, host=host, port=port, log_level="WARNING",
    )  # fmt: skip
    calls = Calls.create(root, sql=sql or SqlBounds(), workers=workers)
    tools_run.register(server, calls)
    tools_history.register(server, calls)
    tools_sql.register(server, calls)
    guide.register(server)
    return server


def serve(
    root: str | Path,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    sql: SqlBounds | None = None,
    workers: int = 2,
    host: str = "127.0.0.1",
    port: int = 8000,
) -> None:
    """Serve the warehouse at ``root`` until the client goes (stdio) or the process is stopped."""
    server = build_server(root, sql=sql, workers=workers, host=host, port=port)
    server.run("stdio" if transport == "stdio" else "streamable-http")
