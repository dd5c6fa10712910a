"""Worker processes that never outlive the ingest that started them, and stop on a signal.

A plain ``with ProcessPoolExecutor(...)`` waits, on the way out, for the tasks already
running: an ingest stopped by SIGTERM or Ctrl-C let its workers go on parsing and committing
runs after the signal (issue 33, class 8). :func:`worker_pool` instead

- starts each worker under :func:`~tracewh.core.stopping.die_with_parent`
  (``PR_SET_PDEATHSIG = SIGKILL``, Linux): a worker dies with the process that started it,
  however that one ends (kill -9 included), and with it the workers it started in turn; and
  it ignores SIGINT: Ctrl-C in a terminal reaches the whole process group, and the parent
  alone decides (a worker interrupted by it would print a traceback);
- on any exception leaving the ``with`` block (``KeyboardInterrupt``, :class:`Stopped`, an
  error), kills every worker with SIGKILL and reaps it before re-raising: whatever a worker
  had not committed is never committed. A kill is safe at any instant: commits are atomic,
  and what a killed ingest left behind is removed by the next one (``tracewh.ingest.cleanup``).

:func:`tracewh.core.stopping.stop_on_signals` (every command runs under it) turns SIGTERM and
SIGHUP into :class:`~tracewh.core.stopping.Stopped` in the main thread (SIGINT already raises
``KeyboardInterrupt``), so the command unwinds through the same path.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from tracewh.core.stopping import die_with_parent


def kill_workers(pool: ProcessPoolExecutor) -> None:
    """SIGKILL every live worker of ``pool`` and reap it; cancel what was not started."""
    procs: dict[int, Any] = dict(getattr(pool, "_processes", None) or {})
    for proc in procs.values():
        with contextlib.suppress(OSError, ValueError, AttributeError):
            proc.kill()
    for proc in procs.values():
        with contextlib.suppress(OSError, ValueError, AttributeError, AssertionError):
            proc.join(5)
    with contextlib.suppress(Exception):
        pool.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True)
class Channels:
    """What a pulling worker shares with the process that started it.

    ``todo`` (a queue) holds the paths still to ingest, then one ``None`` per worker (stop).
    Results come back through a pipe (``results``: the parent's end; ``sender``: the
    workers', each send under ``lock``), so the parent can report each file once it is final
    (at each commit of its worker's batch). A send is synchronous: what a worker sent is in
    the pipe before its task ends, so once every task has ended, the pipe holds all there is.
    """

    todo: Any
    results: Any
    sender: Any
    lock: Any

    def paths(self) -> Iterator[str]:
        """The next path to ingest, pulled one at a time until the stop marker."""
        while (path := self.todo.get()) is not None:
            yield path

    def send(self, item: object) -> None:
        """Send ``item`` to the parent (a worker's side)."""
        with self.lock:
            self.sender.send(item)


#: This worker process's channels: set once by the pool's initializer (:func:`_start`) in a
#: pulling worker, never in the process that started the pool. A queue can only reach a
#: spawned process as an initializer argument, not as a task's.
_CHANNELS: Channels | None = None


def _start(parent: int, channels: Channels | None) -> None:
    global _CHANNELS
    die_with_parent(parent)
    _CHANNELS = channels
    atexit.register(_freeze_at_exit)


def _freeze_at_exit() -> None:
    """A worker's ``atexit`` handler: collect the garbage once, freeze what is left.

    A spawned worker ends with a normal interpreter exit, whose full garbage collections
    traverse the ~25,000 objects of its modules two or three times; the pool's owner waits
    for that (``shutdown(wait=True)``: 25-40 ms of a split 72 MB trace's ingest). Frozen
    objects are not traversed; the garbage of that moment is still collected (and
    finalized) first. Handlers run newest first: those registered after this one (by the
    tasks' modules) run before it, those registered before it (``multiprocessing``'s) after
    it, and the freeze changes only what the exit's collections traverse: every handler runs.
    """
    gc.collect()
    gc.freeze()


def channels() -> Channels:
    """The channels of this pulling worker (raises outside one)."""
    if _CHANNELS is None:
        raise RuntimeError("not a pulling worker: no channels")
    return _CHANNELS


def new_channels() -> Channels:
    """Empty channels for a pool of pulling workers (:func:`worker_pool` ``channels=``)."""
    ctx = multiprocessing.get_context("spawn")
    results, sender = ctx.Pipe(duplex=False)
    return Channels(ctx.Queue(), results, sender, ctx.Lock())


@contextlib.contextmanager
def worker_pool(workers: int, *, channels: Channels | None = None) -> Iterator[ProcessPoolExecutor]:
    """A pool of ``workers`` spawned processes, killed (not awaited) when the block fails.

    Leaving the block normally waits for the pool, as ``with ProcessPoolExecutor`` does;
    leaving it by any exception (a signal included) kills the workers first. With
    ``channels``, each worker gets them (:func:`channels` in the worker).
    """
    ctx = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_start,
                               initargs=(os.getpid(), channels))
    try:
        yield pool
    except BaseException:
        kill_workers(pool)
        raise
    pool.shutdown(wait=True)
