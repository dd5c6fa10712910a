"""How a tool call runs: off the event loop, one warehouse per call, errors as tool errors.

The library's calls block (DuckDB, Polars): each runs in a worker thread (at most
``workers`` at once) so that the server keeps reading requests, answering pings and
cancellations meanwhile. Each call opens its own :class:`~tracewh.api.Warehouse` over the
snapshot of that moment (a warehouse object holds per-session state that two threads must
not share). A cancelled request (``notifications/cancelled``, or the client gone) sets the
call's stop event, which interrupts the DuckDB query of a ``sql`` call within ~50 ms
(:func:`tracewh.query.sqllimits.run_limited`); another analysis runs to its end in its
thread and its result is dropped.

A :class:`~tracewh.core.errors.TracewhError` (an unknown run, a bad option, a refused or failed
query, a time limit) becomes an MCP error result with the library's message, as the CLI
prints it on one line; the server never stops for a failed call.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.fastmcp.exceptions import ToolError
from mcp.types import CallToolResult, TextContent

from tracewh.api import Warehouse
from tracewh.core.errors import TracewhError
from tracewh.query.sqllimits import DEFAULT_SPILL, QueryLimits

__all__ = ["Calls", "SqlBounds", "document_result", "rows_result"]

_T = TypeVar("_T")

#: Seconds a cancelled call waits for its stopped query's thread to finish.
STOP_WAIT_S = 10.0


@dataclass(frozen=True)
class SqlBounds:
    """The bounds of one ``sql`` tool call.

    Attributes
    ----------
    max_rows
        Rows returned at most (more: the result says ``truncated``).
    limits
        Time, DuckDB memory and spill space (:class:`~tracewh.query.sqllimits.QueryLimits`:
        the limits of ``tracewh sql``, with a shorter time by default).
    """

    max_rows: int = 1000
    limits: QueryLimits = field(
        default_factory=lambda: QueryLimits(time_s=30.0, memory="2GB", spill=DEFAULT_SPILL)
    )


@dataclass(frozen=True)
class Calls:
    """What every tool call of one server shares: the warehouse, the SQL limits, the workers.

    Attributes
    ----------
    root
        The warehouse directory or object-store URL.
    sql
        The bounds of the ``sql`` tool (a call may lower them, never raise them).
    limiter
        Worker threads running calls at once.
    """

    root: str | Path
    sql: SqlBounds
    limiter: anyio.CapacityLimiter

    @classmethod
    def create(cls, root: str | Path, *, sql: SqlBounds, workers: int = 2) -> Calls:
        """The shared state of a server's calls (``workers`` threads at most)."""
        return cls(root, sql, anyio.CapacityLimiter(workers))

    async def run(
        self, work: Callable[[Warehouse], _T], *, stop: threading.Event | None = None
    ) -> _T:
        """``work(warehouse)`` in a worker thread; a library error as a :class:`ToolError`.

        Cancelled (the request, or the session), the call sets ``stop`` (which a query
        given it watches: it ends within ~50 ms) and waits up to :data:`STOP_WAIT_S` for the
        thread to clean up after it (its private spill folder; the server may be exiting);
        another call's thread is left to finish on its own.
        """
        finished = threading.Event()

        def call() -> _T:
            try:
                return work(Warehouse(self.root))
            finally:
                finished.set()

        try:
            return await anyio.to_thread.run_sync(call, limiter=self.limiter, abandon_on_cancel=True)
        except anyio.get_cancelled_exc_class():
            if stop is not None:
                stop.set()
                with anyio.move_on_after(STOP_WAIT_S, shield=True):
                    while not finished.is_set():
                        await anyio.sleep(0.02)
            raise
        except TracewhError as exc:
            raise ToolError(str(exc)) from exc


def rows_result(
    rows: list[dict[str, Any]], *, total: int | None = None, note: str | None = None, **extra: Any
) -> CallToolResult:
    """A tool result of rows: structured ``{"result": rows, **extra}``, the rows' JSON as text.

    ``total``: the rows there were before ``top`` cut them (a note says so); ``note``: more
    for the model, as a second text block.
    """
    content = [TextContent(type="text", text=json.dumps(rows))]
    notes = [note] if note else []
    if total is not None and total > len(rows):
        notes.insert(0, f"showing {len(rows)} of {total} rows (top=0: all)")
    if notes:
        content.append(TextContent(type="text", text="note: " + "; ".join(notes)))
    return CallToolResult(content=list(content), structuredContent={"result": rows, **extra})


def document_result(doc: dict[str, Any], *, note: str | None = None) -> CallToolResult:
    """A tool result of a JSON document: structured ``doc``, its JSON as text (and ``note``,
    more for the model, as a second text block)."""
    content = [TextContent(type="text", text=json.dumps(doc))]
    if note:
        content.append(TextContent(type="text", text="note: " + note))
    return CallToolResult(content=list(content), structuredContent=doc)
