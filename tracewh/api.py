"""The tracewh Python API: one :class:`Warehouse` object per warehouse directory.

Example
-------
>>> from tracewh.api import Warehouse
>>> wh = Warehouse("warehouse")
>>> report = wh.ingest(["traces/"])            # doctest: +SKIP
>>> wh.kernels("latest", top=10)               # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Collection, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as _field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import duckdb

from tracewh.analysis import memory as _mem
from tracewh.core.errors import (
    EmptyWarehouseError,
    RunNotFoundError,
    UsageError,
    WarehouseError,
)
from tracewh.query import macros
from tracewh.query.db import (
    Rows,
    TableInfo,
    catalog_schema_key,
    catalog_tables,
    connect_catalog,
    fetch_frame,
    fetch_rows,
    first_line,
    shadow_files,
)
from tracewh.query.runsel import (
    RUN_FIELDS,
    RunRef,
    RunSelector,
    Term,
    canonical,
    has_prefix,
    parse_selector,
    sql_selector,
    where_clause,
)
from tracewh.storage.store import Store, select_files

# Polars, the ingest pipeline (pyarrow, deltalake), history, changes and check are imported
# where they are used: a command that prints a query's rows loads none of them
if TYPE_CHECKING:
    import polars as pl

    from tracewh.analysis import critical_path as _cp
    from tracewh.analysis import roofline as _roof
    from tracewh.history import alerts as _alerts
    from tracewh.history import check as _check
    from tracewh.ingest.batch import Executor, IngestReport
    from tracewh.ingest.maintenance import CompactReport, VerifyReport
    from tracewh.ingest.options import FileResult
    from tracewh.query.sqllimits import QueryLimits

__all__ = ["RunRef", "RunSelector", "Warehouse"]

#: The "latest first" order of runs (as ``run_matches`` in ``sql/02_runs.sql``).
LATEST_FIRST = "ingested_at DESC NULLS LAST, start_ns DESC NULLS LAST, rank NULLS LAST, run_id"



class Warehouse:
    """A tracewh warehouse: Delta tables under ``root`` plus the SQL views over them.

    Parameters
    ----------
    root
        The warehouse directory, or an object-store URL such as
        ``s3://bucket/prefix`` (created by the first ingest).
    storage_options
        Object-store settings (``aws_endpoint_url``, ``aws_region``,
        ``aws_allow_http``, credentials...) for delta-rs, Polars and the fsspec
        file system DuckDB reads through; empty: the standard ``AWS_*``
        environment, as each client reads it.
    """

    def __init__(
        self, root: str | Path, *, storage_options: Mapping[str, str] | None = None
    ) -> None:
        self.store = Store(root, storage_options=dict(storage_options or {}))
        self.root: Path | str = self.store.root
        self._pinned: _Pinned | None = None  # set inside `with wh.session():`
        # the catalog connection of the last per-run analysis, kept for the next one
        # (opening and closing one is ~40 ms of an analysis call); see `_conn(reuse=True)`
        self._idle: duckdb.DuckDBPyConnection | None = None
        self._idle_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Warehouse({str(self.root)!r})"

    # ---------------------------------------------------------------- ingest
    def ingest(
        self,
        paths: Iterable[str | Path],
        *,
        labels: Mapping[str, str] | None = None,
        jobs: int | str = "auto",
        steps: int | None = None,
        step_marker: str | None = None,
        skip_python: bool = False,
        force: bool = False,
        job: str | None = None,
        executor: Executor | None = None,
        on_result: Callable[[FileResult], None] | None = None,
    ) -> IngestReport:
        """Ingest trace files and directories (recursive ``*.json``/``*.json.gz``).

        ``jobs``: processes, or ``"auto"`` (the default: every core for one big file
        or for many files, this process alone for a few small ones; see
        :func:`tracewh.ingest.batch.resolve_jobs`). Returns an
        :class:`~tracewh.ingest.batch.IngestReport`; a bad file is a failed result,
        never an exception.
        """
        from tracewh.ingest.batch import ingest_paths
        from tracewh.ingest.options import IngestOptions

        if steps is not None and steps < 1:
            raise UsageError("--steps must be at least 1")
        if step_marker is not None and not step_marker.strip():
            raise UsageError("--step-marker must not be empty")
        options = IngestOptions(
            labels=dict(labels or {}), steps=steps, step_marker=step_marker,
            skip_python=skip_python, force=force, job=job,
        )
        return ingest_paths(
            self.store, paths, options, jobs=jobs, executor=executor, on_result=on_result
        )

    def verify(self) -> VerifyReport:
        """Check that every visible run is complete and every data file is intact."""
        from tracewh.ingest.maintenance import verify

        self.store.require()
        return verify(self.store)

    def compact(self, *, retain_hours: int = 168) -> CompactReport:
        """Store missing fingerprints, remove leftovers, merge small files, vacuum old files.

        Runs ingested before the ``fingerprints`` table existed get theirs first
        (:meth:`backfill_fingerprints`); then leftovers are removed, small files merged and
        files older than ``retain_hours`` vacuumed.
        """
        import dataclasses

        from tracewh.ingest.maintenance import compact

        self.store.require()
        added = self.backfill_fingerprints()
        report = compact(self.store, retain_hours=retain_hours)
        return dataclasses.replace(report, fingerprints_added=added)

    def backfill_fingerprints(self, *, batch: int = 64) -> int:
        """Store the fingerprint of every visible run without one (ingested before them).

        The signature is computed from the run's stored ``gpu_ops``/``events``
        (``run_fingerprints_in``, the ingest's definition; the same value the ingest
        would have stored) and committed with the run's ``ingest_id``, ``batch`` runs
        (of their day partitions) per query and commit; see
        :mod:`tracewh.ingest.backfill` for visibility and concurrency. Until then,
        history commands compute these signatures when they need them.

        Returns
        -------
        int
            How many fingerprints were added (0 when every run has one).
        """
        from tracewh.ingest.backfill import add_fingerprints

        self.store.require()
        missing = self.sql(
            "SELECT r.run_id, r.day FROM runs r "
            "WHERE NOT EXISTS (SELECT 1 FROM fingerprints f WHERE f.run_id = r.run_id) "
            "ORDER BY r.day, r.run_id"
        )
        todo = list(missing.iter_rows())
        added = 0
        for i in range(0, len(todo), batch):
            chunk = todo[i : i + batch]
            rows = self.sql(
                "SELECT * FROM run_fingerprints_in($ids)", {"ids": [r for r, _ in chunk]},
                days={d for _, d in chunk},
            )
            added += add_fingerprints(self.store, rows.to_arrow())
        return added

    # ----------------------------------------------------------------- query
    @contextlib.contextmanager
    def session(self) -> Iterator[Warehouse]:
        """Read one snapshot through one DuckDB connection for the queries inside.

        Inside ``with wh.session():`` every query of this object reads the Delta logs
        once (at entry) and reuses one connection (its Parquet metadata cache too);
        writes made meanwhile are not seen. A report runs its ~20 queries this way.
        Nested sessions reuse the outer one. Queries from other threads (a report runs some
        side by side) each get a connection of their own over the same snapshot, confined
        as the first, kept until the session ends.

        Examples
        --------
        >>> with Warehouse("wh").session() as wh:            # doctest: +SKIP
        ...     top, gaps = wh.kernels(), wh.gaps()
        """
        if self._pinned is not None:
            yield self
            return
        con = connect_catalog()
        stack = contextlib.ExitStack()
        try:
            tables = catalog_tables(con)
            partial = self.store.require(
                tables=[n for n, _ in tables], schema_key=catalog_schema_key(con)
            )
            live = self._guard_log(lambda: self.store.snapshot_live(tables))
            if not live.get("runs"):
                raise EmptyWarehouseError(self.root)
            if self.store.remote:
                con.register_filesystem(self.store.filesystem())
            # the session's queries only read the warehouse: its connection is confined
            # once (sql()/query() need no connection of their own inside a session)
            from tracewh.query.sqlguard import confine
            from tracewh.query.sqllimits import private_temp

            # DuckDB's temporary files: a private folder of the session, removed at its end
            temp = stack.enter_context(private_temp("tracewh-session-"))
            confine(con, allowed=self._allowed_dirs(), temp=temp / "0")
            self._pinned = _Pinned(con, tables, live, partial, views={id(con): {}},
                                   owner=threading.get_ident(), temp=temp)
            yield self
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
        caller closes it. Inside :meth:`session`, it reads the session's snapshot.
        """
        return self._connect(days=days, since=since, own=True)

    def _connect(
        self,
        *,
        days: Collection[date] | None = None,
        since: date | None = None,
        only: str | None = None,
        own: bool = False,
        reuse: bool = False,
    ) -> duckdb.DuckDBPyConnection:
        """The catalog over the snapshot (of table ``only`` alone, the rest left empty).

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
        con = reused or (connect_catalog() if pinned is None or own else self._session_con(pinned))
        try:
            tables = pinned.tables if pinned is not None else catalog_tables(con)
            wanted = tables if only is None else [t for t in tables if t[0] == only]
            partial = self._partial(con, tables)
            if pinned is not None:
                files = select_files({n: pinned.live[n] for n, _ in wanted}, dict(tables),
                                     days=days, since=since)
            else:
                files = self._snapshot(wanted, days=days, since=since)
            if not files.get("runs"):
                raise EmptyWarehouseError(self.root)
            if self.store.remote and (pinned is None or own) and reused is None:
                con.register_filesystem(self.store.filesystem())
            if reused is not None:
                # the previous call's views of the wanted tables go back to the placeholders
                # where the snapshot has no file; the others stay as they are (only
                # _run_conn reuses, and it points every table at its snapshot next)
                files = {n: files.get(n, []) for n, _ in wanted}
            try:
                self._shadow(con, files, reset=(pinned is not None and not own) or reused is not None,
                             partial=partial)
            except duckdb.Error as exc:
                raise WarehouseError(
                    self.root, f"cannot open the tables ({first_line(exc)}); run `tracewh verify`"
                ) from exc
        except BaseException:
            self._release(con)
            raise
        return con

    def _shadow(
        self, con: duckdb.DuckDBPyConnection, files: Mapping[str, Sequence[str]], *,
        reset: bool, partial: Collection[str],
    ) -> None:
        """:func:`shadow_files`; on the session's connection only the tables whose files changed.

        A session's queries mostly read the same day's files again (a report's ~20 queries
        of one run): the session remembers what each ``raw_<table>`` points at, and a view
        is made again only for a different file list (``()``: the empty placeholder).
        """
        pinned = self._pinned
        shadowed = None if pinned is None else pinned.views.get(id(con))
        if shadowed is None or pinned is None:
            shadow_files(con, files, reset=reset, partial=partial)
            return
        wanted = {name: tuple(paths) for name, paths in files.items()}
        changed = {name: list(paths) for name, paths in wanted.items()
                   if shadowed.get(name, ()) != paths}
        if not changed:
            return
        try:
            shadow_files(con, changed, reset=True, partial=partial)
        except BaseException:
            # some views may be made, some not: every one is made again next time
            shadowed.update({name: None for name, _ in pinned.tables})
            raise
        shadowed.update({name: wanted[name] for name in changed})

    def memoized(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """``compute()``; inside :meth:`session` once per ``key`` (its snapshot does not change).

        What the library's analyses that a report asks for more than once share: the run
        set (``runs``, ``changes`` and ``check`` each need it) and the ``series_values``
        of ``changes`` and ``check``. ``key`` must name everything the result depends on
        besides the snapshot; the result is shared, so it must not be modified.
        """
        pinned = self._pinned
        if pinned is None:
            return compute()
        with pinned.lock:
            if key in pinned.memo:
                found: _T = pinned.memo[key]
                return found
        value = compute()  # not under the lock: another thread's queries go on meanwhile
        with pinned.lock:
            result: _T = pinned.memo.setdefault(key, value)
        return result

    @contextlib.contextmanager
    def connection(self, *, days: Collection[date] | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection (as :meth:`connect`) for the library's queries that change its settings.

        What a query under its own DuckDB memory limit runs on (:mod:`tracewh.analysis.memory`).
        Outside a session, a new connection, closed at the end. Inside :meth:`session`,
        one connection kept for the whole session (not the session's confined one, whose
        settings are locked; one per thread), its views re-pointed only where ``days``
        changes the files.
        """
        pinned = self._pinned
        if pinned is None:
            con = self._connect(days=days, own=True)
            try:
                yield con
            finally:
                con.close()
            return
        me = threading.get_ident()
        with pinned.lock:
            aux = pinned.aux.get(me)
        if aux is None:
            aux = connect_catalog()
            if self.store.remote:
                aux.register_filesystem(self.store.filesystem())
            with pinned.lock:
                pinned.views[id(aux)] = {}
                pinned.aux[me] = aux
        files = select_files({n: pinned.live[n] for n, _ in pinned.tables}, dict(pinned.tables),
                             days=days, since=None)
        try:
            self._shadow(aux, files, reset=True, partial=pinned.partial)
        except duckdb.Error as exc:
            raise WarehouseError(
                self.root, f"cannot open the tables ({first_line(exc)}); run `tracewh verify`"
            ) from exc
        yield aux

    def _partial(self, con: duckdb.DuckDBPyConnection, tables: list[TableInfo]) -> frozenset[str]:
        """The tables to read by column name (older files lack columns): the session's, or
        from :meth:`Store.require` (which brings an older warehouse up to date)."""
        if self._pinned is not None:
            return self._pinned.partial
        return self.store.require(
            tables=[n for n, _ in tables], schema_key=catalog_schema_key(con)
        )

    def _session_con(self, pinned: _Pinned) -> duckdb.DuckDBPyConnection:
        """The session's connection of the calling thread (made, confined, on first use)."""
        me = threading.get_ident()
        if me == pinned.owner:
            return pinned.con
        with pinned.lock:
            con = pinned.threads.get(me)
        if con is not None:
            return con
        from tracewh.query.sqlguard import confine

        con = connect_catalog()
        try:
            if self.store.remote:
                con.register_filesystem(self.store.filesystem())
            # each connection spills into a folder of its own inside the session's
            confine(con, allowed=self._allowed_dirs(), temp=pinned.temp / str(me))
        except BaseException:
            con.close()
            raise
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
    def _conn(self, *, reuse: bool = False, **kwargs: Any) -> Iterator[duckdb.DuckDBPyConnection]:
        """A catalog connection for one call; ``reuse``: for the library's fixed queries only
        (a user's SQL gets a fresh connection: whatever it sets or creates goes with it)."""
        con = self._connect(reuse=reuse, **kwargs)
        try:
            yield con
        finally:
            if reuse and self._pinned is None:
                self._give_back(con)
            else:
                self._release(con)

    def _guard_log(self, read: Callable[[], _T]) -> _T:
        try:
            return read()
        except WarehouseError:
            raise
        except Exception as exc:  # delta-rs errors reading the log
            raise WarehouseError(self.root, f"cannot read the table log: {exc}") from exc

    def _snapshot(
        self, tables: list[TableInfo], *, days: Collection[date] | None, since: date | None
    ) -> dict[str, list[str]]:
        if self._pinned is not None:
            return select_files({n: self._pinned.live[n] for n, _ in tables},
                                dict(self._pinned.tables), days=days, since=since)
        return self._guard_log(
            lambda: self.store.snapshot_files(days=days, since=since, tables=tables)
        )

    def sql(
        self,
        query: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        *,
        days: Collection[date] | None = None,
        since: date | None = None,
        unrestricted: bool = False,
        limits: QueryLimits | None = None,
    ) -> pl.DataFrame:
        """Run a read-only SQL query over the warehouse views; a :class:`polars.DataFrame`.

        ``days`` restricts the run tables to those partitions, ``since`` to the
        partitions of that day or later (see :meth:`connect`). The query may only
        read (``SELECT`` and the like, see :mod:`tracewh.query.sqlguard`) and only the
        warehouse's files; ``unrestricted=True`` lifts both (any statement, any file
        this user can reach: it can damage the warehouse). ``limits`` bound its time,
        memory and spill space, and let Ctrl-C stop it (:mod:`tracewh.query.sqllimits`); DuckDB's
        temporary files go to a private folder removed afterwards either way.
        """
        from tracewh.query.sqlguard import user_query

        query = user_query(query)  # SHOW TABLES: each name once (sql/99_catalog.sql)
        with self._bounded(query, days=days, since=since, unrestricted=unrestricted,
                           limits=limits) as (con, run):
            return run(lambda: fetch_frame(con, query, params))

    def query(
        self,
        query: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        *,
        days: Collection[date] | None = None,
        since: date | None = None,
        unrestricted: bool = False,
        limits: QueryLimits | None = None,
    ) -> Rows:
        """Like :meth:`sql`, but the result as plain :class:`Rows` (no Polars is imported).

        For callers that print or iterate over a result: a command's start stays
        that of Python and DuckDB.
        """
        from tracewh.query.sqlguard import user_query

        query = user_query(query)  # SHOW TABLES: each name once (sql/99_catalog.sql)
        with self._bounded(query, days=days, since=since, unrestricted=unrestricted,
                           limits=limits) as (con, run):
            return run(lambda: fetch_rows(con, query, params))

    @contextlib.contextmanager
    def _bounded(
        self, query: str, *, days: Collection[date] | None, since: date | None,
        unrestricted: bool, limits: QueryLimits | None,
    ) -> Iterator[tuple[duckdb.DuckDBPyConnection, Callable[[Callable[[], _T]], _T]]]:
        """The connection a user's query runs on (guarded, its spill folder private) and
        how to run it (bounded by ``limits``); the folder is removed after the connection."""
        from tracewh.query.sqllimits import apply_limits, private_temp, run_limited

        with private_temp() as temp, \
                self._conn(days=days, since=since, own=self._own(unrestricted)) as con:
            session = self._pinned is not None and self._pinned.holds(con)
            if not unrestricted:
                self._guard(con, query, temp=temp, limits=limits)
            elif not session:
                apply_limits(con, limits, temp)

            def run(fetch: Callable[[], _T]) -> _T:
                return fetch() if limits is None else run_limited(con, query, fetch, limits)

            yield con, run

    def _own(self, unrestricted: bool) -> bool:
        """Whether a query needs a connection of its own: an unrestricted one in a session
        (the session's connection is confined)."""
        return unrestricted and self._pinned is not None

    def _guard(
        self, con: duckdb.DuckDBPyConnection, query: str, *, temp: Path,
        limits: QueryLimits | None = None,
    ) -> None:
        """Refuse ``query`` unless it only reads; confine ``con`` to the warehouse's tables
        (after the views are bound to the snapshot; the setting is locked), its spill folder
        ``temp`` and its ``limits``, unless it is the session's, confined already."""
        from tracewh.query.sqlguard import check_read_only, confine

        check_read_only(con, query)
        if self._pinned is None or not self._pinned.holds(con):
            confine(con, allowed=self._allowed_dirs(), temp=temp, limits=limits)

    def _allowed_dirs(self) -> list[str]:
        """The folders a confined query may read: the tables (and their object-store URL)."""
        from tracewh.core.sqlfiles import glob_escaped

        tables = f"{self.root}/tables/" if self.store.remote else str(self.store.tables_dir) + os.sep
        # DuckDB checks the path as written in the query: the snapshot's paths are written
        # with their glob characters escaped (tracewh.core.sqlfiles.glob_escaped)
        return sorted({tables, glob_escaped(tables)})

    def scan(self, table: str) -> pl.LazyFrame:
        """A table's visible rows as a :class:`polars.LazyFrame` (read from Delta natively)."""

        from tracewh.schema.arrow import TABLES

        if table not in TABLES:
            raise UsageError(f"unknown table {table!r} (tables: {', '.join(TABLES)})")
        self.store.require()
        # the snapshot's Parquet files, not pl.scan_delta: that goes through delta-rs's
        # pyarrow dataset, after which the process may abort at exit (pola-rs/polars#24169)
        runs = self._scan_files("runs").select("run_id", "ingest_id")
        frame = self._scan_files(table)
        if not TABLES[table].is_run_child:
            return frame
        return frame.join(runs, on=["run_id", "ingest_id"], how="semi")

    def _scan_files(self, table: str) -> pl.LazyFrame:
        """A LazyFrame over the current snapshot's files of ``table``, typed as schema.py says.

        Inside a :meth:`session`, the session's snapshot.
        """
        import polars as pl

        from tracewh.schema.arrow import TABLES

        spec = TABLES[table]
        schema = pl.Schema(pl.DataFrame(spec.schema.empty_table()).schema)
        if self._pinned is not None:
            files = [path for path, _ in self._pinned.live.get(table, [])]
        else:
            files = self.store.file_uris(table)
        if not files:
            return pl.LazyFrame(schema=schema)
        # no hive partitioning (it would read every key=value folder of the whole path):
        # the partition value comes from the file's own folder name
        # files written before a column was added (schema.ADDED_COLUMNS) lack it: NULL there
        frame = pl.scan_parquet(
            files, hive_partitioning=False, include_file_paths="__file",
            storage_options=self.store.options, missing_columns="insert",
        )
        day = pl.col("__file").str.extract(r"/day=(\d{4}-\d{2}-\d{2})/[^/]*$", 1)
        return frame.select([
            (day.str.to_date() if c in spec.partition_by else pl.col(c)).cast(t).alias(c)
            for c, t in schema.items()
        ])

    def runs(self, *, where: Mapping[str, str] | None = None) -> pl.DataFrame:
        """Every visible run, latest first, optionally filtered by labels/fields.

        Latest first: the runs of the latest ``tracewh ingest`` command first (``ingested_at``
        descending), each command's runs by trace start descending, then rank (the order
        ``latest`` resolves by, see :mod:`tracewh.query.runsel`).

        Besides the ``runs`` columns: ``workload`` (the labels that name it, or ``fp:...``
        from the trace's fingerprint; see :mod:`tracewh.history.workload`),
        ``workload_by`` (``labels`` | ``fingerprint`` | ``none``), ``unusable`` (why the
        run stays out of baselines, see :mod:`tracewh.history.health`; NULL when usable).
        """
        from tracewh.history import alerts as _alerts

        clauses, params = where_clause(where or {})
        df = self._runs_query(
            f"SELECT * EXCLUDE (metadata_json) FROM runs WHERE {clauses} ORDER BY {LATEST_FIRST}",
            params,
        )
        rs = _alerts.run_set(self, include_unusable=True)
        extra = rs.runs.select("run_id", "workload", "workload_by").join(
            rs.excluded.rename({"reasons": "unusable"}), on="run_id", how="left"
        )
        return df.join(extra, on="run_id", how="left", maintain_order="left")

    def run_table(self) -> pl.DataFrame:
        """Every visible run (all ``runs`` columns but ``metadata_json``) with ``minhash``.

        ``minhash`` is the run's fingerprint signature (``fingerprints`` table; NULL for a
        run ingested before fingerprints existed).
        """
        with self._conn() as con:
            return fetch_frame(
                con,
                "SELECT r.* EXCLUDE (metadata_json), f.minhash FROM runs r "
                "LEFT JOIN fingerprints f USING (run_id)",
            )

    def _runs_query(self, query: str, params: Mapping[str, Any]) -> pl.DataFrame:
        """A query over ``runs`` alone: no other table's log is read, no view is bound."""
        with self._conn(only="runs") as con:
            return fetch_frame(con, query, params)

    # ------------------------------------------------------------- selectors
    def resolve_run(self, selector: RunSelector = "latest") -> RunRef:
        """Resolve a run selector to one run (see :mod:`tracewh.query.runsel`).

        ``latest``, a run_id prefix, ``KEY=VALUE`` (label or run field), or several terms
        (``"model=x,rank=0"`` or a list), all of which the run must match. Several matches
        resolve to the latest of them (latest ingest, then latest trace start, then lowest
        rank); the returned :class:`RunRef` says how many matched (``matched``) and which
        (``others``). A run_id prefix matching several runs is an error (ambiguous). A
        :class:`RunRef` is returned as it is.

        Raises
        ------
        RunNotFoundError
            Nothing matches (the message lists the values the selector's keys have), or an
            ambiguous run_id prefix.
        EmptyWarehouseError
            The warehouse has no run.
        UsageError
            A malformed selector term.
        """
        if isinstance(selector, RunRef):
            return selector
        with self._conn(only="runs") as con:
            return self._resolve(con, selector)

    def _resolve(self, con: duckdb.DuckDBPyConnection, selector: RunSelector) -> RunRef:
        """:meth:`resolve_run` on a connection whose ``runs`` is the snapshot's."""
        if isinstance(selector, RunRef):
            return selector
        terms = parse_selector(selector)
        text = canonical(selector)
        found = fetch_rows(
            con,
            "SELECT run_id, day, job, rank, world_size, file_name, start_ns, device_name, "
            "labels_json FROM run_matches($sel) ORDER BY pos",
            {"sel": sql_selector(selector)},
        ).rows
        if not found:
            if not terms or all(t.kind == "latest" for t in terms):
                raise EmptyWarehouseError(self.root)
            raise RunNotFoundError(text, self._no_match_reason(con, terms))
        ids = [str(r[0]) for r in found]
        if len(ids) > 1 and has_prefix(terms):
            raise RunNotFoundError(
                text, f"is ambiguous: matches {len(ids)} runs ({', '.join(ids[:5])})"
            )
        run_id, day, job, rank, world_size, file_name, start_ns, device, labels_json = found[0]
        try:
            labels = json.loads(labels_json) if labels_json else {}
        except ValueError:
            labels = {}
        return RunRef(
            run_id, day, job, rank, file_name=file_name, start_ns=start_ns,
            labels=labels if isinstance(labels, dict) else {}, device_name=device or None,
            world_size=world_size, selector=text, matched=len(ids), others=tuple(ids[1:6]),
        )  # fmt: skip

    def _no_match_reason(self, con: duckdb.DuckDBPyConnection, terms: Sequence[Term]) -> str:
        """Why a selector matched nothing: the values its keys have."""
        hints: list[str] = []
        for t in [t for t in terms if t.kind == "key"][:3]:
            values = _label_values(con, t.key or "")
            if values:
                more = ", ..." if len(values) > 8 else ""
                hints.append(f"{t.key} has {', '.join(repr(v) for v in values[:8])}{more}")
            else:
                hints.append(f"no run has a label or field {t.key!r}")
        return "matches no run" + (f" ({'; '.join(hints)})" if hints else "")

    def label_values(self, key: str) -> list[str]:
        """The distinct values of label or run field ``key`` over the visible runs, sorted."""
        with self._conn(only="runs") as con:
            return _label_values(con, key)

    def values(
        self, run: RunSelector, column: str, *, table: str = "gpu_ops", limit: int = 20
    ) -> list[tuple[Any, int]]:
        """The most frequent values of ``table.column`` in a run, with their row counts.

        What a filter could have matched, for saying so when it matched nothing (``--cat
        Kernel`` when the run's GPU ops have ``kernel``).
        """
        from tracewh.schema.arrow import TABLES

        spec = TABLES.get(table)
        if spec is None or not spec.is_run_child or column not in spec.schema.names:
            raise UsageError(f"no column {column!r} in a run table {table!r}")
        query = (f'SELECT "{column}" AS value, count(*) AS rows FROM {table} WHERE run_id = $id '
                 f"GROUP BY 1 ORDER BY rows DESC, value NULLS LAST LIMIT {int(limit)}")
        with self._run_conn(run) as (con, ref):
            return [(r[0], int(r[1])) for r in fetch_rows(con, query, {"id": ref.run_id}).rows]

    def run_row(self, run: RunSelector) -> dict[str, Any]:
        """The ``runs`` row of a run (all columns but ``metadata_json``) as a dict."""
        with self._conn(only="runs") as con:
            ref = self._resolve(con, run)
            got = fetch_rows(
                con, "SELECT * EXCLUDE (metadata_json) FROM runs WHERE run_id = $id",
                {"id": ref.run_id},
            )
        return dict(zip(got.columns, got.rows[0], strict=True)) if got.rows else {"run_id": ref.run_id}

    # -------------------------------------------------------------- analyses
    @contextlib.contextmanager
    def _run_conn(
        self, run: RunSelector, *, graphs: bool = False
    ) -> Iterator[tuple[duckdb.DuckDBPyConnection, RunRef]]:
        """One connection for one run: ``runs`` read and the run resolved, then its day's files.

        ``runs`` is read before the child tables (so every child row of a run it
        lists is in their snapshots), and only once. ``graphs``: for an analysis that maps
        CUDA/HIP graph replays to their captures (``sql/45_graphs.sql``), a replay run's
        connection also holds the days of its job's capture and replay runs.
        """
        with self._conn(only="runs", reuse=True) as con:
            ref = self._resolve(con, run)
            tables = [t for t in catalog_tables(con) if t[0] != "runs"]
            days = {ref.day}
            if graphs:  # a replay's captures may be on another day than the replay
                days |= {r[0] for r in con.execute(
                    "SELECT DISTINCT day FROM runs WHERE job = $job AND kind IN ('capture', 'replay') "
                    "AND (SELECT kind FROM runs WHERE run_id = $run) = 'replay'",
                    {"job": ref.job, "run": ref.run_id}).fetchall()}
            files = self._snapshot(tables, days=days, since=None)
            # reset: a connection kept from a previous call (or the session's) has views
            # of other files; every table is pointed at this snapshot
            self._shadow(con, files, reset=True, partial=self._partial(con, catalog_tables(con)))
            yield con, ref

    def macro(self, name: str, run: RunSelector = "latest", /, **params: Any) -> pl.DataFrame:
        """Call a per-run table macro of ``sql/`` (e.g. ``stream_gaps``) for a run."""
        query, values = _macro_sql(name, params)
        with self._run_conn(run, graphs=name in macros.GRAPH_MACROS) as (con, ref):
            return fetch_frame(con, query, {"first": ref.run_id, **values})

    def macro_rows(self, name: str, run: RunSelector = "latest", /, **params: Any) -> Rows:
        """:meth:`macro` as plain :class:`Rows` (no Polars): what a printing command needs."""
        return self.run_macro(name, run, rows=True, **params)[1]  # type: ignore[return-value]

    def run_macro(
        self, name: str, run: RunSelector = "latest", /, *, rows: bool = False, **params: Any
    ) -> tuple[RunRef, pl.DataFrame | Rows]:
        """The resolved run and its macro's result, in one connection (``runs`` read once).

        What a command printing a run's table needs: the :class:`RunRef` names the run in
        the title, the result is plain :class:`Rows` with ``rows`` (no Polars), else a frame.
        """
        query, values = _macro_sql(name, params)
        with self._run_conn(run, graphs=name in macros.GRAPH_MACROS) as (con, ref):
            args = {"first": ref.run_id, **values}
            return ref, (fetch_rows(con, query, args) if rows else fetch_frame(con, query, args))

    def call(
        self, name: str, first: Any, /, *, days: Collection[date] | None = None, **params: Any
    ) -> pl.DataFrame:
        """``SELECT * FROM name(first, key := value, ...)`` with values as parameters."""
        query, values = _macro_sql(name, params)
        return self.sql(query, {"first": first, **values}, days=days)

    def _analysis(self, call: macros.MacroCall, run: RunSelector) -> pl.DataFrame:
        return self.macro(call.name, run, **call.params)

    def kernels(
        self,
        run: RunSelector = "latest",
        *,
        cats: Sequence[str] | None = None,
        group_by: str = "name",
        by: str = "total",
        top: int | None = None,
    ) -> pl.DataFrame:
        """Kernel ranking of a run (see ``sql/10_kernels.sql``)."""
        df = self._analysis(macros.kernels(cats=cats, group_by=group_by, by=by), run)
        return df.head(top) if top else df

    def gaps(self, run: RunSelector = "latest", *, threshold_ns: int = 30_000) -> pl.DataFrame:
        """Stream gaps and idle breakdown per (device, stream) (``stream_gaps``)."""
        return self._analysis(macros.gaps(threshold_ns=threshold_ns), run)

    def largest_gaps(
        self, run: RunSelector = "latest", *, n: int = 20, threshold_ns: int = 30_000
    ) -> pl.DataFrame:
        """The ``n`` largest gaps with the ops on either side (``largest_gaps``)."""
        return self._analysis(macros.largest_gaps(n=n, threshold_ns=threshold_ns), run)

    def idle_breakdown(self, run: RunSelector = "latest", *, threshold_ns: int = 30_000) -> pl.DataFrame:
        """Idle time by kind per stream and per device (``idle_breakdown``)."""
        return self._analysis(macros.idle_breakdown(threshold_ns=threshold_ns), run)

    def launches(self, run: RunSelector = "latest", *, by: str = "kernel") -> pl.DataFrame:
        """Launch latency per kernel name, per step, per launch, the linkage, or per graph launch.

        A CUDA/HIP graph launch counts once, measured to its first replayed op; ``by="graph"``
        lists the graph launches with the capture each maps to (``graph_launches``).
        """
        return self._analysis(macros.launches(by=by), run)

    def queue_depth(self, run: RunSelector = "latest") -> pl.DataFrame:
        """Outstanding GPU ops per stream over time (``queue_depth``)."""
        return self._analysis(macros.queue_depth(), run)

    def steps(self, run: RunSelector = "latest", *, threshold_ns: int = 30_000) -> pl.DataFrame:
        """Per step, by launch: wall, GPU busy/idle/tail, idle parts, top kernel (``step_summary``)."""
        return self._analysis(macros.steps(threshold_ns=threshold_ns), run)

    def ops(self, run: RunSelector = "latest", *, cpu: bool = False) -> pl.DataFrame:
        """GPU time per CPU operator and input shapes, or CPU-side op time with ``cpu``."""
        return self._analysis(macros.ops(cpu=cpu), run)

    def modules(
        self, run: RunSelector = "latest", *, depth: int | None = None, top: int | None = None
    ) -> pl.DataFrame:
        """GPU time per nn.Module as a tree (``module_tree`` of ``sql/55_modules.sql``).

        Parameters
        ----------
        run
            A run selector.
        depth
            Cut module paths after ``depth`` names (None: full paths).
        top
            Keep the ``top`` nodes of largest GPU time (with their ancestors).

        Returns
        -------
        polars.DataFrame
            One row per node, depth first: module_path, name, depth, calls, kernels,
            gpu_ns (inclusive), self_gpu_ns, pct.
        """
        return self._analysis(macros.modules(depth=depth, top=top), run)

    def annotations(
        self,
        run: RunSelector = "latest",
        *,
        gpu: bool = False,
        depth: int | None = None,
        top: int | None = None,
    ) -> pl.DataFrame:
        """GPU time per user annotation as a tree (``annotation_tree``, ``sql/56_annotations.sql``).

        ``gpu=False``: the ``user_annotation`` spans (``record_function``) enclosing each
        kernel's launch on its thread; ``gpu=True``: the ``gpu_user_annotation`` spans
        enclosing each kernel's start on its GPU track. ``depth`` and ``top`` as in
        :meth:`modules`. Columns: annotation_path, name, depth, calls, kernels, gpu_ns
        (inclusive), self_gpu_ns, pct.
        """
        return self._analysis(macros.annotation_tree(gpu=gpu, depth=depth, top=top), run)

    def graph_launches(self, run: RunSelector = "latest") -> pl.DataFrame:
        """One row per CUDA/HIP graph launch: its ops, latency, the capture it maps to."""
        return self._analysis(macros.launches(by="graph"), run)

    def graph_match(self, run: RunSelector = "latest") -> dict[str, Any]:
        """How the run's graph replays map to captures, one row as a dict (``graph_match``).

        ``tracewh.query.graphalign.match_note`` turns it into the line screens print beside
        capture-derived attribution.
        """
        rows = self.macro_rows(macros.graph_match().name, run)
        return dict(zip(rows.columns, rows.rows[0], strict=True))

    def memcpy(self, run: RunSelector = "latest") -> pl.DataFrame:
        """Memory copies per kind: count, bytes, time, GB/s (``memcpy_summary``)."""
        return self._analysis(macros.memcpy(), run)

    def breakdown(self, run: RunSelector = "latest") -> pl.DataFrame:
        """GPU time per device: compute, communication, memcpy, idle (``gpu_time_breakdown``)."""
        return self._analysis(macros.breakdown(), run)

    def memory(
        self,
        run: RunSelector = "latest",
        *,
        view: str = "summary",
        device: str | None = None,
        top: int | None = None,
        buckets: int = 1000,
        memory_limit: int = _mem.QUERY_MEMORY_LIMIT,
    ) -> pl.DataFrame:
        """Device memory of a run: peak, who holds it, steps, leaks, timeline (``sql/65_memory.sql``).

        ``view`` is ``summary``, ``peak``, ``allocations``, ``steps``, ``leaks`` or
        ``timeline``; ``device`` keeps ``cpu``, ``gpu``, a device id or a name such as
        ``cuda:0``; the query runs under DuckDB's ``memory_limit`` (bytes, spilling beyond
        it); see :func:`tracewh.analysis.memory.memory`.
        """
        return _mem.memory(self, run, view=view, device=device, top=top, buckets=buckets,
                           memory_limit=memory_limit)

    def ranks(
        self, job: str | None = None, *, view: str = "imbalance", run: RunSelector | None = None
    ) -> pl.DataFrame:
        """Multi-rank comparison within one job instance.

        The instance is the ranks of one distributed job: runs of one ``job`` and workload
        with distinct ranks (:mod:`tracewh.history.workload`), so unrelated traces that
        share a folder are never compared as ranks. ``run`` (a selector) picks the instance
        of that run; else ``job`` (a job name or a run selector) picks the latest instance
        of that job; neither: the latest run's. ``view`` is ``imbalance``, ``kernels`` or
        ``stragglers`` (``rank_*`` of ``sql/80_ranks.sql``: a straggler stands above its
        peers' median by more than 3 x 1.4826 x their MAD and 2%).
        """
        macros.check_choice("view", view, ("imbalance", "kernels", "stragglers"))
        ids = self.rank_runs(job, run=run)
        return self.call(f"rank_{view}", ids)

    def job_runs(self, runs: Sequence[RunSelector] = ()) -> list[str]:
        """The runs of a multi-rank question: one selector (or none: ``latest``) gives the job
        instance of that run (:meth:`rank_runs`); several give exactly those runs, which
        must be distinct ranks. Lowest rank first."""
        if len(runs) <= 1:
            return self.rank_runs(run=runs[0] if runs else "latest")
        refs = [self.resolve_run(r) for r in runs]
        ranks = [r.rank for r in refs if r.rank is not None]
        if len(set(ranks)) < len(ranks) or len({r.run_id for r in refs}) < len(refs):
            raise UsageError("the runs given must be distinct ranks of one job")
        return [r.run_id for r in sorted(refs, key=lambda r: (r.rank is None, r.rank or 0))]

    def collectives(
        self,
        runs: Sequence[RunSelector] = (),
        *,
        by: str = "collective",
        link: str | None = None,
        link_peak_gbps: float | None = None,
    ) -> pl.DataFrame:
        """Collectives matched across the ranks of a job, largest wait first.

        ``by="collective"``: one row per (process group, sequence) with skew_ns, last_rank,
        comm_ns, algbw_gbps, busbw_gbps, wait_ns and pct_of_link_peak (``collective_matches``
        of ``sql/79_collectives.sql``; links: ``sql/79_link_peaks.sql``, or ``link`` /
        ``link_peak_gbps``); ``by="rank"``: one row per rank with collectives, late and its
        own wait_ns (``collective_rank_waits``). ``runs``: see :meth:`job_runs`.

        Examples
        --------
        >>> Warehouse("wh").collectives(["latest"], by="rank")  # doctest: +SKIP
        """
        from tracewh.analysis import collectives as _coll

        if by not in _coll.BY:
            raise UsageError(f"--by must be one of {', '.join(_coll.BY)}, not {by!r}")
        ids = self.job_runs(runs)
        if by == "rank":
            return _coll.shape(_coll.by_wait(self.call("collective_rank_waits", ids)), by)
        matches = self.call("collective_matches", ids)
        info = self.sql(
            "SELECT rank, host, device_name FROM runs WHERE list_contains($ids, run_id)",
            {"ids": ids},
        )
        peaks = self.sql("SELECT * FROM link_peaks")
        out = _coll.with_link_peak(matches, info, peaks, link=link, link_peak_gbps=link_peak_gbps)
        return _coll.shape(_coll.by_wait(out), by)

    def critical_path(
        self,
        run: RunSelector = "latest",
        *,
        step: int | None = None,
        data_loading: Sequence[str] = (),
    ) -> _cp.CriticalPath:
        """The critical path of a run, or of its step ``step`` (``ProfilerStep#N``).

        HTA's event graph and classification (:mod:`tracewh.analysis.critical_path`) over the
        rows of ``sql/83_critical_path.sql``; the window of a step takes the CPU events that
        start in it and the GPU ops launched in it. ``data_loading``: regular expressions of
        CPU events whose time counts as ``data_loading``.

        Examples
        --------
        >>> Warehouse("wh").critical_path("latest", step=3).by_bound  # doctest: +SKIP
        """
        from tracewh.analysis import critical_path as cp

        ref = self.resolve_run(run)
        lo = hi = None
        if step is not None:
            win = self.call("cp_step_window", ref.run_id, step=step)
            if win.is_empty():
                steps = self.sql("SELECT DISTINCT step FROM steps WHERE run_id = $r ORDER BY step",
                                 {"r": ref.run_id})["step"].to_list()
                shown = ", ".join(map(str, steps[:10])) + (" ..." if len(steps) > 10 else "")
                raise UsageError(f"run {ref.run_id[:16]} has no step {step} "
                                 f"(steps: {shown or 'none'})")
            lo, hi = int(win["lo_ns"][0]), int(win["hi_ns"][0])
        with self.session():
            rows = [
                self.call("cp_cpu", ref.run_id, lo_ns=lo, hi_ns=hi, loading=list(data_loading)),
                self.call("cp_gpu", ref.run_id, lo_ns=lo, hi_ns=hi),
                self.call("cp_sync", ref.run_id, lo_ns=lo, hi_ns=hi),
            ]
            merge = self.call("cp_thread_merge", ref.run_id, lo_ns=lo, hi_ns=hi)
            path = cp.critical_path(*rows, merge_tids=dict(zip(
                merge["from_tid"].to_list(), merge["to_tid"].to_list(), strict=True)))
            del rows
            names = self.call("cp_names", ref.run_id, lo_ns=lo, hi_ns=hi)
        path = cp.with_names(path, names)
        path.extra.update(run_id=ref.run_id, rank=ref.rank, step=step, lo_ns=lo, hi_ns=hi)
        ranks = self.rank_runs(run=ref)
        if len(ranks) > 1:  # the other ranks of its job: whom its collectives waited for
            path.extra["cross_rank"] = cp.cross_rank(
                path, self.call("collective_holdups", ranks, run_id=ref.run_id))
        return path

    def critical_path_steps(
        self, run: RunSelector = "latest", *, data_loading: Sequence[str] = ()
    ) -> pl.DataFrame:
        """The critical path of every step of a run: one row per step (``ProfilerStep#N``).

        Columns: ``step``, ``total_ns`` and one ``*_ns`` column per bound of
        :data:`tracewh.analysis.critical_path.BOUNDS` (``cpu_bound_ns``, ...), summing to it.
        """
        import polars as pl

        from tracewh.analysis import critical_path as cp

        ref = self.resolve_run(run)
        steps = self.sql("SELECT DISTINCT step FROM steps WHERE run_id = $r ORDER BY step",
                         {"r": ref.run_id})["step"].to_list()
        rows = []
        with self.session():
            for n in steps:
                path = self.critical_path(ref, step=int(n), data_loading=data_loading)
                rows.append({"step": int(n), "total_ns": path.total_ns,
                             **{f"{b}_ns": path.by_bound[b] for b in cp.BOUNDS}})
        schema = {"step": pl.Int64, "total_ns": pl.Int64, **{f"{b}_ns": pl.Int64 for b in cp.BOUNDS}}
        return pl.DataFrame(rows, schema=schema)

    def rank_runs(self, job: str | None = None, *, run: RunSelector | None = None) -> list[str]:
        """The run ids of a job instance (see :meth:`ranks`), lowest rank first."""
        if run is not None:
            ref = self.resolve_run(run)
        elif job is None or job in ("", "latest"):
            ref = self.resolve_run("latest")
        elif "=" in job:
            ref = self.resolve_run(job)
        else:
            hits = self._runs_query(
                f"SELECT run_id FROM runs WHERE job = $j ORDER BY {LATEST_FIRST}",
                {"j": job},
            )
            ref = self.resolve_run(hits["run_id"][0] if hits.height else job)
        import polars as pl

        from tracewh.history import alerts as _alerts

        rs = _alerts.run_set(self, include_unusable=True).runs
        inst = rs.filter(pl.col("run_id") == ref.run_id)["instance"].to_list()
        return (
            rs.filter(pl.col("instance").is_in(inst)).sort("rank", nulls_last=True)["run_id"]
            .to_list()
        )  # fmt: skip

    def roofline(
        self,
        run: RunSelector = "latest",
        *,
        op: str | None = None,
        top: int | None = None,
        peak_tflops: _roof.PeakTflops | None = None,
        peak_tbs: float | None = None,
    ) -> pl.DataFrame:
        """FLOPs, bytes, achieved TFLOP/s and TB/s per CPU operator and shapes, against the peaks.

        One row per (operator, Input Dims, dtype, params): calls, flops and bytes per call,
        gpu_ns, tflops_per_s, tb_per_s, intensity, pct_of_peak, bound, non_contiguous, ...
        (``roofline`` of ``sql/78_roofline.sql``), by GPU time. ``op`` keeps operator names
        matching a glob or substring; ``peak_tflops`` (a number, or numbers by roof label
        such as ``{"bf16": 989}``) and ``peak_tbs`` replace the device table's peaks.

        Examples
        --------
        >>> Warehouse("wh").roofline("latest", op="addmm", top=5)  # doctest: +SKIP
        """
        from tracewh.analysis import roofline as _roof

        return _roof.roofline(
            self, run, op=op, top=top, peak_tflops=peak_tflops, peak_tbs=peak_tbs
        )

    def roofline_history(
        self,
        *,
        op: str | None = None,
        since: str | date | None = None,
        where: Mapping[str, str] | None = None,
        peak_tflops: _roof.PeakTflops | None = None,
        peak_tbs: float | None = None,
    ) -> pl.DataFrame:
        """Achieved TFLOP/s and TB/s of the matched operators, one row per run (oldest first).

        ``roofline_history`` of ``sql/78_roofline.sql``: calls, gpu_ns, total flops and
        bytes, tflops_per_s, tb_per_s and the GPU-time-weighted pct_of_peak of the modelled
        operators whose name matches ``op``, for runs of day ``since`` or later with the
        labels/fields ``where``.
        """
        from tracewh.analysis import roofline as _roof

        return _roof.roofline_history(
            self, op=op, since=str(since) if isinstance(since, date) else since, where=where,
            peak_tflops=peak_tflops, peak_tbs=peak_tbs,
        )

    # --------------------------------------------------------------- history
    def diff(
        self, a: RunSelector, b: RunSelector, *, level: str = "kernel", tolerance: float = 0.05
    ) -> pl.DataFrame:
        """Compare runs ``a`` and ``b`` (selectors) per kernel, short name, category or op.

        Per group: calls, calls and time per step and mean duration in A and in B, the
        delta per step, the ratio B/A and a status (added, removed, slower, faster,
        unchanged within ``tolerance``), by absolute impact (``run_diff`` of
        ``sql/91_diff.sql``). Compare by ``op`` (CPU operator and input shapes),
        ``short_name`` or ``category`` when kernel names differ (e.g. an NVIDIA run against
        an AMD run).

        Examples
        --------
        >>> Warehouse("wh").diff("night=2025-01-01", "latest", level="category")  # doctest: +SKIP
        """
        from tracewh.history import series as _hist

        return _hist.diff(self, a, b, level=level, tolerance=tolerance)

    def compare(self, a: RunSelector, b: RunSelector) -> pl.DataFrame:
        """Run-level metrics of runs ``a`` and ``b`` side by side (``run_compare``).

        Step time, GPU op, busy and idle time per step, idle breakdown per step, GPU busy
        and idle fractions: one row per metric with ``value_a``, ``value_b``, ``delta``,
        ``ratio``.
        """
        from tracewh.history import series as _hist

        return _hist.compare(self, a, b)

    def history(
        self,
        *,
        kernel: str | None = None,
        category: str | None = None,
        since: str | date | None = None,
        where: Mapping[str, str] | None = None,
        kernel_key: str | None = None,
    ) -> pl.DataFrame:
        """Time series, one row per run (oldest first), of step time, idle fraction and ops.

        Parameters
        ----------
        kernel
            Pattern on GPU op names or short names (case-insensitive; glob with ``*?[``,
            else substring).
        category
            A kernel category (``gemm``, ``attention``, ...). Neither: every GPU op.
        since
            ``90d``, ``12w`` (before today, UTC) or a date: runs of that day or later.
        where
            Labels or run fields the runs must have (``{"model": "dit-xl-2"}``).
        kernel_key
            A kernel key (``kernel_keys`` view; the ``key`` of a kernel change): every op
            name under it, so a kernel renamed by recompiles stays one series.

        Returns
        -------
        polars.DataFrame
            ``metric_history`` rows: day, start_ns, run_id, job, rank, labels_json,
            n_steps, step_ns, gpu_idle_fraction, kernels, calls, calls_per_step,
            time_per_step_ns, mean_ns.
        """
        from tracewh.history import series as _hist

        return _hist.history(self, kernel=kernel, category=category, since=since, where=where,
                             kernel_key=kernel_key)  # fmt: skip

    def changes(
        self,
        *,
        since: str | date | None = "90d",
        kernel: str | None = None,
        category: str | None = None,
        module: str | None = None,
        op: str | None = None,
        where: Mapping[str, str] | None = None,
        alpha: float | None = None,
        min_change: float = 0.0,
        min_ms: float = 0.1,
        floor_ms: float = 0.01,
        keys: Sequence[str] | None = None,
        include_unusable: bool = False,
    ) -> _alerts.ChangesReport:
        """Change points over the whole history of every comparable series.

        Each series is one metric (step time, GPU idle fraction, each category, each kernel
        key and top-level module, per step) over the comparable runs of one workload,
        device, backend, rank and world size, oldest first. Change points come from
        E-divisive means with a t-test corrected for the search, the runs' own step spread
        as the noise floor (:mod:`tracewh.history.changepoint`); changes starting at the
        same job instance form one alert group. Runs unusable for comparison
        (:mod:`tracewh.history.health`) are left out unless ``include_unusable``.

        Parameters
        ----------
        since
            ``90d``, ``12w`` or a date (None: all history).
        kernel, category, module
            Analyse only the ops matching a kernel pattern, of a category, or under a
            module path (at most one).
        op
            Analyse instead the achieved TFLOP/s of the CPU operators matching this
            pattern (one series per operator, Input Dims, dtype and params; roofline
            model, higher is better; ``op_series_values``). Not analysed without it: it
            costs the roofline of every run.
        where
            Labels or run fields the runs must have.
        alpha
            Significance of a change (family-wise per split; None: the default, 1%).
        min_change
            Smallest relative change reported (0.02 = 2%).
        min_ms
            Time series whose values stay under this many ms per step are not analysed.
        floor_ms
            Smallest absolute change reported, ms per step.
        keys
            Labels that name a workload (None: ``alerts.DEFAULT_KEYS``).

        Examples
        --------
        >>> Warehouse("wh").changes(since="90d", category="gemm").to_dicts()  # doctest: +SKIP
        """
        from tracewh.history import alerts as _alerts

        # one snapshot and one connection for the runs, their fingerprints and the values
        with self.session():
            return _alerts.changes(
                self, since=since, kernel=kernel, category=category, module=module, op=op,
                where=where, alpha=_alerts.DEFAULT_ALPHA if alpha is None else alpha,
                min_change=min_change, min_ms=min_ms, floor_ms=floor_ms,
                keys=_alerts.DEFAULT_KEYS if keys is None else keys,
                include_unusable=include_unusable,
            )  # fmt: skip

    def check(
        self,
        run: RunSelector = "latest",
        *,
        baseline: int | None = None,
        threshold: float = 0.10,
        min_ms: float = 0.1,
        k_mad: float = 3.0,
        floor_ms: float = 0.01,
        min_runs: int = 3,
        alpha: float | None = None,
        keys: Sequence[str] | None = None,
        all_ranks: bool = True,
        include_unusable: bool = False,
        op: str | None = None,
    ) -> _check.CheckReport:
        """Check a run, and the other ranks of its job instance, for regressions in force.

        Each series (step time, GPU idle fraction, each category, kernel key and module at
        least ``min_ms`` per step) over the run's comparable usable runs up to it gets its
        change points (:meth:`changes`); the run regressed when a change point at or before
        it is still in force: its segment's level is above the level of the segment before
        the change by more than ``threshold`` (relative), ``k_mad`` times the measured noise
        and ``floor_ms`` per step. The baseline is that earlier segment (its last
        ``baseline`` runs when given); "since" names the change's first run. Runs with
        fewer than ``min_runs`` comparable earlier runs are not checked (listed in
        ``CheckReport.insufficient``). With ``op``, the achieved TFLOP/s of the CPU
        operators matching that pattern are checked too (a drop is a regression; see
        :meth:`changes`). See :mod:`tracewh.history.check`.

        Examples
        --------
        >>> report = Warehouse("wh").check("latest", threshold=0.1)  # doctest: +SKIP
        >>> [f.metric for f in report.regressions]                   # doctest: +SKIP
        """
        from tracewh.history import alerts as _alerts
        from tracewh.history import check as _check

        with self.session():  # one snapshot and one connection for every query of the check
            return _check.check(
                self, run, baseline=baseline, threshold=threshold, min_ms=min_ms, k_mad=k_mad,
                floor_ms=floor_ms, min_runs=min_runs,
                alpha=_alerts.DEFAULT_ALPHA if alpha is None else alpha,
                keys=_alerts.DEFAULT_KEYS if keys is None else keys,
                all_ranks=all_ranks, include_unusable=include_unusable, op=op,
            )  # fmt: skip


