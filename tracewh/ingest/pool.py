"""A local pool of worker processes that pull the files to ingest from one shared queue.

Each of the ``--jobs`` workers (:func:`~tracewh.ingest.workers.worker_pool`, spawned, dying
with this process) runs one :func:`~tracewh.ingest.tasks.pull_task`: it takes the next path
(the costliest first, :func:`pull_order`) as soon as it is free and keeps one commit batch
and one group of tiny traces for all of them, so a folder costs a few commits per worker,
not a few per file. Results come back one by one as their batch commits them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from concurrent.futures.process import BrokenProcessPool

from tracewh.ingest.options import FileResult
from tracewh.ingest.tasks import Task, pull_task
from tracewh.ingest.workers import new_channels, worker_pool

#: A file's fixed cost in :func:`file_cost` (bytes of JSON ingested in the same time: a
#: tiny trace takes ~0.25 s of CPU, ~1 s per MB of gzip, i.e. ~10 MB of JSON).
FILE_COST_BYTES = 2_500_000


def file_cost(path: str) -> int:
    """The estimated cost of ingesting ``path``: its JSON bytes (a ``.gz`` counted as 10x
    its size) plus :data:`FILE_COST_BYTES`, the fixed cost of a file."""
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0
    return (size * 10 if path.endswith(".gz") else size) + FILE_COST_BYTES


def pull_order(paths: list[str]) -> list[str]:
    """The order pulling workers take ``paths`` in: the costliest (:func:`file_cost`) first.

    The big files start first and the tiny ones fill the workers' ends evenly (a worker
    takes the next file as soon as it is free); files of the same cost keep their order, so
    a batch's tiny traces, taken last, reach a worker's group together.
    """
    costs = {p: file_cost(p) for p in paths}
    return sorted(paths, key=lambda p: -costs[p])  # stable: equal costs keep their order


def lost(paths: Iterable[str], exc: BaseException) -> list[FileResult]:
    """Failed results for ``paths``, whose worker was lost (killed, or a lost connection)."""
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return [
        FileResult(
            os.path.abspath(p), "failed",
            error=f"{p}: the worker failed: {type(exc).__name__}: {reason}"[:500],
        )
        for p in paths
    ]


class Lost(Exception):
    """A pulling worker died; its files were reported as failed (:func:`pulled`)."""


def pulled(task: Task, paths: list[str], jobs: int) -> Iterator[list[FileResult]]:
    """Ingest ``paths`` with ``jobs`` local worker processes that pull them one at a time.

    The paths go into a queue in :func:`pull_order`; each worker runs one
    :func:`~tracewh.ingest.tasks.pull_task` (one commit batch and its group of tiny traces
    for every file it takes, so a folder costs a few commits per worker, not a few per
    file) and sends back the results as they become final, then a stop marker. Yields
    result lists as they come. A worker lost (killed, or failing outside a file's own
    ingest) fails the files it had taken and not reported. A worker that dies (killed)
    breaks the pool, which stops the others: every file not yet reported fails.
    """
    n = min(jobs, len(paths))
    channels = new_channels()
    # a queue's feeder thread waits, at exit, for its items to be read: a lost worker (or a
    # signal while they are queued) leaves some unread, and this process must not hang on them
    channels.todo.cancel_join_thread()
    for p in pull_order(paths):
        channels.todo.put(p)
    for _ in range(n):
        channels.todo.put(None)  # one stop marker per worker
    reported: set[str] = set()
    through = 0
    # workers die with this process and are killed (not awaited) when it stops early:
    # a signal or an error never lets them commit afterwards (tracewh.ingest.workers)
    with worker_pool(n, channels=channels) as pool:
        futures = [pool.submit(pull_task, task) for _ in range(n)]  # each starts its worker
        channels.sender.close()  # the workers hold theirs: once they are all gone, EOF
        while through < n:
            if not channels.results.poll(0.2):
                # every task ended (sent all it will send, or never ran: a task that could
                # not be pickled, a worker killed): nothing more comes
                if all(f.done() for f in futures) and not channels.results.poll(0):
                    break
                continue
            try:
                got = channels.results.recv()
            except EOFError:  # every worker is gone (a killed worker broke the pool)
                break
            if got is None:
                through += 1
            else:
                reported.add(got.path)
                yield [got]
        errors = [e for e in (f.exception() for f in futures) if e is not None]
        # a dead worker first: the pool stopped every other one with it
        error = next((e for e in errors if isinstance(e, BrokenProcessPool)), None) or (
            errors[0] if errors else None)
        unreported = [p for p in paths if os.path.abspath(p) not in reported]
        if unreported:
            yield lost(unreported, error or RuntimeError("no result came back"))
        if isinstance(error, BrokenProcessPool):
            raise Lost from error  # leave the block by an exception: the pool is killed


__all__ = ["FILE_COST_BYTES", "Lost", "file_cost", "lost", "pull_order", "pulled"]
