"""The DuckDB session over a warehouse's snapshot: every read of the warehouse goes here.

:class:`Session` opens connections on the prepared catalog of ``sql/`` views pointed at the
files of the current Delta snapshot (its base, :class:`tracewh.query.connections.Connections`:
the snapshot, pinned sessions, spill folders); inside :meth:`Session.session` one snapshot and
one confined connection serve every query. :meth:`Session.fetch` runs user SQL (read-only,
confined: :mod:`tracewh.query.sqlguard`), :meth:`Session.fetch_own` the library's own fixed
queries, :meth:`Session.fetch_macro` a per-run table macro.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from tracewh.core.errors import QueryError
from tracewh.query import macros
from tracewh.query.connections import Connections
from tracewh.query.fetch import Kind, fetch_as
from tracewh.query.macros import macro_sql
from tracewh.query.pinned import Pinned
from tracewh.query.runs import resolve
from tracewh.query.runsel import RunRef, RunSelector

if TYPE_CHECKING:
    from tracewh.query.sqllimits import QueryLimits

__all__ = ["Pinned", "Session"]

_T = TypeVar("_T")


class Session(Connections):
    """The query layer of one warehouse (see the module docstring).

    Parameters
    ----------
    store
        The warehouse's tables.
    settings
        DuckDB's memory limit and where spill folders are made, for every connection.
    """

    def _own(self, unrestricted: bool) -> bool:
        """Whether a query needs a connection of its own: an unrestricted one in a session
        (the session's connection is confined)."""
        return unrestricted and self._pinned is not None

    def _guard(self, con: duckdb.DuckDBPyConnection, query: str, *, temp: Path,
               limits: QueryLimits | None = None) -> None:
        """Refuse ``query`` unless it only reads; confine ``con`` to the warehouse's tables
        (after the views are bound to the snapshot; the setting is locked), its spill folder
        ``temp`` and its ``limits``, unless it is the session's, confined already."""
        from tracewh.query.sqlguard import check_read_only, confine

        check_read_only(con, query)
        if self._pinned is None or not self._pinned.holds(con):
            confine(con, allowed=self.allowed_dirs(), temp=temp, limits=limits)

    def _by_reads(self, query: str, run: Callable[[str | None], _T]) -> _T:
        """``run(query)``: a query over the tables ``query`` reads alone; run again over every
        table (``run(None)``) if it read one more (unless ``TRACEWH_STRICT_READS``: see
        :mod:`tracewh.query.reads`)."""
        from tracewh.query.reads import is_unbound_error, strict

        try:
            return run(query)
        except (QueryError, duckdb.Error) as exc:
            if not is_unbound_error(exc) or strict():
                raise
        return run(None)

    @contextlib.contextmanager
    def run_conn(
        self, run: RunSelector, *, graphs: bool = False, query: str | None = None,
    ) -> Iterator[tuple[duckdb.DuckDBPyConnection, RunRef]]:
        """One connection for one run: ``runs`` read and the run resolved, then its day's files.

        ``runs`` is read before the child tables (so every child row of a run it
        lists is in their snapshots), and only once. ``graphs``: for an analysis that maps
        CUDA/HIP graph replays to their captures (``sql/45_graphs.sql``), a replay run's
        connection also holds the days of its job's capture and replay runs. With ``query``:
        the tables it reads alone, the others pointed at a view that raises when read
        (:mod:`tracewh.query.reads`).
        """
        with self.conn(only="runs", reuse=True) as con:
            ref = resolve(con, run, root=self.store.root)
            reads = self.reads_of(con, query)
            tables = [t for t in self.tables_of(con) if t[0] != "runs"
                      and (reads is None or t[0] in reads)]
            unbound = [] if reads is None else [n for n, _ in self.tables_of(con) if n not in reads]
            days = {ref.day}
            if graphs:  # a replay's captures may be on another day than the replay
                days |= {r[0] for r in con.execute(
                    "SELECT DISTINCT day FROM runs WHERE job = $job AND kind IN ('capture', 'replay') "
                    "AND (SELECT kind FROM runs WHERE run_id = $run) = 'replay'",
                    {"job": ref.job, "run": ref.run_id}).fetchall()}
            files = self.snapshot(tables, days=days, since=None)
            # reset: a connection kept from a previous call (or the session's) has views
            # of other files; every table is pointed at this snapshot
            self._shadow(con, files, reset=True, partial=self._partial(con, self.tables_of(con)),
                         unbound=unbound, selection=(frozenset(days), None))
            yield con, ref

    def fetch(
        self,
        query: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        *,
        days: Collection[date] | None = None,
        since: date | None = None,
        unrestricted: bool = False,
        limits: QueryLimits | None = None,
        kind: Kind = "polars",
        stop: threading.Event | None = None,
        max_rows: int | None = None,
    ) -> Any:
        """Run one read-only query over the views; its result as ``kind``.

        ``days``/``since`` restrict the run tables to those partitions / to those of that day
        or later (``runs`` is always whole). The query may only read and only the warehouse's
        files (:mod:`tracewh.query.sqlguard`); ``unrestricted=True`` lifts both (it can damage
        the warehouse). ``limits`` bound its time, memory and spill space and let Ctrl-C stop
        it (:mod:`tracewh.query.sqllimits`); DuckDB's temporary files go to a private folder
        removed afterwards either way. Setting ``stop`` from another thread interrupts the
        query. With ``max_rows``: ``(frame, more)``, the first ``max_rows`` rows (read no
        further) and whether the result had more (:func:`~tracewh.query.fetch.fetch_head`).
        """
        from tracewh.query.fetch import fetch_head
        from tracewh.query.sqlguard import user_query
        from tracewh.query.sqllimits import apply_limits, private_temp, run_limited

        query = user_query(query)  # SHOW TABLES: each name once (sql/99_catalog.sql)

        def run(reads: str | None) -> Any:
            with private_temp(parent=self.settings.temp_directory) as temp, \
                    self.conn(days=days, since=since, own=self._own(unrestricted), query=reads) as con:
                session = self._pinned is not None and self._pinned.holds(con)
                if not unrestricted:
                    self._guard(con, query, temp=temp, limits=limits)
                elif not session:
                    apply_limits(con, limits, temp)

                def fetch() -> Any:
                    if max_rows is not None:
                        return fetch_head(con, query, params, max_rows=max_rows)
                    return fetch_as(con, query, params, kind)

                if limits is None and stop is None:
                    return fetch()
                return run_limited(con, query, fetch, limits, stop=stop)

        return self._by_reads(query, run)

    def fetch_own(
        self, query: str, params: Mapping[str, Any] | None = None, *,
        only: str | Collection[str] | None = None, kind: Kind = "polars",
        days: Collection[date] | None = None,
    ) -> Any:
        """The library's own fixed query (not checked); ``only``: that table's (those tables')
        snapshot alone, the others empty (default: the tables ``query`` reads); ``days``: of
        the run tables, those partitions."""
        def run(reads: str | None) -> Any:
            with self.conn(only=only, days=days, query=reads) as con:
                return fetch_as(con, query, params, kind)

        return run(None) if only is not None else self._by_reads(query, run)

    def on_runs(self, read: Callable[[duckdb.DuckDBPyConnection], _T]) -> _T:
        """``read(con)`` on a connection holding the snapshot's ``runs`` alone."""
        with self.conn(only="runs") as con:
            return read(con)

    def fetch_macro(
        self, name: str, run: RunSelector, params: Mapping[str, Any], *, kind: Kind = "polars"
    ) -> tuple[RunRef, Any]:
        """The resolved run and table macro ``name(run_id, **params)``, in one connection."""
        query, values = macro_sql(name, params)

        def fetch(reads: str | None) -> tuple[RunRef, Any]:
            with self.run_conn(run, graphs=name in macros.GRAPH_MACROS, query=reads) as (con, ref):
                return ref, fetch_as(con, query, {"first": ref.run_id, **values}, kind)

        return self._by_reads(query, fetch)
