"""Fetching a query's result from a DuckDB connection: Polars, Arrow or plain rows.

DuckDB's errors become :class:`~tracewh.core.errors.QueryError` (one line, the query named).
Plain :class:`Rows` need no Polars (a printing command's start stays that of Python and
DuckDB); frames come through the Arrow C stream interface (no pyarrow).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import duckdb

from tracewh.core.errors import QueryError
from tracewh.query.udfs import with_functions

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

__all__ = [
    "Kind", "Rows", "fetch_as", "fetch_frame", "fetch_head", "fetch_rows", "first_line", "query_frame",
    "to_frame",
]

#: What a fetch returns: a Polars frame, an Arrow table, or plain :class:`Rows` (no Polars).
Kind = Literal["polars", "arrow", "rows"]


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type's name when it has none)."""
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


@dataclass(frozen=True)
class Rows:
    """A query result as plain Python values: column names, DuckDB type names, rows."""

    columns: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]


def fetch_rows(
    con: duckdb.DuckDBPyConnection,
    query: str,
    params: Sequence[Any] | Mapping[str, Any] | None = None,
) -> Rows:
    """The rows of ``query`` as plain Python values; DuckDB errors as :class:`QueryError`."""

    def fetch() -> Rows:
        if _runs_once(con, query, params):
            # its description names DuckDB's types (DuckDB 1's names DB-API type codes)
            con.execute(query, params or None)
            described = con.description or []
            return Rows([d[0] for d in described], [str(d[1]) for d in described], con.fetchall())
        rel = con.sql(query, params=params) if params else con.sql(query)
        if rel is None:
            return Rows([], [], [])
        return Rows(list(rel.columns), [str(t) for t in rel.types], rel.fetchall())

    return _guarded(con, query, fetch)


def fetch_frame(
    con: duckdb.DuckDBPyConnection,
    query: str,
    params: Sequence[Any] | Mapping[str, Any] | None = None,
) -> pl.DataFrame:
    """The result of ``query`` as a Polars frame; DuckDB errors as :class:`QueryError`."""
    import polars as pl

    def fetch() -> pl.DataFrame:
        found = query_frame(con, query, params)
        return pl.DataFrame() if found is None else found

    return _guarded(con, query, fetch)


def query_frame(
    con: duckdb.DuckDBPyConnection,
    query: str,
    params: Sequence[Any] | Mapping[str, Any] | None = None,
) -> pl.DataFrame | None:
    """The result of ``query`` as a Polars frame, planned once (``None``: a statement without rows).

    ``con.sql()`` binds a SELECT to learn its columns, and reading the relation binds and
    plans it again: for the large macros of ``sql/`` (the roofline, memory, critical path)
    on a small run that first bind is ~30% of the query's time. A single SELECT is therefore
    run as one statement, straight into an Arrow stream (:class:`_Statement`), where this
    DuckDB offers it; anything else (a script, a command) goes through ``con.sql()``.
    """
    if _runs_once(con, query, params):
        return to_frame(_Statement(con, query, params))
    rel = con.sql(query, params=params) if params else con.sql(query)
    return None if rel is None else to_frame(rel)


class _Statement:
    """One SELECT run when read through the Arrow C stream interface (``__arrow_c_stream__``).

    DuckDB 2's Python connection runs a statement with its values into a stream through
    ``_submit`` (the call its relations make when read); it has no public call that does so
    without binding the statement first. Used only where the connection has it.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, query: str,
                 params: Sequence[Any] | Mapping[str, Any] | None) -> None:
        self._con, self._query = con, query
        self._values: list[object] | dict[str, object] | None = (
            None if not params else dict(params) if isinstance(params, Mapping) else list(params))

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> Any:
        return self._con._submit(self._query, self._values, "stream", _STREAM_BATCH_ROWS).arrow_capsule()


#: Rows per Arrow batch of a result read as a stream (what DuckDB 2 reads a relation in).
_STREAM_BATCH_ROWS = 131_072

#: How a single SELECT statement may begin (after blanks and ``--`` comments).
_SELECT_START = re.compile(r"(?:\s|--[^\n]*\n)*(?:SELECT|WITH|FROM)\b", re.IGNORECASE)


def _runs_once(
    con: duckdb.DuckDBPyConnection, query: str, params: Sequence[Any] | Mapping[str, Any] | None
) -> bool:
    """Whether ``query`` runs as one statement, planned once, rather than through ``con.sql()``
    (which binds it, then binds and plans it again to read it): a single SELECT, on DuckDB 2
    (``_submit``), with parameters that need none of ``con.sql()``'s checks."""
    return _one_select(query) and hasattr(con, "_submit") and _plain_params(params)


