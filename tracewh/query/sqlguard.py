"""Keep a user's query read-only and inside the warehouse (``tracewh sql``).

A DuckDB connection can read and write any file its user can: ``COPY (...) TO`` a
warehouse data file silently emptied a table, and ``read_text('/etc/passwd')``
or an SSH key were one query away. A guarded query runs on a connection where

* only read statements are accepted: ``SELECT`` (with ``WITH``, ``SHOW``,
  ``DESCRIBE``, ``SUMMARIZE``, ``VALUES``, ``FROM``-first), and ``EXPLAIN`` /
  ``EXPLAIN ANALYZE`` of one (:func:`check_read_only`);
* file access is limited to the warehouse's tables (``allowed_directories``,
  then ``enable_external_access = false``), extensions are neither installed nor
  loaded, and the configuration is locked so the query cannot undo any of it
  (:func:`confine`). The views are bound to the snapshot's files before, and
  those files lie in the allowed folder.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import duckdb

from tracewh.core.errors import QueryError
from tracewh.query.sqllimits import QueryLimits, apply_limits

_READ = {duckdb.StatementType.SELECT}
_EXPLAIN = duckdb.StatementType.EXPLAIN


_SHOW_TABLES = re.compile(r"\s*SHOW\s+TABLES\s*;?\s*", re.IGNORECASE)
#: What ``SHOW TABLES`` runs: each table, view and table macro once (``sql/99_catalog.sql``).
SHOW_TABLES_QUERY = "SELECT name, kind FROM warehouse_objects ORDER BY name"


def user_query(query: str) -> str:
    """``query`` as it runs: ``SHOW TABLES`` lists :data:`SHOW_TABLES_QUERY`, the rest is kept.

    DuckDB's own ``SHOW TABLES`` lists each ``raw_<table>`` twice (the catalog's empty table
    and the session's view over the snapshot's files) and no table macro.
    """
    return SHOW_TABLES_QUERY if _SHOW_TABLES.fullmatch(query) else query


def check_read_only(con: duckdb.DuckDBPyConnection, query: str) -> None:
    """Raise :class:`QueryError` unless every statement of ``query`` only reads."""
    try:
        statements = con.extract_statements(query)
    except duckdb.Error as exc:
        raise QueryError(query, str(exc).strip().splitlines()[0]) from exc
    for st in statements:
        kind = st.type
        if kind == _EXPLAIN:
            inner = _explained(st.query)
            if inner is not None:
                check_read_only(con, inner)
                continue
        if kind not in _READ:
            name = str(kind).rsplit(".", 1)[-1]
            raise QueryError(
                query,
                f"{name} statements are not allowed: `tracewh sql` runs read-only queries "
                "(SELECT, WITH, SHOW, DESCRIBE, SUMMARIZE, EXPLAIN) over the warehouse; use "
                "--out FILE to save a result, or --unrestricted to lift this",
            )


def _explained(text: str) -> str | None:
    """The statement an ``EXPLAIN [ANALYZE]`` explains."""
    words = text.lstrip().split(None, 2)
    if not words or words[0].upper() != "EXPLAIN":
        return None
    rest = text.lstrip()[len(words[0]) :].lstrip()
    if rest[:7].upper() == "ANALYZE":
        rest = rest[7:]
    return rest or None


def confine(
    con: duckdb.DuckDBPyConnection, *, allowed: Sequence[str], temp: Path,
    limits: QueryLimits | None = None,
) -> None:
    """Limit ``con`` to reading files under the ``allowed`` folders, and lock it.

    ``temp``: a private folder for DuckDB's temporary files (DuckDB also lets queries read
    its temporary folder: its default, ``.tmp`` in the current folder, is never used by a
    confined connection). ``limits``: its memory and spill limits
    (:mod:`tracewh.query.sqllimits`), locked with the rest.
    """
    apply_limits(con, limits, temp)
    con.execute("SET autoinstall_known_extensions = false")
    con.execute("SET autoload_known_extensions = false")
    con.execute("SET allowed_directories = ?", [list(allowed)])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
