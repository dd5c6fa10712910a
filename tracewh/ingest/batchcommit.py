"""Commit the ingests of many files together: one Delta commit per table per batch.

One file's ingest is ~11 Delta commits (each child table, ``runs``, ``ingest_log``),
each opening the table's log: most of a tiny file's cost. A :class:`CommitBatch` (the
batched :class:`~tracewh.ingest.commit.Committer`; the other is
:class:`~tracewh.ingest.direct.DirectCommit`) lets :func:`~tracewh.ingest.pipeline.ingest_file` write a file's Parquet files and
defer their commit; :meth:`CommitBatch.flush` then commits, for every ingest of the
batch at once, each child table's files (one commit per table), then the ``runs``
rows (one commit), then the ``ingest_log`` rows.

The visibility rule is unchanged: a run is visible when its ``runs`` row is, and
that row is committed after every child file of every run of the batch. A crash or
kill before the ``runs`` commit leaves child files that are unreferenced (before
their commit) or invisible orphans (after it), both removed by the next ingest's
cleanup: a crash loses the batch's uncommitted files, never a committed run, and
never shows a partial one. Each ingest's locks (``writers`` shared, ``run-<id>``,
``ingest-<id>``) are held until the flush, so a concurrent ingest of the same bytes
waits for the commit and then finds the run; a lock another process holds makes the
batch flush first (so it holds nothing while it waits: no two batches wait for each
other). Derived tables (``run_series``: each run's history series, see :mod:`tracewh.history.runseries`)
are computed by the batch's ``derive`` hook from the batch's written child files and pending
``runs`` rows, and committed with the child tables, before ``runs``: a reader sees a run with
its series or neither. A file that changed since it was hashed (still being written) is checked
again at the flush, before anything is committed (:func:`~tracewh.ingest.files.check_unchanged`):
it fails alone, its written files removed. Batches are for local warehouses; on an object store every file commits
alone (its ``runs`` insert is conditional, see :meth:`Store._insert_runs`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracewh.ingest.commit import commit_adds, remove_uncommitted
from tracewh.ingest.derive import log_row
from tracewh.schema.plain import tables
from tracewh.storage.deltalog import Add
from tracewh.storage.store import Store

if TYPE_CHECKING:
    from tracewh.ingest.options import Derive, FileResult

#: A batch is flushed when it holds this many files or its first file is this old.
MAX_FILES = 64
MAX_SECONDS = 10.0

#: The derived table the hook writes.
DERIVED_TABLE = "run_series"


@dataclass
class _Pending:
    """What one file of the batch waits to commit."""

    result: FileResult
    log_row: Callable[[FileResult], dict[str, Any]]
    ingest_id: str | None = None
    run_row: dict[str, Any] | None = None
    replace: bool = False


@dataclass
class CommitBatch:
    """Deferred commits of several files' ingests into ``store`` (see the module docstring)."""

    store: Store
    max_files: int = MAX_FILES
    max_seconds: float = MAX_SECONDS
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)
    _held: set[str] = field(default_factory=set)
    _adds: dict[str, list[tuple[str, Add]]] = field(default_factory=dict)
    _rows: dict[str, tuple[dict[str, Any], bool]] = field(default_factory=dict)
    _checks: dict[str, Callable[[], None]] = field(default_factory=dict)
    _files: list[_Pending] = field(default_factory=list)
    _started: float | None = None
    _current: list[tuple[str, bool]] = field(default_factory=list)
    _out: list[FileResult] = field(default_factory=list)
    #: called first by every flush (a :class:`~tracewh.ingest.group.TinyGroup` writes the
    #: traces it holds, so their files and rows are in this flush's commits)
    before_flush: Callable[[], None] | None = None
    #: set by :meth:`abandon`: nothing of this batch is committed any more
    abandoned: bool = False
    #: computes the batch's ``run_series`` file before anything is committed (None: none)
    derive: Derive | None = None

    @property
    def run_ids(self) -> set[str]:
        """Runs of the batch's ingests waiting for their ``runs`` commit."""
        return {str(row["run_id"]) for row, _ in self._rows.values()}

    def begin_file(self) -> None:
        """A new file's ingest starts: the locks it takes from now on are its own."""
        self._current = []

    def hold(self, key: str, *, shared: bool = False) -> None:
        """Take lock ``key`` until the flush.

        When another process holds it, the batch is flushed first (releasing every
        lock), then this file's locks are taken again, blocking: a process never
        waits for a lock while it holds others of its batch, but for an ingest's own
        ``ingest-<id>`` lock, which no other process holds longer than a probe.
        """
        self._current.append((key, shared))
        if key in self._held:
            return
        if key.startswith("ingest-"):
            # an ingest's own lock (a fresh id): no other process takes it but for a moment
            # (cleanup's probe), so wait; a flush would release this file's run lock after
            # its "already ingested?" check, and another ingest could commit the run between
            lock = self.store.lock(key, shared=shared)
            lock.__enter__()
            self._keep(key, lock)
            return
        lock = self.store.lock(key, blocking=False, shared=shared)
        if lock.__enter__():
            self._keep(key, lock)
            return
        lock.__exit__(None, None, None)
        self.flush()
        for k, sh in self._current:
            blocking = self.store.lock(k, shared=sh)
            blocking.__enter__()
            self._keep(k, blocking)

    @contextlib.contextmanager
    def held(self, key: str, *, shared: bool = False) -> Iterator[None]:
        """:meth:`hold` ``key`` (until the flush, not the end of the block)."""
        self.hold(key, shared=shared)
        yield

    def finish(self, result: FileResult, *, ingest_id: str | None, sha: str | None,
               started: datetime) -> FileResult:
        """A file is through: :meth:`done`, its ``ingest_log`` row written at the flush."""
        ingest = ingest_id if result.outcome in ("ingested", "replaced") else None
        self.done(result, functools.partial(log_row, sha=sha, started=started), ingest_id=ingest)
        return result

    def _keep(self, key: str, lock: contextlib.AbstractContextManager[bool]) -> None:
        self._stack.push(lock.__exit__)
        self._held.add(key)

    def add_file(self, ingest_id: str, table: str, action: Add) -> None:
        """A written child-table file of ``ingest_id``, committed at the flush."""
        self._adds.setdefault(table, []).append((ingest_id, action))

    def add_run(
        self, ingest_id: str, row: dict[str, Any], *, replace: bool,
        check: Callable[[], None] | None = None,
    ) -> None:
        """``ingest_id``'s ``runs`` row (``replace``: ``--force`` over the committed run).

        ``check`` is called at the flush, before any commit: an exception it raises
        (the trace file changed since it was hashed) fails this ingest alone.
        """
        self._rows[ingest_id] = (row, replace)
        if check is not None:
            self._checks[ingest_id] = check

    def drop(self, ingest_id: str) -> None:
        """Forget a failed ingest's files and row; its written files are removed."""
        for table, entries in self._adds.items():
            mine = [a.path for i, a in entries if i == ingest_id]
            remove_uncommitted(self.store, table, mine)
            self._adds[table] = [(i, a) for i, a in entries if i != ingest_id]
        self._rows.pop(ingest_id, None)
        self._checks.pop(ingest_id, None)

    def done(
        self, result: FileResult, log_row: Callable[[FileResult], dict[str, Any]],
        *, ingest_id: str | None,
    ) -> None:
        """A file is through: its result is final at the flush (``ingest_log`` row then)."""
        if self._started is None:
            self._started = time.monotonic()
        self._files.append(_Pending(result, log_row, ingest_id))

    def due(self) -> bool:
        """Whether the batch should be flushed now."""
        return bool(self._files) and (
            len(self._files) >= self.max_files
            or (self._started is not None and time.monotonic() - self._started >= self.max_seconds)
        )

    def take(self) -> list[FileResult]:
        """The results of the files flushed so far (each returned once)."""
        out, self._out = self._out, []
        return out

    def flush(self) -> None:
        """Commit every child file, then the ``runs`` rows, then the log; release the locks.

        The results go to :meth:`take`: a file whose commit failed becomes
        ``failed`` (its run is not visible; the next ingest removes what was written).
        """
        from tracewh.core.errors import TracewhError

        if self.abandoned:
            return
        hook, self.before_flush = self.before_flush, None
        if hook is not None:
            try:
                hook()
            finally:
                self.before_flush = hook
        changed: dict[str, str] = {}
        for ingest_id, check in list(self._checks.items()):
            try:
                check()
            except TracewhError as exc:  # the file changed since it was hashed
                changed[ingest_id] = str(exc)
                self.drop(ingest_id)
        self._checks = {}
        files, self._files, self._started = self._files, [], None
        adds, self._adds = self._adds, {}
        rows, self._rows = self._rows, {}
        self._derive(adds, rows)
        plain = [row for row, rep in rows.values() if not rep]
        con: Any = None
        try:
            # one DuckDB writes the flush's plain rows (``runs``, then ``ingest_log``) where
            # there are some; where it cannot be opened, each append opens its own (and a
            # failure is the commit's)
            if not self.store.remote and (plain or files):
                with contextlib.suppress(Exception):
                    con = self.store.rows_connection()
            self._commit(files, adds, rows, plain, changed, con)
        finally:
            self._release()  # (done already unless opening the connection was interrupted)
            if con is not None:
                con.close()

    def _commit(
        self, files: list[_Pending], adds: dict[str, list[tuple[str, Add]]],
        rows: dict[str, tuple[dict[str, Any], bool]], plain: list[dict[str, Any]],
        changed: dict[str, str], con: Any,
    ) -> None:
        """:meth:`flush`'s commits, then the locks' release and the log (``con``: the plain
        rows' DuckDB or None; after a failed commit the log is written by a DuckDB of its own)."""
        error: str | None = None
        try:
            for table, spec in tables().items():
                if spec.run_child and adds.get(table):
                    commit_adds(self.store, table, [a for _, a in adds[table]])
            self.store.append_rows("runs", plain, con=con)
            for row, rep in rows.values():
                if rep:
                    self.store.append_rows("runs", [row], replace_run=str(row["run_id"]))
        except Exception as exc:  # every ingest of the batch fails with it
            error = f"the batch commit failed: {type(exc).__name__}: {exc}".splitlines()[0][:400]
            # files of tables whose commit did not happen are unreferenced: remove them
            # (a table committed before the failure holds invisible orphans: cleanup's)
            for table, entries in adds.items():
                with contextlib.suppress(Exception):
                    live = set(self.store.file_uris(table))
                    root = self.store.table_uri(table)
                    remove_uncommitted(self.store, table, [
                        a.path for _, a in entries if f"{root}/{a.path}" not in live])
        finally:
            self._release()
        results = [
            replace(p.result, outcome="failed", events=0, error=changed[p.ingest_id])
            if p.ingest_id in changed
            else p.result if error is None or p.ingest_id not in rows else replace(
                p.result, outcome="failed", error=f"{p.result.path}: {error}")
            for p in files
        ]
        self._log(files, results, con if error is None else None)
        self._out += results

    def abandon(self) -> None:
        """Stop without committing (a signal): remove the files written, release the locks.

        Nothing pending becomes visible; later :meth:`flush` and :meth:`close` calls commit
        nothing. What cannot be removed now is left to the next ingest's cleanup.
        """
        self.abandoned = True
        adds, self._adds = self._adds, {}
        self._rows, self._checks, self._files, self._started = {}, {}, [], None
        try:
            for table, entries in adds.items():
                with contextlib.suppress(Exception):
                    remove_uncommitted(self.store, table, [a.path for _, a in entries])
        finally:
            self._release()

    def _derive(
        self, adds: dict[str, list[tuple[str, Add]]], rows: dict[str, tuple[dict[str, Any], bool]]
    ) -> None:
        """Add the batch's ``run_series`` file to ``adds`` and its counts to the runs' rows.

        Best effort: a run whose series could not be computed here (the hook failed) is
        committed without, as one ingested before the table; its series are then
        computed from its tables when read, and stored by ``tracewh migrate``.
        """
        if self.derive is None or not rows or self.store.remote:
            return
        files = {table: [f"{self.store.table_uri(table)}/{a.path}" for _, a in entries]
                 for table, entries in adds.items()}  # fmt: skip
        rel = f"part-{uuid.uuid4().hex}-c000.zstd.parquet"
        out = Path(self.store.table_uri(DERIVED_TABLE)) / rel
        # its spill folder: in the staging folder of an ingest whose lock this batch holds
        # (a process killed here leaves it to the next ingest's cleanup, not in /tmp)
        staging = self.store.staging_root / next(iter(rows))
        made = not staging.exists()
        spill = staging / f"series-{uuid.uuid4().hex[:12]}"
        try:
            counts = dict(self.derive(out, files, [row for row, _ in rows.values()], spill))
        except Exception:
            out.unlink(missing_ok=True)
            return
        finally:
            shutil.rmtree(spill, ignore_errors=True)
            if made:  # the staging folder was gone already: leave none behind
                with contextlib.suppress(OSError):
                    staging.rmdir()
        if not counts:
            return
        adds.setdefault(DERIVED_TABLE, []).append(("", Add(
            path=rel, size=out.stat().st_size, partition_values={},
            modification_time=int(time.time() * 1000),
            stats=json.dumps({"numRecords": sum(counts.values())}),
        )))  # fmt: skip
        for row, _ in rows.values():
            recorded = json.loads(row.get("rows_json") or "{}")
            recorded[DERIVED_TABLE] = counts.get(str(row["run_id"]), 0)
            row["rows_json"] = json.dumps(recorded)

    def close(self) -> list[FileResult]:
        """:meth:`flush` whatever is pending (the end of a batch of files); every result."""
        if self._files or self._held:
            self.flush()
        return self.take()

    def _release(self) -> None:
        stack, self._stack = self._stack, contextlib.ExitStack()
        self._held = set()
        stack.close()

    def _log(self, files: list[_Pending], results: list[FileResult], con: Any = None) -> None:
        if not files:
            return
        with contextlib.suppress(Exception):  # best effort, as for one file
            self.store.append_rows(
                "ingest_log", [p.log_row(r) for p, r in zip(files, results, strict=True)], con=con
            )


__all__ = ["MAX_FILES", "MAX_SECONDS", "CommitBatch"]
