"""The query-layer methods of :class:`tracewh.api.Warehouse`: SQL, macros, sessions, runs.

:class:`QueryMethods` is the part of the facade that only needs the query layer (its
``catalog``, a :class:`~tracewh.query.session.Session`): the one way to run SQL
(:meth:`~QueryMethods.relation`), the one way to call a per-run macro
(:meth:`~QueryMethods.macro_relation`), their Polars shortcuts, the deprecated duplicates,
sessions and run lookups. The facade adds the analyses, history and ingest.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any, Self, TypeVar

from tracewh.query import macros
from tracewh.query.fetch import Rows
from tracewh.query.relation import MacroRelation, Relation
from tracewh.query.runs import label_values, resolve
from tracewh.query.runsel import RunRef, RunSelector
from tracewh.query.session import Session

if TYPE_CHECKING:
    import duckdb
    import polars as pl

    from tracewh.query.sqllimits import QueryLimits

__all__ = ["Params", "QueryMethods"]

_T = TypeVar("_T")
Params = Sequence[Any] | Mapping[str, Any] | None


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"Warehouse.{old} is deprecated: use Warehouse.{new}", DeprecationWarning,
                  stacklevel=3)


class QueryMethods:
    """SQL, macros, sessions and runs over ``catalog`` (see the module docstring)."""

    #: The query layer: connections, snapshots and sessions of this warehouse.
    catalog: Session

    # ------------------------------------------------------------- the query layer
    @contextlib.contextmanager
    def session(self, *, query_threads: int = 1) -> Iterator[Self]:
        """One snapshot and one DuckDB connection for every query inside (:meth:`tracewh.query.session.Session.session`).

        ``query_threads``: how many threads of the caller will query at once (DuckDB's
        own threads are fewer by the others).

        >>> with Warehouse("wh").session() as wh:  # doctest: +SKIP
        ...     top, gaps = wh.kernels(), wh.gaps()
        """
        with self.catalog.session(query_threads=query_threads):
            yield self

    @property
    def in_session(self) -> bool:
        """Whether a :meth:`session` is open (its queries share one snapshot and database)."""
        return self.catalog.pinned is not None

    def connect(self, *, days: Collection[date] | None = None,
                since: date | None = None) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection over the current snapshot, with every ``sql/`` view (caller closes)."""
        return self.catalog.connect(days=days, since=since)

    def connection(self, *, days: Collection[date] | None = None, query: str | None = None
                   ) -> contextlib.AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A connection for the library's queries that change its settings (a memory limit);
        with ``query``, of the tables it reads alone."""
        return self.catalog.connection(days=days, query=query)

    def memoized(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """``compute()``; inside :meth:`session` once per ``key`` (the result is shared)."""
        return self.catalog.memoized(key, compute)

    def relation(
        self, query: str, params: Params = None, *, days: Collection[date] | None = None,
        since: date | None = None, unrestricted: bool = False, limits: QueryLimits | None = None,
        stop: threading.Event | None = None,
    ) -> Relation:
        """A read-only SQL query over the views, run when turned into Polars, Arrow or rows.

        ``days``/``since`` restrict the run tables' partitions; ``unrestricted=True`` lifts the
        read-only confinement; ``limits`` bound its time, memory and spill space; setting
        ``stop`` from another thread interrupts it
        (:meth:`tracewh.query.session.Session.fetch`).
        """
        return Relation(self.catalog, query, params, days, since, unrestricted, limits, stop)

    def macro_relation(self, name: str, run: RunSelector = "latest", /, **params: Any) -> MacroRelation:
        """Per-run table macro ``name`` of ``sql/`` (e.g. ``stream_gaps``) for a run, run when converted."""
        return MacroRelation(self.catalog, name, run, params)

    def sql(
        self, query: str, params: Params = None, *, days: Collection[date] | None = None,
        since: date | None = None, unrestricted: bool = False, limits: QueryLimits | None = None,
    ) -> pl.DataFrame:
        """:meth:`relation` as a :class:`polars.DataFrame`."""
        return self.relation(query, params, days=days, since=since, unrestricted=unrestricted,
                             limits=limits).pl()

    def macro(self, name: str, run: RunSelector = "latest", /, **params: Any) -> pl.DataFrame:
        """:meth:`macro_relation` as a :class:`polars.DataFrame`."""
        return self.macro_relation(name, run, **params).pl()

    def call(
        self, name: str, first: Any, /, *, days: Collection[date] | None = None, **params: Any
    ) -> pl.DataFrame:
        """``SELECT * FROM name(first, key := value, ...)`` with values as parameters."""
        query, values = macros.macro_sql(name, params)
        return self.sql(query, {"first": first, **values}, days=days)

    def query(self, query: str, params: Params = None, *, days: Collection[date] | None = None,
              since: date | None = None, unrestricted: bool = False,
              limits: QueryLimits | None = None) -> Rows:
        """Deprecated: ``relation(...).rows()``."""
        _deprecated("query()", "relation(...).rows()")
        return self.relation(query, params, days=days, since=since, unrestricted=unrestricted,
                             limits=limits).rows()

    def macro_rows(self, name: str, run: RunSelector = "latest", /, **params: Any) -> Rows:
        """Deprecated: ``macro_relation(...).rows()``."""
        _deprecated("macro_rows()", "macro_relation(...).rows()")
        return self.macro_relation(name, run, **params).rows()

    def run_macro(self, name: str, run: RunSelector = "latest", /, *, rows: bool = False,
                  **params: Any) -> tuple[RunRef, pl.DataFrame | Rows]:
        """Deprecated: ``macro_relation(...).fetch("rows" | "polars")``."""
        _deprecated("run_macro()", "macro_relation(...).fetch(kind)")
        return self.macro_relation(name, run, **params).fetch("rows" if rows else "polars")

    def scan(self, table: str, *, days: Collection[date] | None = None) -> pl.LazyFrame:
        """A table's visible rows as a :class:`polars.LazyFrame` (see :func:`tracewh.query.scan.scan`;
        ``days``: of a run table, only those ``day`` partitions are read)."""
        from tracewh.query.scan import scan
        return scan(self.catalog, table, days=days)

    # ------------------------------------------------------------------- runs
    def run_table(self, *, minhash_days: Collection[date] | None = None) -> pl.DataFrame:
        """Every visible run (all ``runs`` columns but ``metadata_json``) with its fingerprint's
        ``minhash``; with ``minhash_days``, fingerprints are read from those days alone (NULL
        elsewhere; an empty set: the ``fingerprints`` table is not opened)."""
        out: pl.DataFrame = self.catalog.fetch_own(
            "SELECT r.* EXCLUDE (metadata_json), f.minhash FROM runs r LEFT JOIN fingerprints f USING (run_id)",
            only=("runs", "fingerprints"), days=minhash_days)
        return out

    def resolve_run(self, selector: RunSelector = "latest") -> RunRef:
        """Resolve a run selector to one run (see :func:`tracewh.query.runs.resolve`)."""
        if isinstance(selector, RunRef):
            return selector
        return self.catalog.on_runs(lambda con: resolve(con, selector, root=self.catalog.store.root))

    def label_values(self, key: str) -> list[str]:
        """The distinct values of label or run field ``key`` over the visible runs, sorted."""
        return self.catalog.on_runs(lambda con: label_values(con, key))

    def values(
        self, run: RunSelector, column: str, *, table: str = "gpu_ops", limit: int = 20
    ) -> list[tuple[Any, int]]:
        """The most frequent values of ``table.column`` in a run, with their row counts."""
        from tracewh.query.fetch import fetch_rows
        from tracewh.query.runs import top_values_query
        query = top_values_query(table, column, limit=limit)
        with self.catalog.run_conn(run) as (con, ref):
            return [(r[0], int(r[1])) for r in fetch_rows(con, query, {"id": ref.run_id}).rows]

    def run_row(self, run: RunSelector) -> dict[str, Any]:
        """The ``runs`` row of a run (all columns but ``metadata_json``) as a dict."""
        from tracewh.query.runs import run_row
        return self.catalog.on_runs(lambda con: run_row(con, run, root=self.catalog.store.root))
