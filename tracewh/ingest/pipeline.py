"""Ingest one trace file: hash, lock, stream to staging, derive, commit.

The commit order makes a run atomic across tables: every child table is
appended (one Delta commit each, rows tagged with a fresh ``ingest_id``), then
the ``runs`` row, which is what makes them visible. A failure or a kill before
that leaves only invisible rows, removed by :func:`tracewh.ingest.cleanup.cleanup`.
"""

from __future__ import annotations

import functools
import json
import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import duckdb

from tracewh.core.errors import TraceFormatError
from tracewh.core.sqlfiles import glob_escaped
from tracewh.ingest.derive import OneFile, now_utc
from tracewh.ingest.direct import DirectCommit
from tracewh.ingest.files import check_unchanged, open_regular, stamp
from tracewh.ingest.options import FileJob, FileResult, IngestOptions, error_result
from tracewh.ingest.parts import stage_file
from tracewh.ingest.reader import sha256_file
from tracewh.ingest.shred import Stager, stager_for
from tracewh.storage.store import DuplicateRunError, Store

if TYPE_CHECKING:
    from tracewh.ingest.commit import Committer
    from tracewh.ingest.parts import Staged
    from tracewh.ingest.shred import StageConnections


def read_sidecar_labels(path: Path) -> dict[str, str]:
    """Labels from a ``run.json`` next to the trace (flat ``{key: value}``); {} if none."""
    sidecar = path.parent / "run.json"
    if not sidecar.exists() and not sidecar.is_symlink():
        return {}
    if sidecar.is_symlink():  # never read through a link: its content would become labels
        raise TraceFormatError(sidecar, "run.json is a symbolic link: not followed "
                                        "(labels come only from a regular run.json beside the trace)")
    try:  # a FIFO or device named run.json fails here, at once (never read)
        with open_regular(sidecar) as f:
            data = json.loads(f.read(16 << 20).decode("utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise TraceFormatError(sidecar, f"unreadable run.json: {exc}") from exc
    if not isinstance(data, dict):
        raise TraceFormatError(sidecar, "run.json is not a JSON object")
    labels = data.get("labels") if isinstance(data.get("labels"), dict) else None
    flat: dict[str, str] = {}
    for key, value in {**data, **(labels or {})}.items():
        if key == "labels" or isinstance(value, dict | list):
            continue
        flat[str(key)] = value if isinstance(value, str) else json.dumps(value)
    return flat


#: Folders inference servers write their CUDA/HIP graph capture traces to, beside the
#: traces that replay the graphs (vLLM, SGLang): a trace there belongs to the parent's job.
class RunsLookup:
    """Finds a run's committed ``runs`` row, for the files of one task (:func:`ingest_file`).

    Its DuckDB connection (a database of its own, one thread, Parquet footers cached: the
    ``runs`` files never change once written) is made on the first lookup and kept until
    :meth:`close`: opening one for each file of a nightly folder was ~20 ms a file. The
    files are those of the latest snapshot at each lookup (under the run's lock).
    """

    def __init__(self) -> None:
        self._con: duckdb.DuckDBPyConnection | None = None

    def existing(self, store: Store, run_id: str) -> dict[str, Any] | None:
        """The committed ``runs`` row of ``run_id`` (its run_id, ingest_id, source_path and
        ingest options), or None."""
        if store.remote:
            import pyarrow.compute as pc

            table = store.read_table("runs", columns=["run_id", *_LOOKUP_COLUMNS])
            rows = table.filter(pc.field("run_id") == run_id).to_pylist()
            return rows[0] if rows else None
        files = store.file_uris("runs")
        if not files:
            return None
        if self._con is None:
            con = duckdb.connect(config={"threads": 1})
            con.execute("SET parquet_metadata_cache = true")
            self._con = con
        cur = self._con.execute(
            # hive_partitioning off: a `key=value` folder above the warehouse is no column;
            # by name: files written before a column was added lack it
            "SELECT * FROM read_parquet(?, hive_partitioning = false, union_by_name = true) "
            "WHERE run_id = ? LIMIT 1",
            [[glob_escaped(f) for f in files], run_id],
        )
        names = [d[0] for d in cur.description or ()]
        found = cur.fetchall()
        if not found:
            return None
        row = dict(zip(names, found[0], strict=True))
        return {k: row.get(k) for k in ("run_id", *_LOOKUP_COLUMNS)}

    def close(self) -> None:
        """Close the connection (a later lookup opens another)."""
        con, self._con = self._con, None
        if con is not None:
            con.close()


#: ``runs`` columns that record the ingest options a run was written with
_OPTION_COLUMNS = ("steps_limit", "skip_python", "step_marker")
#: what :meth:`RunsLookup.existing` gives besides the run_id
_LOOKUP_COLUMNS = ("ingest_id", "source_path", "ingested_at", *_OPTION_COLUMNS)


def _this_command(existing: dict[str, Any], options: IngestOptions) -> bool:
    """Whether ``existing`` (a ``runs`` row) was written by this very ingest command (its
    ``ingested_at``): a cluster task run again after its worker died finds its own runs."""
    at = existing.get("ingested_at")
    return at is not None and options.ingested_at is not None and at == options.ingested_at


def option_changes(existing: dict[str, Any], options: IngestOptions) -> list[str]:
    """The ingest options that differ from those ``existing`` (a ``runs`` row) was written
    with, in words (``--steps 8 (was 4)``); empty when they agree or are not recorded."""
    out = []
    if "steps_limit" in existing and existing.get("steps_limit") != options.steps:
        was = existing.get("steps_limit")
        out.append(f"--steps {options.steps if options.steps is not None else 'all'} "
                   f"(was {was if was is not None else 'all'})")
    if existing.get("skip_python") is not None and bool(existing["skip_python"]) != options.skip_python:
        out.append(f"{'--skip-python' if options.skip_python else 'python events kept'} "
                   f"(was {'--skip-python' if existing['skip_python'] else 'kept'})")
    if "step_marker" in existing and existing.get("step_marker") != options.step_marker:
        was = existing.get("step_marker")
        out.append(f"--step-marker {options.step_marker!r} (was {was!r})" if options.step_marker
                   else f"ProfilerStep#N steps (was --step-marker {was!r})")
    return out


class Linker(Protocol):
    """The link strategy: how a staged file's linkage and tables are written.

    :class:`~tracewh.ingest.derive.OneFile` (now, alone) or
    :class:`~tracewh.ingest.group.TinyGroup` (a tiny trace joins the batch's group and is
    written with it; a bigger one is written alone).
    """

    @property
    def connections(self) -> StageConnections | None:
        """The staging connection kept between the files of a task (a group's), or None."""
        ...

    @property
    def run_ids(self) -> set[str]:
        """Runs staged and waiting to be written."""
        ...

    def write(self, job: FileJob, staged: Staged, staging: Path, labels: dict[str, str],
              check: Callable[[], None]) -> FileResult | None:
        """Write ``job``'s run: its result, or None when it waits for its group (which then
        owns ``staging`` and hands its result to the commit batch)."""
        ...


def ingest_file(
    store: Store, path: Path, options: IngestOptions, *, commit: Committer | None = None,
    linker: Linker | None = None, stager: Stager | None = None, runs: RunsLookup | None = None,
) -> FileResult:
    """Ingest one trace file into ``store``; never raises for a bad file.

    Returns a :class:`FileResult` whose ``outcome`` is ``ingested``,
    ``replaced`` (``--force`` over an existing run), ``skipped`` (same bytes
    already ingested) or ``failed`` (``error`` names the file and the problem).

    The variants are strategy objects, chosen once by the caller (a batch's task,
    :mod:`tracewh.ingest.tasks`) or here: ``commit`` (a
    :class:`~tracewh.ingest.commit.Committer`; default: a
    :class:`~tracewh.ingest.direct.DirectCommit`, the file commits alone; a
    :class:`~tracewh.ingest.batchcommit.CommitBatch` defers its commits to the batch's flush,
    the final results then coming from ``take()`` / ``close()``, this one provisional),
    ``linker`` (a :class:`Linker`; default: a :class:`~tracewh.ingest.derive.OneFile` over
    ``commit``; a :class:`~tracewh.ingest.group.TinyGroup` writes a tiny trace, once staged,
    with the group's other tiny traces), ``stager`` (default: :func:`stager_for`
    ``options.native``) and ``runs`` (the task's :class:`RunsLookup`; default: one for this
    file alone).
    """
    commit = commit if commit is not None else DirectCommit(store)
    linker = linker if linker is not None else OneFile(store, options, commit)
    stager = stager if stager is not None else stager_for(options.native)
    started = now_utc()
    t0 = time.perf_counter()
    path = Path(os.path.abspath(path))
    ingest_id: str | None = None
    sha: str | None = None
    size = 0
    run_id: str | None = None
    try:
        try:
            before = stamp(path)
            sha, size = sha256_file(path)
        except OSError as exc:
            raise TraceFormatError(path, f"cannot read: {exc.strerror or exc}") from exc
        run_id = sha[:16]
        commit.begin_file()
        # writers (shared): a `compact --retain-hours 0` (exclusive) waits for this ingest
        with commit.held("writers", shared=True), commit.held(f"run-{run_id}"):
            if runs is None:
                lookup = RunsLookup()
                try:
                    existing = lookup.existing(store, run_id)
                finally:
                    lookup.close()
            else:
                existing = runs.existing(store, run_id)
            if existing is None and (run_id in commit.run_ids or run_id in linker.run_ids):
                # the same bytes twice in one batch (even with --force): once is enough
                existing = {"source_path": "an earlier file of this batch"}
            if existing is not None and (not options.force or "ingest_id" not in existing):
                changed = option_changes(existing, options) if "ingest_id" in existing else []
                why = (f"; skipped although the options differ: {', '.join(changed)}: "
                       "--force re-ingests it with the new options" if changed else "")
                by = ("by this ingest command: an earlier attempt of its task committed it, "
                      if _this_command(existing, options) else "")
                result = FileResult(
                    str(path), "skipped", run_id,
                    error=f"already ingested {by}(run {run_id} from {existing['source_path']}){why}",
                    bytes=size, seconds=time.perf_counter() - t0,
                )
            else:
                ingest_id = uuid.uuid4().hex
                job = FileJob(path, run_id, ingest_id, sha, size, existing is not None, started, t0)
                with commit.held(f"ingest-{ingest_id}"):
                    done = _ingest_locked(store, job, before, options, commit, linker, stager)
                if done is None:  # the group writes it and gives its result to the batch
                    return FileResult(str(path), "ingested", run_id, bytes=size)
                result = done
    except DuplicateRunError:  # object stores: the same bytes, committed concurrently
        result = FileResult(
            str(path), "skipped", run_id,
            error=f"already ingested by a concurrent ingest (run {run_id})",
            bytes=size, seconds=time.perf_counter() - t0,
        )
    except BaseException as exc:
        failed = error_result(exc, path, run_id, size, t0)
        if failed is None:
            raise
        result = failed
    return commit.finish(result, ingest_id=ingest_id, sha=sha, started=started)


def _ingest_locked(
    store: Store, job: FileJob, before: tuple[int, int, int, int], options: IngestOptions,
    commit: Committer, linker: Linker, stager: Stager,
) -> FileResult | None:
    """Stage ``job``'s file and hand it to ``linker``; None when its group took it."""
    path = job.path
    labels = {**read_sidecar_labels(path), **options.labels}
    staging = store.new_staging(job.ingest_id)
    deferred = False
    try:
        staged = stage_file(
            path, staging, parts=options.parts, skip_python=options.skip_python,
            memory_limit=options.stage_memory_limit, min_split_bytes=options.min_split_bytes,
            stager=stager, connections=linker.connections,
        )
        unchanged = functools.partial(
            check_unchanged, path, before, job.sha, (staged.file_sha256, staged.file_bytes)
        )
        unchanged()
        if staged.events == 0:
            raise TraceFormatError(path, "traceEvents is empty: nothing to ingest")
        result = linker.write(job, staged, staging, labels, unchanged)
        deferred = result is None  # its staging folder is the group's now
        return result
    except BaseException:
        commit.drop(job.ingest_id)  # nothing of it stays: its written files or rows go
        raise
    finally:
        if not deferred:
            store.remove_staging(staging)


__all__ = ["FileResult", "IngestOptions", "Linker", "RunsLookup", "ingest_file", "read_sidecar_labels"]
