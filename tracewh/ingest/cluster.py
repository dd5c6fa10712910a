"""Files in tasks for an executor of its own (a Dask cluster), and what a lost task committed.

A cluster runs :class:`~tracewh.ingest.tasks.Task` objects, each a list of files one
worker ingests in turn with one commit batch (and, on a local warehouse, its tiny traces
linked together), as a local pool's pulling worker does. One file per task paid every
file's fixed costs alone (its own commits of every table, its own linkage DuckDB): 120 tiny
traces took 42 s on two Dask workers against 2.2 s with ``--jobs 2`` (``bench/bench_scale.py``). :func:`cost_chunks` packs the files into tasks by
their estimated cost (:func:`~tracewh.ingest.pool.file_cost`): a costly file alone, small
ones together, several tasks per worker so the cluster stays balanced.

A task the cluster gives up on (its worker killed again and again, a lost connection) may
have committed some of its files before: :func:`committed_runs` finds them in the warehouse
(the ``runs`` rows this ingest command wrote for those paths), so they are reported as
ingested; the others are reported as failed, with the loss as the reason (a file the task
skipped or found bad is in ``ingest_log`` with its own outcome; a task that lost its
connection may still be running on its worker and commit a file later: ingesting the same
paths again reports what is there). A task Dask runs again on another worker reports a
file its first attempt committed as skipped, "already ingested by this ingest command".
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from tracewh.ingest.options import FileResult
from tracewh.ingest.pool import FILE_COST_BYTES, file_cost, pull_order
from tracewh.storage.store import Store

#: The most files one cluster task holds: a lost task fails (or leaves uncertain) at most these.
TASK_MAX_FILES = 32
#: The most estimated cost (:func:`~tracewh.ingest.pool.file_cost`) of a task of several
#: files: 32 tiny traces, or a few MB of gzip.
TASK_MAX_COST = TASK_MAX_FILES * FILE_COST_BYTES
#: Tasks per worker when the cluster's size is known: the last ones even out the workers' ends.
TASKS_PER_SLOT = 4


def cost_chunks(paths: Sequence[str], slots: int | None) -> list[tuple[str, ...]]:
    """``paths`` in tasks for a cluster of ``slots`` workers (None: not known here).

    Files go in :func:`~tracewh.ingest.pool.pull_order` (the costliest first, so the big
    files start first and the small ones fill the ends). A task takes files until its cost
    reaches a target: :data:`TASK_MAX_COST`, or, with ``slots`` known, the total cost over
    :data:`TASKS_PER_SLOT` tasks per worker if that is less (so about that many tasks per
    worker, fewer where the files are few); a file costing the target or more is a task of
    its own; no task holds more than :data:`TASK_MAX_FILES` files. Every path is in
    exactly one task; equal-cost files keep their order. ``slots`` None (a scheduler that
    has no worker yet): tasks of the largest size.

    Examples
    --------
    >>> cost_chunks(["a", "b", "c"], 1)  # three files nowhere: each the fixed cost
    [('a',), ('b',), ('c',)]
    """
    if not paths:
        return []
    costs = {p: file_cost(p) for p in paths}
    target = TASK_MAX_COST
    if slots:
        target = min(target, sum(costs.values()) // (slots * TASKS_PER_SLOT))
    out: list[tuple[str, ...]] = []
    chunk: list[str] = []
    cost = 0
    for p in pull_order(list(paths)):
        if costs[p] >= target:
            out.append((p,))
            continue
        chunk.append(p)
        cost += costs[p]
        if cost >= target or len(chunk) >= TASK_MAX_FILES:
            out.append(tuple(chunk))
            chunk, cost = [], 0
    if chunk:
        out.append(tuple(chunk))
    return out


def committed_runs(
    store: Store, paths: Sequence[str], ingested_at: datetime | None
) -> dict[str, FileResult]:
    """The files of ``paths`` that the ingest started at ``ingested_at`` committed, by path.

    Read from the ``runs`` rows whose ``ingested_at`` is this ingest command's and whose
    ``source_path`` is one of ``paths`` (absolute): a task that was lost after committing
    some of its files reports those as ingested. Empty when nothing can be read (the
    caller then reports every file of the task as failed, as before).
    """
    if ingested_at is None or not paths:
        return {}
    wanted = {os.path.abspath(p) for p in paths}
    try:
        rows: list[dict[str, Any]] = store.read_table(
            "runs", columns=["run_id", "source_path", "bytes", "n_events", "ingested_at"]
        ).to_pylist()
    except Exception:  # an unreadable warehouse (any backend's error): the task stays lost
        return {}
    return {
        r["source_path"]: FileResult(
            r["source_path"], "ingested", run_id=r["run_id"], events=int(r["n_events"] or 0),
            bytes=int(r["bytes"] or 0),
            warnings=("committed before its cluster task was lost",),
        )
        for r in rows
        if r["source_path"] in wanted and r["ingested_at"] == ingested_at
    }


__all__ = ["TASKS_PER_SLOT", "TASK_MAX_COST", "TASK_MAX_FILES", "committed_runs", "cost_chunks"]
