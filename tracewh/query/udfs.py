"""The Python scalar functions ``sql/`` calls, registered on a connection when first needed.

``graph_align(VARCHAR[], VARCHAR[]) -> INTEGER[]`` (:func:`tracewh.query.graphalign.graph_align`)
is read by ``graph_replay_map`` (``sql/45_graphs.sql``) and the macros built on it. DuckDB
binds a function by name when a macro is defined and on every connection that calls it.
Registering a Python function makes DuckDB import numpy (~0.1 s and ~13 MB of a process),
so the prepared catalog is built with it (:func:`tracewh.query.db.apply_sql`) but a query
connection registers it only when a statement names it: :func:`with_functions` runs the
statement and, when DuckDB's binder says the function does not exist, registers it and runs
the statement again (a binder error comes before any row is read or written, so the
second run is the only one). Most connections (a per-run analysis, ``tracewh kernels``)
never call it and never import numpy.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TypeVar

import duckdb

__all__ = ["FUNCTIONS", "register_functions", "with_functions"]

#: The names of the Python scalar functions ``sql/`` calls.
FUNCTIONS = ("graph_align",)

_T = TypeVar("_T")


def register_functions(con: duckdb.DuckDBPyConnection) -> None:
    """Register every function of :data:`FUNCTIONS` on ``con`` (again if it has them)."""
    from tracewh.query.graphalign import graph_align

    with contextlib.suppress(duckdb.InvalidInputException):  # not there yet
        con.remove_function("graph_align")
    try:
        con.create_function("graph_align", graph_align, ["VARCHAR[]", "VARCHAR[]"], "INTEGER[]",
                            side_effects=False)
    except duckdb.CatalogException as exc:
        # another connection to the same database (a session's thread) registered it: a
        # connection sees it there and cannot remove what it did not register
        if "already exists" not in str(exc):
            raise


def missing_function(exc: BaseException) -> bool:
    """Whether ``exc`` is DuckDB's binder saying a function of :data:`FUNCTIONS` does not exist."""
    if not isinstance(exc, duckdb.CatalogException):
        return False
    text = str(exc)
    return any(f"with name {name} does not exist" in text for name in FUNCTIONS)


def with_functions(con: duckdb.DuckDBPyConnection, run: Callable[[], _T]) -> _T:
    """``run()`` (a statement on ``con``); if it needs a function of :data:`FUNCTIONS` that
    ``con`` lacks, the functions are registered and ``run()`` is called once more."""
    try:
        return run()
    except duckdb.CatalogException as exc:
        if not missing_function(exc):
            raise
    register_functions(con)
    return run()
