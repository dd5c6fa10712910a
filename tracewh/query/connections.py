"""The connections of the query layer: the current snapshot, pinned sessions, spill folders.

:class:`Connections` (the base of :class:`tracewh.query.session.Session`) opens connections on
the prepared catalog of ``sql/`` views (:func:`tracewh.query.db.connect_catalog`) pointed at
the files of the current Delta snapshot, restricted to the partitions a question needs; inside
:meth:`Connections.session` one snapshot and one confined connection serve every query (other
threads get sibling connections to the same database over the same snapshot, :class:`Pinned`). The
reads themselves (user SQL, the library's own queries, table macros) are
:class:`~tracewh.query.session.Session`'s.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping, Sequence
from datetime import date
from typing import Any, TypeVar

import duckdb

from tracewh.core.errors import EmptyWarehouseError, WarehouseError
from tracewh.query.db import (
    TableInfo,
    catalog_schema_key,
    catalog_tables,
    connect_catalog,
    first_line,
    home,
    shadow_files,
    sibling,
    table_sql,
)
from tracewh.query.pinned import Pinned
from tracewh.query.reads import ReadMap
from tracewh.query.settings import PrivateTemp, QuerySettings
from tracewh.query.udfs import register_functions
from tracewh.storage.snapshot import LiveSnapshot, select_files
from tracewh.storage.store import Store

__all__ = ["Connections"]

#: what a session remembers of a ``raw_<table>`` pointed at no file but the raising view
_UNBOUND = ("<unbound>",)


def _selection(days: Collection[date] | None, since: date | None) -> Hashable:
    """The key of a file selection (:func:`~tracewh.storage.snapshot.select_files`)."""
    return (None if days is None else frozenset(days), since)

_T = TypeVar("_T")


def session_threads(con: duckdb.DuckDBPyConnection, query_threads: int) -> int:
    """DuckDB's threads for a database that ``query_threads`` threads query at once: its
    default (the cores DuckDB sees) less the callers beyond the first, at least one.

    DuckDB runs a query on the calling thread and on the database's worker threads
    (``threads`` counts both). A report queries from 3 threads: on 2 cores, 2 workers beside
    3 callers made 5 runnable threads (5% more CPU and wall than 1 on the 3,000-run fleet
    warehouse, 10 interleaved rounds); on 16 cores, 14.
    """
    default = int(con.execute("SELECT current_setting('threads')").fetchall()[0][0])
    return max(1, default - (query_threads - 1))


class Connections:
    """The snapshot and the connections of one warehouse (see the module docstring).

    :class:`tracewh.query.session.Session` adds the reads; this base holds what they read
    through.

    Parameters
    ----------
    store
        The warehouse's tables.
    settings
        DuckDB's memory limit and where spill folders are made, for every connection.
    """

    def __init__(self, store: Store, *, settings: QuerySettings | None = None) -> None:
        self.store = store
        self.settings = settings or QuerySettings()
        # the spill folder of connections outside a session (a session has its own)
        self._temp = PrivateTemp(self.settings.temp_directory)
        self._pinned: Pinned | None = None  # set inside `with session.session():`
        # the catalog connection of the last per-run analysis, kept for the next one
        # (opening and closing one is ~40 ms of an analysis call); see `conn(reuse=True)`
        self._idle: duckdb.DuckDBPyConnection | None = None
        self._idle_lock = threading.Lock()
        self._tables: list[TableInfo] | None = None  # see tables_of
        self._table_sql: list[tuple[str, str, str, str]] | None = None  # see table_sql_of
        self._reads: ReadMap | None = None  # see reads_of
        self._registered: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()  # reads_of

    def tables_of(self, con: duckdb.DuckDBPyConnection) -> list[TableInfo]:
        """The catalog's tables (:func:`~tracewh.query.db.catalog_tables`), read from the first
        connection asked: every connection of this object opens the same prepared catalog."""
        if self._tables is None:
            self._tables = catalog_tables(con)
        return list(self._tables)

    def table_sql_of(self, con: duckdb.DuckDBPyConnection) -> list[tuple[str, str, str, str]]:
        """The catalog's :func:`~tracewh.query.db.table_sql`, read once (as :meth:`tables_of`)."""
        if self._table_sql is None:
            self._table_sql = table_sql(con)
        return self._table_sql

    def reads_of(self, con: duckdb.DuckDBPyConnection, query: str | None) -> frozenset[str] | None:
        """The tables ``query`` reads (:mod:`tracewh.query.reads`; ``runs`` always), or
        None (every table) without a query. If ``query`` calls a Python function of ``sql/``
        (:meth:`~tracewh.query.reads.ReadMap.calls_functions`), ``con`` gets them registered."""
        if query is None:
            return None
        if self._reads is None:
            self._reads = ReadMap.load(con, [n for n, _ in self.tables_of(con)])
        if con not in self._registered and self._reads.calls_functions(query):
            register_functions(con)
            self._registered.add(con)
        return self._reads.tables_read(query) | {"runs"}

    def _catalog(self) -> duckdb.DuckDBPyConnection:
        """A catalog connection under the memory limit, spilling into a private folder."""
        return connect_catalog(memory_limit=self.settings.memory_limit,
                               temp_directory=self._temp.path())  # fmt: skip

    @property
    def pinned(self) -> Pinned | None:
        """The open session's snapshot and connections (None outside :meth:`session`)."""
        return self._pinned

    @contextlib.contextmanager
    def session(self, *, query_threads: int = 1) -> Iterator[None]:
        """Read one snapshot through one DuckDB connection for the queries inside.

        Inside ``with wh.session():`` every query of this object reads each Delta log
        once (``runs`` at entry, each other table when a query first needs it:
        :class:`~tracewh.storage.snapshot.LiveSnapshot`) and reuses one connection (its Parquet metadata cache too);
        writes made meanwhile are not seen. A report runs its ~20 queries this way.
        Nested sessions reuse the outer one. Queries from other threads (a report runs some
        side by side) each get a connection of their own to the same DuckDB database
        (:func:`~tracewh.query.db.sibling`: its settings, confinement, memory limit and
        caches), over the same snapshot, kept until the session ends.

        ``query_threads``: how many of the caller's threads will query at once (a report:
        :data:`tracewh.report.REPORT_QUERY_THREADS`). DuckDB's own threads are then its
        default (the cores) less the other callers, at least one: each caller runs its query
        on its own thread too, so the session's queries use the cores without
        oversubscribing them (:func:`session_threads`). A nested session keeps the outer one's.

        >>> with catalog.session():  # doctest: +SKIP
        ...     rows = catalog.fetch("SELECT count(*) FROM runs", kind="rows")
        """
        if self._pinned is not None:
            yield
            return
        con = self._catalog()
        stack = contextlib.ExitStack()
        try:
            # a compact --retain-hours 0 keeps the files of this snapshot while it is read
            stack.enter_context(self.store.reading())
            tables = self.tables_of(con)
            partial = self.store.require(
                tables=[n for n, _ in tables], schema_key=catalog_schema_key(con)
            )
            # each table's log is read when a query first needs it (runs at once)
            # (the files a query selects are checked to lie inside their table: check=)
            live = LiveSnapshot(lambda name: self.guard_log(lambda: self.store.table_entries(name)),
                                [n for n, _ in tables], check=self.store.check_files)  # fmt: skip
            if not live.get("runs"):
                raise EmptyWarehouseError(self.store.root)
            if self.store.remote:
                con.register_filesystem(self.store.filesystem())
            # the session's queries only read the warehouse: its connection is confined
            # once (fetch() needs no connection of their own inside a session)
            from tracewh.query.sqlguard import confine
            from tracewh.query.sqllimits import private_temp

            # DuckDB's temporary files: a private folder of the session, removed at its end
            temp = stack.enter_context(private_temp("tracewh-session-",
                                                    parent=self.settings.temp_directory))
            if query_threads > 1:
                con.execute(f"SET threads = {session_threads(con, query_threads)}")
            confine(con, allowed=self.allowed_dirs(), temp=temp / "0")
            self._pinned = Pinned(con, tables, live, partial, views={id(con): {}},
                                  owner=threading.get_ident(), temp=temp, home=home(con))
            yield
        finally:
            pinned, self._pinned = self._pinned, None
            if pinned is not None:
                for other in [*pinned.threads.values(), *pinned.aux.values()]:
                    other.close()
            con.close()
            stack.close()

    def connect(
        self, *, days: Collection[date] | None = None, since: date | None = None
    ) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection over the current snapshot, with every ``sql/`` view.

        With ``days``, run tables hold only those ``day`` partitions, with ``since``
        only the partitions of that day or later (``runs`` is always whole):
        per-run analyses then cost the same whatever the warehouse's size. The
        caller closes it. Inside :meth:`session`, it reads the session's snapshot. The
        caller runs any SQL on it, so it has the Python functions of ``sql/`` registered
        (:mod:`tracewh.query.udfs`).
        """
        con = self._connect(days=days, since=since, own=True)
        register_functions(con)
        return con

    def _connect(
        self,
        *,
        days: Collection[date] | None = None,
        since: date | None = None,
        only: str | Collection[str] | None = None,
        own: bool = False,
        reuse: bool = False,
        query: str | None = None,
    ) -> duckdb.DuckDBPyConnection:
        """The catalog over the snapshot (of table(s) ``only`` alone, the rest left empty).

        With ``query`` (and no ``only``), of the tables it reads alone (:meth:`reads_of`),
        the rest pointed at a view that raises when read (:mod:`tracewh.query.reads`).

        Inside a session: the session's connection re-pointed at its snapshot (unless
        ``own``: a new connection over that snapshot). With ``reuse`` (outside a
        session), the connection a previous call gave back (:meth:`_give_back`) if any,
        every table of it re-pointed (the snapshot is read again, as for a new one).
        """
        pinned = self._pinned
        reused = None
        if pinned is None and not own and reuse:
            with self._idle_lock:
                reused, self._idle = self._idle, None
        con = reused or (self._catalog() if pinned is None or own else self._session_con(pinned))
        try:
            tables = pinned.tables if pinned is not None else self.tables_of(con)
            names = {only} if isinstance(only, str) else None if only is None else set(only)
            reads = self.reads_of(con, query) if names is None else None
            if reads is not None:
                names = set(reads)
            wanted = tables if names is None else [t for t in tables if t[0] in names]
            unbound = [] if reads is None else [n for n, _ in tables if n not in reads]
            partial = self._partial(con, tables)
            if pinned is not None:
                files = select_files(pinned.live, dict(tables), days=days, since=since,
                                     names=[n for n, _ in wanted])
            else:
                files = self.snapshot(wanted, days=days, since=since)
            if not files.get("runs"):
                raise EmptyWarehouseError(self.store.root)
            if self.store.remote and (pinned is None or own) and reused is None:
                con.register_filesystem(self.store.filesystem())
            if reused is not None:
                # the previous call's views of the wanted tables go back to the placeholders
                # where the snapshot has no file; the others stay as they are (only
                # _run_conn reuses, and it points every table at its snapshot next)
                files = {n: files.get(n, []) for n, _ in wanted}
            try:
                self._shadow(con, files, reset=(pinned is not None and not own) or reused is not None,
                             partial=partial, unbound=unbound, selection=_selection(days, since))
            except duckdb.Error as exc:
                raise WarehouseError(
                    self.store.root, f"cannot open the tables ({first_line(exc)}); run `tracewh verify`"
                ) from exc
        except BaseException:
            self._release(con)
            raise
        return con

    def _shadow(
        self, con: duckdb.DuckDBPyConnection, files: Mapping[str, Sequence[str]], *,
        reset: bool, partial: Collection[str], unbound: Collection[str] = (),
        selection: Hashable = None,
    ) -> None:
        """:func:`shadow_files`; on the session's connection only the tables whose files changed.

        A session's queries mostly read the same day's files again (a report's ~20 queries
        of one run): the session remembers what each ``raw_<table>`` points at, and a view
        is made again only for a different file list (``()``: the empty placeholder). A table
        in ``unbound`` (the query does not read it) that holds the files of the same
        ``selection`` (days, since) is left as it is: correct for this query's selection, and
        the next query of the run may read it.
        """
        pinned = self._pinned
        shadowed = None if pinned is None else pinned.views.get(id(con))
        if shadowed is None or pinned is None:
            shadow_files(con, files, reset=reset, partial=partial, unbound=unbound,
                         sql_of=self.table_sql_of(con))
            return
        chosen = pinned.selections.setdefault(id(con), {})
        unbound = [n for n in unbound if selection is None or chosen.get(n) != selection]
        wanted = {name: tuple(paths) for name, paths in files.items()}
        wanted |= {name: _UNBOUND for name in unbound}
        changed = {name: list(paths) for name, paths in wanted.items()
                   if shadowed.get(name, ()) != paths}
        chosen.update({name: selection for name in files})
        chosen.update({name: None for name in unbound})
        if not changed:
            return
        try:
            shadow_files(con, {n: p for n, p in changed.items() if n not in unbound}, reset=True,
                         partial=partial, unbound=[n for n in changed if n in unbound],
                         sql_of=self.table_sql_of(con))
        except BaseException:
            # some views may be made, some not: every one is made again next time
            shadowed.update({name: None for name, _ in pinned.tables})
            chosen.clear()
            raise
        shadowed.update({name: wanted[name] for name in changed})

    def memoized(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """``compute()``; inside :meth:`session` once per ``key`` (:meth:`Pinned.memoized`)."""
        pinned = self._pinned
        return compute() if pinned is None else pinned.memoized(key, compute)

    @contextlib.contextmanager
    def connection(
        self, *, days: Collection[date] | None = None, query: str | None = None
    ) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection (as :meth:`connect`) for the library's queries that change its settings.

        What a query under its own DuckDB memory limit runs on (:mod:`tracewh.analysis.memory`).
        Outside a session, a new connection, closed at the end. Inside :meth:`session`,
        one connection kept for the whole session (not the session's confined one, whose
        settings are locked; one per thread), its views re-pointed only where ``days``
        changes the files. With ``query``, only the tables it reads are pointed at the
        snapshot (:meth:`reads_of`; the others raise when read), as :meth:`_connect` does.
        """
        pinned = self._pinned
        if pinned is None:
            con = self._connect(days=days, own=True, query=query)
            try:
                yield con
            finally:
                con.close()
            return
        me = threading.get_ident()
        with pinned.lock:
            aux = pinned.aux.get(me)
        if aux is None:
            aux = self._catalog()
            if self.store.remote:
                aux.register_filesystem(self.store.filesystem())
            with pinned.lock:
                pinned.views[id(aux)] = {}
                pinned.aux[me] = aux
        reads = self.reads_of(aux, query)
        names = [n for n, _ in pinned.tables if reads is None or n in reads]
        unbound = [] if reads is None else [n for n, _ in pinned.tables if n not in reads]
        files = select_files(pinned.live, dict(pinned.tables), days=days, since=None, names=names)
        try:
            self._shadow(aux, files, reset=True, partial=pinned.partial, unbound=unbound,
                         selection=_selection(days, None))
        except duckdb.Error as exc:
            raise WarehouseError(
                self.store.root, f"cannot open the tables ({first_line(exc)}); run `tracewh verify`"
            ) from exc
        yield aux

    def _partial(self, con: duckdb.DuckDBPyConnection, tables: list[TableInfo]) -> frozenset[str]:
        """The tables to read by column name (older files lack columns): the session's, or
        from :meth:`~tracewh.storage.store.Store.require` (which brings an older warehouse up to date)."""
        if self._pinned is not None:
            return self._pinned.partial
        return self.store.require(
            tables=[n for n, _ in tables], schema_key=catalog_schema_key(con)
        )

    def _session_con(self, pinned: Pinned) -> duckdb.DuckDBPyConnection:
        """The session's connection of the calling thread (made, confined, on first use)."""
        me = threading.get_ident()
        if me == pinned.owner:
            return pinned.con
        with pinned.lock:
            con = pinned.threads.get(me)
        if con is not None:
            return con
        # a connection to the session's database (its catalog, settings, confinement, memory
        # limit, spill folder, Parquet metadata cache and threads): a new database per thread
        # cost ~0.05 s to open, and each had a memory limit and threads of its own
        con = sibling(pinned.con, pinned.home)
        with pinned.lock:
            pinned.views[id(con)] = {}
            pinned.threads[me] = con
        return con

    def _release(self, con: duckdb.DuckDBPyConnection) -> None:
        """Close ``con`` unless it is one of the session's."""
        if self._pinned is None or not self._pinned.holds(con):
            con.close()

    def _give_back(self, con: duckdb.DuckDBPyConnection) -> None:
        """Keep a connection of the library's own queries for the next call (or close it)."""
        with self._idle_lock:
            keep = self._idle is None
            if keep:
                self._idle = con
        if not keep:
            con.close()

    @contextlib.contextmanager
    def conn(self, *, reuse: bool = False, **kwargs: Any) -> Iterator[duckdb.DuckDBPyConnection]:
        """A catalog connection for one call; ``reuse``: for the library's fixed queries only
        (a user's SQL gets a fresh connection: whatever it sets or creates goes with it);
        ``query``: for that query alone (only the tables it reads pointed at the snapshot).
        Outside a session the snapshot's files are read under :meth:`Store.reading`."""
        with contextlib.ExitStack() as stack:
            if self._pinned is None:
                stack.enter_context(self.store.reading())
            con = self._connect(reuse=reuse, **kwargs)
            try:
                yield con
            finally:
                if reuse and self._pinned is None:
                    self._give_back(con)
                else:
                    self._release(con)

    def guard_log(self, read: Callable[[], _T]) -> _T:
        try:
            return read()
        except WarehouseError:
            raise
        except Exception as exc:  # delta-rs errors reading the log
            raise WarehouseError(self.store.root, f"cannot read the table log: {exc}") from exc

    def snapshot(
        self, tables: list[TableInfo], *, days: Collection[date] | None, since: date | None
    ) -> dict[str, list[str]]:
        if self._pinned is not None:
            return select_files(self._pinned.live, dict(self._pinned.tables), days=days,
                                since=since, names=[n for n, _ in tables])
        return self.guard_log(
            lambda: self.store.snapshot_files(days=days, since=since, tables=tables)
        )

    def allowed_dirs(self) -> list[str]:
        """The folders a confined query may read: the tables (and their object-store URL)."""
        from tracewh.core.sqlfiles import glob_escaped

        tables = f"{self.store.root}/tables/" if self.store.remote else str(self.store.tables_dir) + os.sep
        # DuckDB checks the path as written in the query: the snapshot's paths are written
        # with their glob characters escaped (tracewh.core.sqlfiles.glob_escaped)
        return sorted({tables, glob_escaped(tables)})
