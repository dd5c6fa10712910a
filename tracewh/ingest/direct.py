"""Each file commits alone: the commit strategy of one file's ingest, and of object stores.

:class:`DirectCommit` is the :class:`~tracewh.ingest.commit.Committer` of a file ingested on
its own (:func:`tracewh.ingest.pipeline.ingest_file` without a batch, and every file on an
object store, where each ``runs`` insert is conditional): its locks are held for the length
of its ingest, each child file is committed as it is written (one Delta commit each), its
``runs`` row last (what makes the run visible), then its ``ingest_log`` row. A failure
deletes what it committed (best effort: cleanup removes the rest, invisible meanwhile).
The other strategy, :class:`~tracewh.ingest.batchcommit.CommitBatch`, defers all of it to a
batch's flush.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tracewh.ingest.cleanup import delete_ingest
from tracewh.ingest.commit import commit_adds, remove_uncommitted
from tracewh.ingest.derive import log_row
from tracewh.ingest.options import FileResult
from tracewh.storage.deltalog import Add
from tracewh.storage.store import Store


@dataclass
class DirectCommit:
    """Commits of one file's ingest as they come (see the module docstring)."""

    store: Store

    @property
    def run_ids(self) -> set[str]:
        """Nothing waits for a commit here."""
        return set()

    def begin_file(self) -> None:
        """Nothing to remember between files."""

    @contextlib.contextmanager
    def held(self, key: str, *, shared: bool = False) -> Iterator[None]:
        """Lock ``key`` for the block."""
        with self.store.lock(key, shared=shared):
            yield

    def add_file(self, ingest_id: str, table: str, action: Add) -> None:
        """Commit a written child file now; a failed commit removes the file."""
        try:
            commit_adds(self.store, table, [action])
        except BaseException:  # not committed: the file would only wait for a vacuum
            remove_uncommitted(self.store, table, [action.path])
            raise

    def add_run(self, ingest_id: str, row: dict[str, Any], *, replace: bool,
                check: Callable[[], None] | None = None) -> None:
        """Commit the ``runs`` row (the caller checked the file just before)."""
        self.store.append_rows("runs", [row], replace_run=str(row["run_id"]) if replace else None)

    def drop(self, ingest_id: str) -> None:
        """Best-effort removal of the child rows of a failed ingest (cleanup does it otherwise)."""
        with contextlib.suppress(Exception):
            delete_ingest(self.store, ingest_id)

    def finish(self, result: FileResult, *, ingest_id: str | None, sha: str | None,
               started: datetime) -> FileResult:
        """Log ``result`` (best effort: the run is committed or not); ``result``."""
        try:
            self.store.append_rows("ingest_log", [log_row(result, sha=sha, started=started)])
        except Exception:
            pass
        except BaseException as exc:  # delta-rs panics (a read-only file system): not our batch's end
            if type(exc).__name__ != "PanicException":
                raise
        return result


__all__ = ["DirectCommit"]