def _plain_params(params: Sequence[Any] | Mapping[str, Any] | None) -> bool:
    """Whether ``params`` need none of the checks ``con.sql()`` makes: no two names that are
    one name to DuckDB (it matches them in any case) and only text names."""
    if not isinstance(params, Mapping):
        return True
    return all(isinstance(k, str) for k in params) and len({k.lower() for k in params}) == len(params)


def _one_select(query: str) -> bool:
    """Whether ``query`` is one statement that reads (no ``;``, begins as a SELECT does)."""
    return ";" not in query and _SELECT_START.match(query) is not None


def fetch_head(
    con: duckdb.DuckDBPyConnection,
    query: str,
    params: Sequence[Any] | Mapping[str, Any] | None = None,
    *,
    max_rows: int,
) -> tuple[pl.DataFrame, bool]:
    """The first ``max_rows`` rows of ``query`` and whether it had more; errors as :class:`QueryError`.

    The rows are read as a stream of Arrow batches and the reading stops once past
    ``max_rows``: a query of millions of rows costs what its first batches cost.
    """
    import polars as pl
    import pyarrow as pa

    def fetch() -> tuple[pl.DataFrame, bool]:
        rel = con.sql(query, params=params) if params else con.sql(query)
        if rel is None:
            return pl.DataFrame(), False
        make = getattr(rel, "to_arrow_reader", None) or rel.fetch_arrow_reader  # DuckDB < 1.4
        reader = make(min(max_rows + 1, 65_536))
        batches, rows = [], 0
        for batch in reader:
            batches.append(batch)
            rows += batch.num_rows
            if rows > max_rows:
                break
        frame = pl.DataFrame(pa.Table.from_batches(batches, schema=reader.schema))
        return frame.head(max_rows), rows > max_rows

    return _guarded(con, query, fetch)


def to_frame(rel: Any) -> pl.DataFrame:
    """A relation's rows as a Polars frame, through the Arrow C stream interface.

    ``DuckDBPyRelation.pl()`` goes through pyarrow (importing it costs ~60 MB of a
    query process); Polars reads the relation's ``__arrow_c_stream__`` directly,
    with the same columns and types.
    """
    import polars as pl

    return pl.DataFrame(rel)


_T = TypeVar("_T")


def _guarded(con: duckdb.DuckDBPyConnection, query: str, fetch: Callable[[], _T]) -> _T:
    """``fetch()`` (with the Python functions it may need, :func:`~tracewh.query.udfs.with_functions`),
    DuckDB's errors raised as :class:`QueryError`."""
    try:
        return with_functions(con, fetch)
    except duckdb.IOException as exc:
        raise QueryError(
            query, f"{first_line(exc)} (a data file is missing or damaged: run `tracewh verify`)"
        ) from exc
    except duckdb.Error as exc:
        raise QueryError(query, first_line(exc)) from exc


def fetch_as(
    con: duckdb.DuckDBPyConnection,
    query: str,
    params: Sequence[Any] | Mapping[str, Any] | None,
    kind: Kind,
) -> pl.DataFrame | pa.Table | Rows:
    """The result of ``query`` as ``kind``: :func:`fetch_frame`, its Arrow table, or :func:`fetch_rows`."""
    if kind == "rows":
        return fetch_rows(con, query, params)
    frame = fetch_frame(con, query, params)
    return frame.to_arrow() if kind == "arrow" else frame
