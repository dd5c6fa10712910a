"""Which warehouse tables a query reads: its names followed through the views and macros of ``sql/``.

A connection's ``raw_<table>`` views are pointed at the snapshot's files before a query runs
(:func:`tracewh.query.db.shadow_files`). Pointing all of them costs, per table, its Delta
log (read once per session), a check of every file selected (issue 33) and a view over
them: for a query over the whole history at 3,000 runs that was 27,000 files of 16 tables,
~0.7 s, for queries that read two tables (``runs``, ``run_series``). So a query's tables
are found first:

- when the catalog is prepared, the definition of every view and macro (as DuckDB stores
  it) is searched for the names of tables, views and macros; followed to the end, each
  object gets the tables it reads (``tw_reads``, :func:`write_reads`);
- a query's text is searched the same way (:meth:`ReadMap.tables_read`): every name in it,
  in string literals too (``query_table('gpu_ops')``), counts. A word that merely looks like
  a name (a column ``steps``) only adds a table that is not needed.

A search of the calls in the same definitions (a name followed by ``(``, or a view's name:
a column that shares a macro's name is no call) finds the objects that call a Python
function of :mod:`tracewh.query.udfs` (``tw_calls``): a query calling one gets the functions
registered on its connection before it runs (:meth:`ReadMap.calls_functions`), rather than
after DuckDB's binder has planned it up to the missing function (10-36 ms lost on
``roofline`` and ``module_tree``); a miss still costs only that retry
(:func:`tracewh.query.udfs.with_functions`).

The tables a query does not read are pointed at a view that raises when it is read
(:func:`unbound_sql`, marked :data:`UNBOUND`) rather than at nothing: a table missed here
stops the query loudly instead of reading as empty. The session then runs it again with
every table pointed (:meth:`tracewh.query.session.Session.fetch`), so a miss costs time,
never a result; with ``TRACEWH_STRICT_READS=1`` (the test suite) it raises instead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Mapping

import duckdb

__all__ = ["UNBOUND", "ReadMap", "is_unbound_error", "strict", "unbound_sql", "write_reads"]

#: The marker of the error a table not pointed at the snapshot raises when read.
UNBOUND = "tracewh-unbound-table"

_WORD = re.compile(r"[a-z_][a-z0-9_]*")
_CALL = re.compile(r"([a-z_][a-z0-9_]*)\s*\(")
_NULL = re.compile(r"CAST\(NULL AS ")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def unbound_sql(name: str, null_list: str) -> str:
    """A view with ``name``'s columns and types whose reading raises an :data:`UNBOUND` error.

    ``null_list`` is the table's typed ``CAST(NULL AS T) AS "c"`` list (``tw_tables``). Every
    column is an ``error()`` too, not a constant: DuckDB folds a filter on a constant NULL
    column to an empty result without reading the row (``WHERE run_id = $run``).
    """
    message = f"'{UNBOUND}: {name} (tracewh did not expect this query to read it)'"
    columns = _NULL.sub(f"CAST(error({message}) AS ", null_list)
    return f"SELECT {columns} FROM range(1) WHERE error({message})"


def is_unbound_error(exc: BaseException) -> bool:
    """Whether ``exc`` says a query read a table it was not expected to read."""
    return UNBOUND in str(exc)


def strict() -> bool:
    """Whether a query reading an unexpected table raises instead of running again
    (``TRACEWH_STRICT_READS=1``: the test suite, so every miss of this module shows)."""
    return os.environ.get("TRACEWH_STRICT_READS", "") not in ("", "0")


def _definitions(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Every view's and macro's definition text, by name (a macro's overloads joined)."""
    found: dict[str, list[str]] = {}
    for name, sql in con.execute(
        "SELECT view_name, sql FROM duckdb_views() WHERE NOT internal"
    ).fetchall():
        found.setdefault(str(name).lower(), []).append(str(sql or ""))
    for name, sql in con.execute(
        "SELECT function_name, macro_definition FROM duckdb_functions() "
        "WHERE function_type IN ('macro', 'table_macro') AND NOT internal"
    ).fetchall():
        found.setdefault(str(name).lower(), []).append(str(sql or ""))
    return {name: "\n".join(texts) for name, texts in found.items()}


def _views(con: duckdb.DuckDBPyConnection) -> frozenset[str]:
    return frozenset(str(n).lower() for (n,) in con.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall())


def _called(text: str, views: Collection[str]) -> set[str]:
    """The names ``text`` calls (a name followed by ``(``) and the views it names: a column
    that happens to share a macro's name (``... AS graph_launches``) is no call."""
    low = text.lower()
    return set(_CALL.findall(low)) | (_words(low) & set(views))


