"""The variants of an ingest, chosen once at the top: strategy objects, not flags passed down.

:func:`choose` picks them once per ingest command, from its options and the warehouse
(:func:`tracewh.ingest.batch.ingest_paths` calls it, and picks the executor: serial, local
processes, or Dask), and every file of every task is ingested with them:

- the **stager** (:func:`tracewh.ingest.shred.stager_for`): C (:class:`~tracewh.ingest.shred.CStager`)
  where ``options.native`` and the extension is built, else Python
  (:class:`~tracewh.ingest.shred.PythonStager`): the same rows either way;
- the **task**: :class:`BatchedTask` on a local warehouse (the commits of a task's files
  batched, :class:`~tracewh.ingest.batchcommit.CommitBatch`; its tiny traces linked and
  written together, :class:`~tracewh.ingest.group.TinyGroup`, unless ``options.group_tiny``
  is off, each file then :class:`~tracewh.ingest.derive.OneFile`), or :class:`AloneTask` on
  an object store (each file commits alone, :class:`~tracewh.ingest.direct.DirectCommit`:
  its ``runs`` insert is conditional).

A :class:`Task` (files, options, strategies) is what an executor runs (:func:`run_task`):
picklable, so a worker process or a Dask worker gets the choices made here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tracewh.ingest import workers
from tracewh.ingest.batchcommit import CommitBatch
from tracewh.ingest.derive import OneFile
from tracewh.ingest.group import TinyGroup
from tracewh.ingest.options import FileResult, IngestOptions
from tracewh.ingest.pipeline import RunsLookup, ingest_file
from tracewh.ingest.shred import Stager, stager_for
from tracewh.storage.store import Store


@dataclass(frozen=True)
class AloneTask:
    """Each file on its own: its commits as written, its log row at once (object stores)."""

    stager: Stager

    def run(self, store: Store, paths: Iterable[str], options: IngestOptions,
            on_results: Report | None = None) -> list[FileResult]:
        out: list[FileResult] = []
        for p in paths:
            # a run committed first by a concurrent ingest is "skipped" by ingest_file
            out.append(ingest_file(store, Path(p), options, stager=self.stager))
            if on_results is not None:
                on_results(out[-1:])
        return out


@dataclass(frozen=True)
class BatchedTask:
    """The files of a task in one commit batch; with ``grouped``, their tiny traces together."""

    stager: Stager
    grouped: bool

    def run(self, store: Store, paths: Iterable[str], options: IngestOptions,
            on_results: Report | None = None) -> list[FileResult]:
        batch = CommitBatch(store, derive=options.derive)
        group = TinyGroup(store, options, batch) if self.grouped else None
        linker = group if group is not None else OneFile(store, options, batch)
        runs = RunsLookup()  # one connection for the task's "already ingested?" lookups
        out: list[FileResult] = []

        def final(results: list[FileResult]) -> None:
            out.extend(results)
            if results and on_results is not None:
                on_results(results)

        try:
            for path in paths:
                ingest_file(store, Path(path), options, commit=batch, linker=linker,
                            stager=self.stager, runs=runs)
                if batch.due():
                    batch.flush()
                final(batch.take())
        except (KeyboardInterrupt, SystemExit):  # a signal: commit nothing more, release the locks
            batch.abandon()
            raise
        finally:
            runs.close()
            if not batch.abandoned:
                final(batch.close())
            if group is not None:
                group.close()
        return out


TaskStrategy = AloneTask | BatchedTask


def choose(store: Store, options: IngestOptions) -> TaskStrategy:
    """The strategies of an ingest into ``store`` with ``options`` (module docstring)."""
    stager = stager_for(options.native)
    if store.remote:
        return AloneTask(stager)
    return BatchedTask(stager, grouped=options.group_tiny)


#: Where a task hands the results of its files as they become final (each file once).
Report = Callable[[list[FileResult]], None]


@dataclass(frozen=True)
class Task:
    """Files one worker ingests in turn, with the strategies chosen for the whole ingest.

    A pulling task (:func:`pull_task`) has no ``paths``: its worker takes them one at a
    time from the queue it shares with the other workers.
    """

    store: Store
    paths: tuple[str, ...]
    options: IngestOptions
    strategy: TaskStrategy


def run_task(task: Task) -> list[FileResult]:
    """Ingest a task's files (what an executor maps over the tasks)."""
    return task.strategy.run(task.store, task.paths, task.options)


def pull_task(task: Task) -> None:
    """In a pulling worker: ingest the paths pulled from the shared queue until it says stop.

    Every result goes to the parent through the results pipe as soon as it is final (a
    batch's results at its commit), one message each, then ``None``: this worker is through. One batch (and
    one group of tiny traces at a time) serves all the files this worker pulls.
    """
    channels = workers.channels()

    def send(results: list[FileResult]) -> None:
        for result in results:  # one small message each: a pipe write of a few hundred bytes
            channels.send(result)

    try:
        task.strategy.run(task.store, channels.paths(), task.options, on_results=send)
    finally:
        channels.send(None)


__all__ = ["AloneTask", "BatchedTask", "Report", "Task", "TaskStrategy", "choose", "pull_task",
           "run_task"]
