"""Bounds of a user's query (``tracewh sql``): time, memory, spill space, and Ctrl-C.

A DuckDB query runs in C++ with the GIL released; a runaway one (a huge ``DISTINCT``, a
cross join) held the command for as long and as much memory as it wanted, and Ctrl-C did
not reach it. A bounded query

- runs in a worker thread while the calling (main) thread waits in short slices: Ctrl-C
  (``KeyboardInterrupt``), the deadline and a caller's ``stop`` event (another thread
  cancelling it: the MCP server's cancelled requests) are seen within ~50 ms, and stop the
  query with ``DuckDBPyConnection.interrupt()`` (:func:`run_limited`);
- has DuckDB's ``memory_limit`` set, and spills into a private temporary folder
  (``mkdtemp``: 0700, a fresh name, owned by the user) capped by ``max_temp_directory_size``
  and removed afterwards (:func:`private_temp`). DuckDB's default spill folder is ``.tmp``
  in the current folder, which a confined query could also read (DuckDB allows reads of its
  temporary folder): the private folder holds nothing but the query's own spill files.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import duckdb

from tracewh.core.errors import QueryError, UsageError

_T = TypeVar("_T")

#: Defaults of ``tracewh sql`` (each settable there).
DEFAULT_TIME_S = 300.0
DEFAULT_MEMORY = "2GB"
DEFAULT_SPILL = "4GB"


@dataclass(frozen=True)
class QueryLimits:
    """What one query may use; ``None``: no limit (DuckDB's own default for memory).

    Parameters
    ----------
    time_s
        Wall-clock seconds before the query is stopped.
    memory
        DuckDB ``memory_limit`` (``"2GB"``, ``"500MB"``).
    spill
        DuckDB ``max_temp_directory_size``: what the query may write to its private
        temporary folder when it runs out of memory.
    """

    time_s: float | None = DEFAULT_TIME_S
    memory: str | None = DEFAULT_MEMORY
    spill: str | None = DEFAULT_SPILL

    def __post_init__(self) -> None:
        if self.time_s is not None and not self.time_s > 0:
            raise UsageError(f"the time limit must be a positive number of seconds, not {self.time_s}")


@contextlib.contextmanager
def private_temp(prefix: str = "tracewh-sql-", *, parent: str | Path | None = None) -> Iterator[Path]:
    """A fresh private folder (0700, random name, in ``parent``, default the system's temp
    folder), removed after."""
    if parent is not None:
        Path(parent).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def apply_limits(con: duckdb.DuckDBPyConnection, limits: QueryLimits | None, temp: Path) -> None:
    """Set ``con``'s spill folder to ``temp`` and its memory and spill limits.

    Called before the configuration is locked (:func:`tracewh.query.sqlguard.confine`).
    """
    try:
        con.execute("SET temp_directory = ?", [str(temp)])
        if limits is not None and limits.memory:
            con.execute("SET memory_limit = ?", [limits.memory])
        if limits is not None and limits.spill:
            con.execute("SET max_temp_directory_size = ?", [limits.spill])
    except duckdb.Error as exc:
        raise UsageError(f"bad query limit: {str(exc).strip().splitlines()[0]}") from exc


def _explain(query: str, exc: QueryError, limits: QueryLimits | None) -> QueryError:
    """A DuckDB out-of-memory or spill-full error, said in terms of the limits that caused it."""
    text = exc.reason
    if limits is None:
        return exc
    if "offload" in text or "max_temp_directory_size" in text:
        return QueryError(query, f"the query spilled more than the spill limit ({limits.spill}); "
                                 f"raise it with --spill-limit ({text})")
    if "Out of Memory" in text or "memory limit" in text.lower():
        return QueryError(query, f"the query needs more than the memory limit ({limits.memory}); "
                                 f"raise it with --memory-limit ({text})")
    return exc


def _interrupt(con: duckdb.DuckDBPyConnection, done: threading.Event) -> None:
    """Interrupt ``con``'s query until the worker is done.

    An interrupt reaches only a query that runs: one sent while the worker was still starting
    (importing Polars for its first frame, binding the query) was lost, and the wait for the
    worker then lasted as long as the query.
    """
    con.interrupt()
    while not done.wait(0.05):
        con.interrupt()


def run_limited(
    con: duckdb.DuckDBPyConnection, query: str, fetch: Callable[[], _T], limits: QueryLimits | None,
    *, stop: threading.Event | None = None,
) -> _T:
    """``fetch()`` (a query on ``con``) in a worker thread, stopped at the time limit, on Ctrl-C,
    or when another thread sets ``stop``.

    Raises
    ------
    QueryError
        The time limit passed or ``stop`` was set (the query was interrupted), or the
        memory/spill limit was hit.
    KeyboardInterrupt
        Ctrl-C (or SIGTERM/SIGHUP turned into it): the query was interrupted first.
    """
    out: dict[str, object] = {}
    done = threading.Event()  # not Thread.join: a join broken by Ctrl-C may report the thread dead

    def work() -> None:
        try:
            out["value"] = fetch()
        except BaseException as exc:  # handed to the waiting thread
            out["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=work, name="tracewh-sql", daemon=True)
    deadline = None if limits is None or limits.time_s is None else time.monotonic() + limits.time_s
    worker.start()
    try:
        while not done.wait(0.05):
            if stop is not None and stop.is_set():
                _interrupt(con, done)
                if "value" not in out:
                    raise QueryError(query, "cancelled: the query was stopped by its caller")
            if deadline is not None and time.monotonic() >= deadline:
                _interrupt(con, done)
                if "value" not in out:
                    assert limits is not None and limits.time_s is not None
                    raise QueryError(query, f"stopped at the time limit ({limits.time_s:g} s); "
                                            "raise it with --time-limit")
    except BaseException:
        if not done.is_set():  # Ctrl-C: stop the query before unwinding
            con.interrupt()
            done.wait(10)
        raise
    error = out.get("error")
    if isinstance(error, QueryError):
        raise _explain(query, error, limits) from error
    if isinstance(error, BaseException):
        raise error
    return out["value"]  # type: ignore[return-value]
