"""Fetching a query's result from a DuckDB connection: Polars, Arrow or plain rows.

DuckDB's errors become :class:`~tracewh.core.errors.QueryError` (one line, the query named).
Plain :class:`Rows` need no Polars (a printing command's start stays that of Python and
DuckDB); frames come through the Arrow C stream interface (no pyarrow).
"""

from __future__ import annotations

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
    "Kind", "Rows", "fetch_as", "fetch_frame", "fetch_head", "fetch_rows", "first_line", "to_frame",
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
        rel = con.sql(query, params=params) if params else con.sql(query)
        if rel is None:
            return pl.DataFrame()
        return to_frame(rel)

    return _guarded(con, query, fetch)


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


def to_frame(rel: duckdb.DuckDBPyRelation) -> pl.DataFrame:
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