def _callers(defs: Mapping[str, str], views: Collection[str]) -> dict[str, bool]:
    """The views and macros that call a Python function of :mod:`tracewh.query.udfs`, directly
    or through others they call: name -> whether it is a view."""
    from tracewh.query.udfs import FUNCTIONS

    calls = {name: _called(text, views) for name, text in defs.items()}
    done: dict[str, bool] = {}

    def visit(name: str, path: set[str]) -> bool:
        if name not in done:
            done[name] = any(c in FUNCTIONS or (c in calls and c not in path and c != name
                                                and visit(c, path | {name}))
                             for c in calls.get(name, ()))
        return done[name]

    return {name: name in views for name in calls if visit(name, set())}


def _closure(defs: Mapping[str, str], tables: Collection[str]) -> dict[str, frozenset[str]]:
    """The tables each definition reads, following the objects it names."""
    table_of = {t: t for t in tables} | {f"raw_{t}": t for t in tables}
    names = {name: _words(text) for name, text in defs.items()}
    done: dict[str, frozenset[str]] = {}

    def visit(name: str, path: set[str]) -> frozenset[str]:
        if name in done:
            return done[name]
        found: set[str] = set()
        for word in names.get(name, ()):
            if word in table_of:
                found.add(table_of[word])
            if word in names and word != name and word not in path:
                found |= visit(word, path | {name})
        done[name] = frozenset(found)  # (names are not recursive: a macro cannot call itself)
        return done[name]

    return {name: visit(name, set()) for name in names}


def write_reads(con: duckdb.DuckDBPyConnection, tables: Collection[str]) -> None:
    """Store the tables each view and macro of ``con`` reads (``tw_reads``) and the Python
    functions of :mod:`tracewh.query.udfs` it calls (``tw_calls``), once per catalog."""
    defs = _definitions(con)
    closure = _closure(defs, tables)
    con.execute("CREATE TABLE tw_reads (object_name VARCHAR, table_name VARCHAR)")
    rows = [[name, table] for name, read in sorted(closure.items()) for table in sorted(read)]
    if rows:
        con.executemany("INSERT INTO tw_reads VALUES (?, ?)", rows)
    con.execute("CREATE TABLE tw_calls (object_name VARCHAR, is_view BOOLEAN)")
    callers: list[list[object]] = [[n, v] for n, v in sorted(_callers(defs, _views(con)).items())]
    if callers:
        con.executemany("INSERT INTO tw_calls VALUES (?, ?)", callers)


class ReadMap:
    """The tables of a catalog and what each of its views and macros reads (``tw_reads``)
    and which of them call a Python function (``tw_calls``)."""

    def __init__(self, tables: Iterable[str], reads: Mapping[str, Collection[str]],
                 callers: Mapping[str, bool] | None = None) -> None:
        from tracewh.query.udfs import FUNCTIONS

        self.tables = frozenset(tables)
        self._table_of = {t: t for t in self.tables} | {f"raw_{t}": t for t in self.tables}
        self._reads = {name: frozenset(read) for name, read in reads.items()}
        callers = dict(callers or {})
        self._callers = frozenset(FUNCTIONS) | frozenset(callers)
        self._views = frozenset(n for n, view in callers.items() if view)

    @classmethod
    def load(cls, con: duckdb.DuckDBPyConnection, tables: Iterable[str]) -> ReadMap:
        """The map stored in the catalog of ``con``."""
        reads: dict[str, set[str]] = {}
        for name, table in con.execute("SELECT object_name, table_name FROM main.tw_reads").fetchall():
            reads.setdefault(str(name), set()).add(str(table))
        callers = {str(n): bool(v) for n, v in con.execute(
            "SELECT object_name, is_view FROM main.tw_calls").fetchall()}
        return cls(tables, reads, callers)

    def calls_functions(self, *texts: str) -> bool:
        """Whether queries of ``texts`` call a Python function of :mod:`tracewh.query.udfs` or
        a macro that calls one (``name(``), or name such a view: their connection registers
        the functions first instead of after DuckDB's binder fails."""
        return any(not self._callers.isdisjoint(_called(text, self._views)) for text in texts)

    def tables_read(self, *texts: str) -> frozenset[str]:
        """The tables queries of ``texts`` read (every name in them, string literals too)."""
        found: set[str] = set()
        for text in texts:
            for word in _words(text):
                if word in self._table_of:
                    found.add(self._table_of[word])
                found |= self._reads.get(word, frozenset())
        return frozenset(found)
