"""The SQL tools: ``schema`` (what there is to query) and ``sql`` (a bounded read-only query).

``sql`` runs in the sandbox of ``tracewh sql`` (:mod:`tracewh.query.sqlguard`: read statements
only, no file outside the warehouse's tables, no extension, the configuration locked), under
the server's bounds: rows returned (read as a stream, no further than the limit), and the
time, memory and spill limits of ``tracewh sql`` (:mod:`tracewh.query.sqllimits`); a call
may ask for tighter limits, never looser. A refused or failed query, a time limit or
a cancellation is an error result with the reason.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Annotated, Any

from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from tracewh.api import Warehouse
from tracewh.mcp.calls import Calls, document_result, rows_result
from tracewh.mcp.params import READ_ONLY
from tracewh.query import sqldocs
from tracewh.query.db import connect_catalog
from tracewh.results import json_rows

__all__ = ["register"]


class SqlRows(BaseModel):
    """``tracewh sql --format json`` rows, at most ``max_rows`` of them."""

    result: list[dict[str, Any]] = Field(description="The rows, keyed by column name.")
    truncated: bool = Field(description="True when the query had more rows than max_rows: only the first max_rows are here.")
    max_rows: int = Field(description="The row limit this call ran under.")


class Schema(BaseModel):
    """Tables, views and table macros, described."""

    tables: list[dict[str, Any]]
    views: list[dict[str, Any]]
    macros: list[dict[str, Any]]


def register(server: FastMCP[Any], calls: Calls) -> None:
    """Add ``schema`` and ``sql`` to ``server``."""
    bounds = calls.sql
    time_s = bounds.limits.time_s or 0.0

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def schema(
        name: Annotated[str | None, Field(description="Only the tables, views and macros whose name contains this text (case-insensitive), e.g. 'gaps'. Default: all of them.")] = None,
    ) -> Annotated[CallToolResult, Schema]:
        """What the `sql` tool can query: tables (columns and types), views and per-run table macros with their grain, columns and definitions.

        Units are in the column names: *_ns nanoseconds (timestamps: since the Unix epoch),
        bytes, *_gbps GB/s. Per-run macros take a full run_id; inside SQL resolve a selector
        with run('latest') or run('model=x'): SELECT * FROM stream_gaps(run('latest')).
        Call with name=... to read one family (the whole catalog is long).
        """

        def work(_: Warehouse) -> CallToolResult:
            con = connect_catalog()  # the catalog alone, as `tracewh schema`
            try:
                return document_result(sqldocs.describe(con, name=name))
            finally:
                con.close()

        return await calls.run(work)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def sql(
        query: Annotated[str, Field(description="A DuckDB SQL query that only reads (SELECT, WITH, SHOW, DESCRIBE, SUMMARIZE, EXPLAIN) over the warehouse's tables, views and macros.")],
        max_rows: Annotated[int, Field(ge=1, description="Rows returned at most (no more than the server's limit, `tracewh mcp --max-rows`, 1000 by default); more: truncated is true. Aggregate or LIMIT in SQL rather than fetching many rows.")] = bounds.max_rows,
        time_limit_s: Annotated[float, Field(gt=0, description="Seconds before the query is stopped (no more than the server's limit, `tracewh mcp --time-limit`, 30 s by default).")] = time_s,
    ) -> Annotated[CallToolResult, SqlRows]:
        """Run a read-only, bounded DuckDB SQL query over the warehouse: for what no other tool answers.

        Refused: writes, COPY, ATTACH, EXPORT, INSTALL/LOAD, SET, and any file outside the
        warehouse. Bounded: a row limit, a time limit and a memory limit per call. Call
        `schema` first for the tables, views and macros. Per-run macros take a run_id:
        SELECT * FROM kernel_ranking(run('latest')) LIMIT 10.
        """
        rows = min(max_rows, bounds.max_rows)
        limits = dataclasses.replace(bounds.limits, time_s=min(time_limit_s, time_s))
        stop = threading.Event()

        def work(wh: Warehouse) -> CallToolResult:
            frame, truncated = wh.relation(query, limits=limits, stop=stop).head(rows)
            note = (f"only the first {rows} rows: aggregate, filter or LIMIT in SQL"
                    if truncated else None)
            return rows_result(json_rows(frame), note=note, truncated=truncated, max_rows=rows)

        return await calls.run(work, stop=stop)
