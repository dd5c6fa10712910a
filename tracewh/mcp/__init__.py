"""`tracewh mcp`: the warehouse as a Model Context Protocol server for coding agents.

A front end beside :mod:`tracewh.cli`: its tools call the same library functions as the
commands (:mod:`tracewh.results`, the :class:`~tracewh.api.Warehouse` facade) and return
what ``--format json`` prints as their structured output. Built on the official ``mcp``
Python SDK, major version 1 (``pip install 'tracewh[mcp]'``); nothing of tracewh imports
this package but the ``tracewh mcp`` command.

* :mod:`tracewh.mcp.server`: the server (stdio, or streamable HTTP on 127.0.0.1);
* :mod:`tracewh.mcp.calls`: running a call off the event loop, cancellation, errors;
* :mod:`tracewh.mcp.tools_run`, :mod:`tracewh.mcp.tools_history`,
  :mod:`tracewh.mcp.tools_sql`: the tools;
* :mod:`tracewh.mcp.guide`: resources (the definitions of the figures) and the
  "investigate a regression" prompt; ``SKILL.md``: the agent skill file.
"""

from __future__ import annotations

from tracewh.core.errors import MissingExtraError

__all__ = ["require_sdk"]


def require_sdk() -> None:
    """Raise :class:`~tracewh.core.errors.MissingExtraError` unless the ``mcp`` SDK 1.x is installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("mcp")
    except PackageNotFoundError:
        raise MissingExtraError("mcp", ["mcp"], feature="tracewh mcp") from None
    if not found.startswith("1."):
        raise MissingExtraError("mcp", [f"mcp 1.x (found {found})"], feature="tracewh mcp")
