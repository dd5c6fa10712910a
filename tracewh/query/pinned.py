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
    memo: dict[Hashable, Any] = field(default_factory=dict)  # see Session.memoized
    owner: int = 0  # the thread that opened the session: it queries on `con`
    # other threads' confined connections, and each thread's one of Session.connection
    threads: dict[int, duckdb.DuckDBPyConnection] = field(default_factory=dict)
    aux: dict[int, duckdb.DuckDBPyConnection] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    temp: Path = Path()  # the session's private folder of DuckDB temporary files

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
        """
        with self.lock:
            if key in self.memo:
                found: _T = self.memo[key]
                return found
        value = compute()  # not under the lock: another thread's queries go on meanwhile
        with self.lock:
            result: _T = self.memo.setdefault(key, value)
        return result
