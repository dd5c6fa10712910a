"""Ingest one trace file: hash, lock, stream to staging, derive, commit.

The commit order makes a run atomic across tables: every child table is
appended (one Delta commit each, rows tagged with a fresh ``ingest_id``), then
the ``runs`` row, which is what makes them visible. A failure or a kill before
that leaves only invisible rows, removed by :func:`tracewh.ingest.cleanup.cleanup`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from tracewh.core.errors import TraceFormatError
from tracewh.core.sqlfiles import glob_escaped
from tracewh.ingest.derive import derive_and_commit, finish, now_utc
from tracewh.ingest.files import check_unchanged, open_regular, stamp
from tracewh.ingest.link import connect_staging
from tracewh.ingest.options import FileResult, IngestOptions, error_result
from tracewh.ingest.parts import Staged, stage_file
from tracewh.ingest.reader import sha256_file
from tracewh.storage.store import DuplicateRunError, Store

if TYPE_CHECKING:
    from tracewh.ingest.batchcommit import CommitBatch
    from tracewh.ingest.group import TinyGroup
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
def _existing_run(store: Store, run_id: str) -> dict[str, Any] | None:
    """The committed ``runs`` row of ``run_id`` (its run_id, ingest_id, source_path), or None."""
    if store.remote:
        import pyarrow.compute as pc

        table = store.read_table("runs", columns=["run_id", "ingest_id", "source_path", *_OPTION_COLUMNS])
        rows = table.filter(pc.field("run_id") == run_id).to_pylist()
        return rows[0] if rows else None
    files = store.file_uris("runs")
    if not files:
        return None
    con = duckdb.connect(config={"threads": 1})
    try:
        cur = con.execute(
            # hive_partitioning off: a `key=value` folder above the warehouse is no column;
            # by name: files written before a column was added lack it
            "SELECT * FROM read_parquet(?, hive_partitioning = false, union_by_name = true) "
            "WHERE run_id = ? LIMIT 1",
            [[glob_escaped(f) for f in files], run_id],
        )
        names = [d[0] for d in cur.description or ()]
        found = cur.fetchall()
    finally:
        con.close()
    if not found:
        return None
    row = dict(zip(names, found[0], strict=True))
    return {k: row.get(k) for k in ("run_id", "ingest_id", "source_path", *_OPTION_COLUMNS)}


#: ``runs`` columns that record the ingest options a run was written with
_OPTION_COLUMNS = ("steps_limit", "skip_python", "step_marker")


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


def ingest_file(
    store: Store, path: Path, options: IngestOptions, *, batch: CommitBatch | None = None,
    group: TinyGroup | None = None,
) -> FileResult:
    """Ingest one trace file into ``store``; never raises for a bad file.

    Returns a :class:`FileResult` whose ``outcome`` is ``ingested``,
    ``replaced`` (``--force`` over an existing run), ``skipped`` (same bytes
    already ingested) or ``failed`` (``error`` names the file and the problem).
    With ``batch`` (a local warehouse), the file's commits wait for the batch's
    flush (:mod:`tracewh.ingest.batchcommit`): the final results come from
    ``batch.take()`` / ``batch.close()``, this one is provisional. With ``group`` too
    (the batch's :class:`~tracewh.ingest.group.TinyGroup`), a tiny trace, once staged,
    is linked and written with the group's other tiny traces when the group runs.
    """
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
        if batch is not None:
            batch.begin_file()
        # writers (shared): a `compact --retain-hours 0` (exclusive) waits for this ingest
        with _held(store, batch, "writers", shared=True), _held(store, batch, f"run-{run_id}"):
            existing = _existing_run(store, run_id)
            if existing is None and batch is not None and (
                run_id in batch.run_ids or (group is not None and run_id in group.run_ids)
            ):
                # the same bytes twice in one batch (even with --force): once is enough
                existing = {"source_path": "an earlier file of this batch"}
            if existing is not None and (not options.force or "ingest_id" not in existing):
                changed = option_changes(existing, options) if "ingest_id" in existing else []
                why = (f"; skipped although the options differ: {', '.join(changed)}: "
                       "--force re-ingests it with the new options" if changed else "")
                result = FileResult(
                    str(path), "skipped", run_id,
                    error=f"already ingested (run {run_id} from {existing['source_path']}){why}",
                    bytes=size, seconds=time.perf_counter() - t0,
                )
            else:
                ingest_id = uuid.uuid4().hex
                defer = None if group is None else group.taker(
                    path=path, run_id=run_id, ingest_id=ingest_id, sha=sha, size=size,
                    replace=existing is not None, started=started, t0=t0,
                )
                with _held(store, batch, f"ingest-{ingest_id}"):
                    done = _ingest_locked(
                        store, path, options,
                        run_id=run_id, ingest_id=ingest_id, sha=sha, size=size,
                        replace=existing is not None, batch=batch, before=before, defer=defer,
                        connections=None if group is None else group.connections,
                    )
                if done is None:  # the group writes it and gives its result to the batch
                    return FileResult(str(path), "ingested", run_id, bytes=size)
                n_events, anomalies, row, warnings = done
                result = FileResult(
                    str(path), "replaced" if existing is not None else "ingested", run_id,
                    events=n_events, bytes=size, seconds=time.perf_counter() - t0,
                    anomalies=anomalies, steps_found=row["n_steps"],
                    steps_kept=json.loads(row["rows_json"]).get("steps", 0),
                    dropped=row["n_dropped"], warnings=tuple(warnings),
                )
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
    return finish(store, batch, result, ingest_id, sha, started)


@contextlib.contextmanager
def _held(store: Store, batch: CommitBatch | None, key: str, *, shared: bool = False) -> Iterator[None]:
    """Lock ``key`` for this block, or, in a batch, until the batch's flush."""
    if batch is None:
        with store.lock(key, shared=shared):
            yield
    else:
        batch.hold(key, shared=shared)
        yield


def _ingest_locked(
    store: Store,
    path: Path,
    options: IngestOptions,
    *,
    run_id: str,
    ingest_id: str,
    sha: str,
    size: int,
    replace: bool,
    before: tuple[int, int, int, int],
    batch: CommitBatch | None = None,
    defer: Callable[[Staged, Path, dict[str, str], Callable[[], None]], bool] | None = None,
    connections: StageConnections | None = None,
) -> tuple[int, dict[str, int], dict[str, Any], list[str]] | None:
    """Stage, link and write one file; None when ``defer`` took it, once staged (a group's)."""
    labels = {**read_sidecar_labels(path), **options.labels}
    staging = store.new_staging(ingest_id)
    deferred = False
    try:
        staged = stage_file(
            path, staging, parts=options.parts, skip_python=options.skip_python,
            memory_limit=options.stage_memory_limit, min_split_bytes=options.min_split_bytes,
            native=options.native, connections=connections,
        )
        unchanged = functools.partial(
            check_unchanged, path, before, sha, (staged.file_sha256, staged.file_bytes)
        )
        unchanged()
        if staged.events == 0:
            raise TraceFormatError(path, "traceEvents is empty: nothing to ingest")
        if defer is not None and defer(staged, staging, labels, unchanged):
            deferred = True  # its staging folder is the group's now
            return None
        con = connect_staging(staging, staged, options)
        try:
            row, warnings = derive_and_commit(
                store, con, staged.metadata, options,
                run_id=run_id, ingest_id=ingest_id, replace=replace,
                base=dict(path=path, sha=sha, size=size, labels=labels,
                          n_events=staged.events, anomalies=staged.anomalies),
                parts=staged.parts, batch=batch, before_commit=unchanged,
            )
        finally:
            con.close()
        return staged.events, dict(staged.anomalies), row, warnings
    except BaseException:
        if batch is not None:
            batch.drop(ingest_id)  # nothing of it is committed: its written files go
        else:
            _discard(store, ingest_id)
        raise
    finally:
        if not deferred:
            store.remove_staging(staging)


def _discard(store: Store, ingest_id: str) -> None:
    """Best-effort removal of the child rows of a failed ingest (cleanup does it otherwise)."""
    from tracewh.ingest.cleanup import delete_ingest

    with contextlib.suppress(Exception):
        delete_ingest(store, ingest_id)


__all__ = ["FileResult", "IngestOptions", "ingest_file", "read_sidecar_labels"]