_T = TypeVar("_T")


@dataclass
class _Pinned:
    """A session's connection, table list and snapshot (:meth:`Warehouse.session`)."""

    con: duckdb.DuckDBPyConnection
    tables: list[TableInfo]
    live: dict[str, list[tuple[str, str | None]]]
    partial: frozenset[str] = frozenset()  # tables read by column name (Store.require)
    # per connection of the session (by id): the files each of its raw_<table> views reads
    # now (None: unknown; absent or (): the empty placeholder)
    views: dict[int, dict[str, tuple[str, ...] | None]] = _field(default_factory=dict)
    memo: dict[Hashable, Any] = _field(default_factory=dict)  # see Warehouse.memoized
    owner: int = 0  # the thread that opened the session: it queries on `con`
    # other threads' confined connections, and each thread's one of Warehouse.connection
    threads: dict[int, duckdb.DuckDBPyConnection] = _field(default_factory=dict)
    aux: dict[int, duckdb.DuckDBPyConnection] = _field(default_factory=dict)
    lock: threading.Lock = _field(default_factory=threading.Lock)
    temp: Path = Path()  # the session's private folder of DuckDB temporary files

    def holds(self, con: duckdb.DuckDBPyConnection) -> bool:
        """Whether ``con`` is one of the session's confined connections."""
        with self.lock:
            return con is self.con or any(c is con for c in self.threads.values())


def _macro_sql(name: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """``SELECT * FROM name($first, key := $key, ...)`` and its parameters (``first`` to add)."""
    if not name.isidentifier():
        raise UsageError(f"not a macro name: {name!r}")
    named = "".join(f", {k} := ${k}" for k in params)
    return f"SELECT * FROM {name}($first{named})", dict(params)


def _label_values(con: duckdb.DuckDBPyConnection, key: str) -> list[str]:
    """The distinct values of label or run field ``key`` in ``runs`` on ``con``, sorted."""
    field = f"CAST({key} AS VARCHAR)" if key in RUN_FIELDS else "NULL"
    got = fetch_rows(
        con,
        f"SELECT DISTINCT coalesce({field}, json_extract_string(labels_json, $p)) AS v "
        "FROM runs WHERE v IS NOT NULL ORDER BY v",
        {"p": '$."' + key.replace('"', '\\"') + '"'},
    )
    return [str(r[0]) for r in got.rows]
