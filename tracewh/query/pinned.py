"""The state of an open session (:meth:`tracewh.query.session.Session.session`).

One snapshot (the live files of every table, each table's log read once, when a query first
needs it: :class:`~tracewh.storage.snapshot.LiveSnapshot`), the connections that
read it (the owner thread's confined one, other threads' confined ones, each thread's
connection for queries that change settings), the files each connection's views point at,
the results computed once per session, and its private folder of DuckDB temporary files.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from tracewh.query.db import TableInfo

__all__ = ["Pinned"]

_T = TypeVar("_T")


@dataclass
class Pinned:
    """A session's connection, table list and snapshot (:meth:`Session.session`)."""

    con: duckdb.DuckDBPyConnection
    tables: list[TableInfo]
    live: Mapping[str, list[tuple[str, str | None]]]
    partial: frozenset[str] = frozenset()  # tables read by column name (Store.require)
    # per connection of the session (by id): the files each of its raw_<table> views reads
    # now (None: unknown; absent or (): the empty placeholder)
    views: dict[int, dict[str, tuple[str, ...] | None]] = field(default_factory=dict)
    # per connection (by id): the selection (days, since) each view's files were chosen for;
    # a query that does not read a table keeps it if it holds the files of the same selection
    selections: dict[int, dict[str, Hashable]] = field(default_factory=dict)
    memo: dict[Hashable, Future[Any]] = field(default_factory=dict)  # see memoized
    computing: dict[Hashable, int] = field(default_factory=dict)  # key -> the thread computing it
    owner: int = 0  # the thread that opened the session: it queries on `con`
    # other threads' connections (db.sibling of con), and each thread's one of Session.connection
    threads: dict[int, duckdb.DuckDBPyConnection] = field(default_factory=dict)
    aux: dict[int, duckdb.DuckDBPyConnection] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    temp: Path = Path()  # the session's private folder of DuckDB temporary files
    home: tuple[str, str] = ("memory", "main")  # con's default catalog and schema (db.home)

    def holds(self, con: duckdb.DuckDBPyConnection) -> bool:
        """Whether ``con`` is one of the session's confined connections."""
        with self.lock:
            return con is self.con or any(c is con for c in self.threads.values())

    def memoized(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """``compute()`` once per ``key`` for the session (its snapshot does not change).

        What the library's analyses that a report asks for more than once share: the run
        set (``runs``, ``changes`` and ``check`` each need it) and the ``series_values``
        of ``changes`` and ``check``. ``key`` must name everything the result depends on
        besides the snapshot; the result is shared, so it must not be modified.

        Threads that ask for a ``key`` being computed wait for that result rather than
        compute it again (a report's threads ask for the run set at once: ~0.4 s of CPU at
        3,000 runs); no lock is held while computing, so other keys go on meanwhile. A
        computation that fails is not kept: its error goes to those waiting, and the next call
        computes again.
        """
        me = threading.get_ident()
        with self.lock:
            found_entry = self.memo.get(key)
            mine = found_entry is None
            # asked again by the thread computing it (from compute): no waiting on itself
            again = found_entry is not None and self.computing.get(key) == me and not found_entry.done()
            if found_entry is None:
                entry: Future[Any] = Future()
                self.memo[key] = entry
                self.computing[key] = me
            else:
                entry = found_entry
        if again:
            return compute()
        if not mine:
            found: _T = entry.result()
            return found
        try:
            value = compute()  # not under the lock: another thread's queries go on meanwhile
        except BaseException as exc:
            with self.lock:
                self.memo.pop(key, None)
                self.computing.pop(key, None)
            entry.set_exception(exc)
            raise
        with self.lock:
            self.computing.pop(key, None)
        entry.set_result(value)
        return value
