"""`tracewh mcp`: serve the warehouse to coding agents over the Model Context Protocol."""

from __future__ import annotations

import typer

from tracewh.cli.common import app, handle_errors, warehouse_option
from tracewh.core.errors import UsageError


@app.command()
def mcp(
    warehouse: str = warehouse_option(),
    http: bool = typer.Option(False, "--http", help="Serve the streamable-HTTP transport at http://HOST:PORT/mcp instead of stdio."),
    host: str = typer.Option("127.0.0.1", "--host", metavar="HOST", help="Address --http listens on (default: this machine only; there is no authentication)."),
    port: int = typer.Option(8000, "--port", metavar="PORT", help="Port --http listens on."),
    max_rows: int = typer.Option(1000, "--max-rows", metavar="N", help="Rows the sql tool returns at most (more: the result says truncated)."),
    time_limit: float = typer.Option(30.0, "--time-limit", metavar="SECONDS", help="Seconds before the sql tool stops a query."),
    memory_limit: str = typer.Option("2GB", "--memory-limit", metavar="SIZE", help="DuckDB memory limit of a sql tool query, e.g. 2GB."),
    spill_limit: str = typer.Option("4GB", "--spill-limit", metavar="SIZE", help="Most a sql tool query may spill to its private temporary folder (removed afterwards)."),
    workers: int = typer.Option(2, "--workers", metavar="N", help="Tool calls running at once."),
) -> None:
    """Serve the warehouse to coding agents as an MCP server (stdio): read-only tools, definitions, a prompt.

    Tools for runs, kernels, gaps, steps, ops, memory, roofline, diff, history, changes,
    check, ranks, collectives, schema and a bounded sql, returning what --format json
    prints. Needs the mcp extra (pip install 'tracewh[mcp]'). Register it with a client as
    the command `tracewh mcp -w /path/to/warehouse` (see the MCP how-to in the docs).

    Example: tracewh mcp -w ./warehouse
    """
    with handle_errors():
        from tracewh.mcp import require_sdk

        require_sdk()
        if not 0 < port < 65536:
            raise UsageError("--port must be between 1 and 65535")
        if workers < 1:
            raise UsageError("--workers must be at least 1")
        if max_rows < 1:
            raise UsageError("--max-rows must be at least 1")
        if not time_limit > 0:
            raise UsageError("--time-limit must be more than 0 seconds")
        from tracewh.api import Warehouse
        from tracewh.mcp.calls import SqlBounds
        from tracewh.mcp.server import serve
        from tracewh.query.sqllimits import QueryLimits

        bounds = SqlBounds(max_rows, QueryLimits(time_s=time_limit, memory=memory_limit,
                                                 spill=spill_limit))  # fmt: skip
        Warehouse(warehouse).resolve_run("latest")  # an empty or missing warehouse: say so now
        serve(warehouse, transport="http" if http else "stdio", sql=bounds, workers=workers,
              host=host, port=port)
