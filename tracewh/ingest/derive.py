"""Derive the output tables of a linked trace, copy them into the warehouse and commit.

Child tables first, the ``runs`` row last (what makes the run visible, see
:mod:`tracewh.ingest.commit`), through the commit strategy (:class:`~tracewh.ingest.commit.Committer`),
which then logs the attempt (:func:`log_row`).
"""

from __future__ import annotations

import functools
import socket
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tracewh import __version__
from tracewh.ingest.commit import copy_and_commit
from tracewh.ingest.fingerprint import minhash_table
from tracewh.ingest.link import (
    INGEST_SQL,
    OUT_TABLES,
    FileRanges,
    RunPlan,
    category_counts,
    connect_staging,
    device_names,
    gpu_slices,
    metadata_int,
    plan_runs,
    set_files,
    slice_view,
    step_warnings,
)
from tracewh.ingest.memory import parse_size, retry_on_oom, set_limit
from tracewh.ingest.options import FileJob, FileResult, IngestOptions, default_job
from tracewh.ingest.parts import write_held
from tracewh.ingest.rows import dumps
from tracewh.storage.store import Store

if TYPE_CHECKING:
    from tracewh.ingest.commit import Committer
    from tracewh.ingest.parts import Staged
    from tracewh.ingest.shred import StageConnections


T = TypeVar("T")


def now_utc() -> datetime:
    return datetime.now(UTC)


@dataclass
class OneFile:
    """The link strategy of a file on its own: link its staged parts in a connection of
    its own, write its tables and its ``runs`` row through ``commit`` (:func:`write_alone`).

    The other strategy is :class:`~tracewh.ingest.group.TinyGroup` (tiny traces of a batch
    linked and written together); both offer ``write``, ``run_ids`` and ``connections``.
    """

    store: Store
    options: IngestOptions
    commit: Committer
    #: no staging connection kept between files (a group keeps one for its tiny traces)
    connections: StageConnections | None = None

    @property
    def run_ids(self) -> set[str]:
        """Runs staged but not written yet: none (each is written when staged)."""
        return set()

    def write(self, job: FileJob, staged: Staged, staging: Path, labels: dict[str, str],
              check: Callable[[], None]) -> FileResult | None:
        """Link and write ``job``'s staged trace now; its result."""
        return write_alone(self.store, self.options, self.commit, job, staged, staging, labels, check)


def empty_outputs(con: Any) -> frozenset[str]:
    """The output tables ``con``'s runs certainly have no rows of (``35_empty_outputs.sql``:
    their driving relation is empty): their ``COPY`` is skipped, as it would write no file."""
    sql = (INGEST_SQL / "35_empty_outputs.sql").read_text(encoding="utf-8")
    return frozenset(str(r[0]) for r in con.execute(sql).fetchall())


def write_alone(store: Store, options: IngestOptions, commit: Committer, job: FileJob,
                staged: Staged, staging: Path, labels: dict[str, str],
                check: Callable[[], None]) -> FileResult:
    """Link ``job``'s staged parts (in ``staging``) and write its run; its result.

    ``check`` raises when the file changed since it was hashed: nothing of it is then
    committed. Raises what the linkage or a write raises (the caller drops the ingest).
    """
    write_held(staged)  # a part held in memory: linked from files here
    con = connect_staging(staging, staged, options)
    try:
        row, warnings = derive_and_commit(
            store, con, staged.metadata, options,
            run_id=job.run_id, ingest_id=job.ingest_id, replace=job.replace,
            base=dict(path=job.path, sha=job.sha, size=job.size, labels=labels,
                      n_events=staged.events, anomalies=staged.anomalies),
            parts=staged.parts, commit=commit, before_commit=check,
        )
    finally:
        con.close()
    return job.written(staged.events, staged.anomalies, row, warnings)


def derive_and_commit(
    store: Store,
    con: Any,
    meta: Mapping[str, Any],
    options: IngestOptions,
    *,
    run_id: str,
    ingest_id: str,
    replace: bool,
    base: Mapping[str, Any],
    parts: list[tuple[str, int]],
    commit: Committer,
    before_commit: Callable[[], None] = lambda: None,
) -> tuple[dict[str, Any], list[str]]:
    """Write the run's tables and its ``runs`` row (through ``commit``); the row and the
    step warnings."""
    limit = parse_size(options.output_memory_limit)
    set_limit(con, limit)

    def run(step: Callable[[], T]) -> T:
        """``step`` under the connection's limit, raised while DuckDB runs out of memory."""
        nonlocal limit
        result, limit = retry_on_oom(con, step, limit)
        return result

    set_files(con, [(0, run_id, ingest_id, None, 0, None, None, 0)])
    plan = plan_runs(con, {0: meta}, {0: base["anomalies"]}, options, run)[0]
    lo, hi = plan.window
    set_files(con, [(0, run_id, ingest_id, plan.day, plan.base_ns, lo, hi, 0)])
    written: dict[str, int] = {}
    ranges = FileRanges(con)
    empty = run(lambda: empty_outputs(con))
    for table, sql_file in OUT_TABLES:
        if table in empty:
            written[table] = 0
            continue
        if table == "fingerprints":
            run(lambda: minhash_table(con))
        query = (INGEST_SQL / sql_file).read_text(encoding="utf-8")
        slices = run(lambda: gpu_slices(con)) if table == "gpu_ops" else None
        on_slice = (
            (lambda lo, hi, s=slices: slice_view(con, parts, lo, hi, s.ops[lo], ranges))
            if slices is not None else None
        )
        # a slice's query is small: one DuckDB thread (the writer thread takes the other
        # core) was faster than two and lower in memory
        con.execute(f"SET threads = {1 if slices is not None else max(1, options.threads)}")
        written[table] = run(functools.partial(
            copy_and_commit, store, con, table, query, {}, day=plan.day, run_id=run_id,
            ingest_id=ingest_id, slices=slices.ranges if slices is not None else None,
            on_slice=on_slice, sink=commit,
        ))
    cat_counts = run(lambda: category_counts(con)).get(0, {})
    row = run_row(
        meta, options, plan, written, cat_counts, run_id=run_id, ingest_id=ingest_id,
        path=base["path"], size=base["size"], sha=base["sha"], labels=base["labels"],
        n_events=base["n_events"],
    )
    warnings = step_warnings(options, int(plan.summary["n_steps"] or 0))
    before_commit()  # the file is still the one hashed: else nothing becomes visible
    # a batch checks it again at its flush, right before its commits
    commit.add_run(ingest_id, row, replace=replace, check=before_commit)
    return row, warnings


def run_row(
    meta: Mapping[str, Any],
    options: IngestOptions,
    plan: RunPlan,
    written: Mapping[str, int],
    cat_counts: Mapping[str, int],
    *,
    run_id: str,
    ingest_id: str,
    path: Path,
    size: int,
    sha: str,
    labels: Mapping[str, str],
    n_events: int,
) -> dict[str, Any]:
    """The ``runs`` row of one written run."""
    summary, anomalies = plan.summary, plan.anomalies
    kept = written["events"] + written["python"]
    dropped = summary["n_duration_events"] + summary["n_python"] - kept
    names = device_names(meta)
    raw_dist = meta.get("distributedInfo")
    dist: dict[str, Any] = raw_dist if isinstance(raw_dist, dict) else {}
    backend = (
        "mtia" if summary["n_mtia"]
        else "rocm" if summary["n_hip_calls"] or any(
            k in n.upper() for n in names for k in ("AMD", "RADEON", "INSTINCT"))
        else "cuda" if summary["n_gpu_ops"] or names
        else "cpu"
    )
    return {
        "run_id": run_id,
        "ingest_id": ingest_id,
        "day": plan.day,
        "source_path": str(path),
        "file_name": path.name,
        "bytes": size,
        "sha256": sha,
        "ingested_at": options.ingested_at or now_utc(),
        "start_ns": plan.start_ns,
        "end_ns": plan.end_ns,
        "host": str(meta.get("host_name") or meta.get("hostname") or "") or None,
        "rank": metadata_int(dist.get("rank")),
        "world_size": metadata_int(dist.get("world_size")),
        "device_name": names[0] if names else None,
        "device_names": names,
        "device_count": len(names),
        "backend": backend,
        "dist_backend": str(dist["backend"]) if dist.get("backend") is not None else None,
        "trace_name": str(meta["traceName"]) if meta.get("traceName") is not None else None,
        "trace_id": str(meta["trace_id"]) if meta.get("trace_id") is not None else None,
        "schema_version": metadata_int(meta.get("schemaVersion")),
        "base_time_ns": plan.base_time,
        "job": options.job or default_job(path),
        "labels_json": dumps(dict(sorted(labels.items()))),
        "metadata_json": dumps(dict(meta), anomalies),
        "category_counts_json": dumps(dict(cat_counts)),
        "n_events": n_events,
        "n_duration_events": summary["n_duration_events"],
        "n_gpu_ops": summary["n_gpu_ops"],
        "n_kernels": summary["n_kernels"],
        "n_memcpy": summary["n_memcpy"],
        "n_memset": summary["n_memset"],
        "n_runtime": summary["n_runtime"],
        "n_cpu_ops": summary["n_cpu_ops"],
        "n_python": summary["n_python"],
        "n_instants": summary["n_instants"],
        "n_counters": summary["n_counters"],
        "n_flows": summary["n_flows"],
        "n_steps": summary["n_steps"],
        "n_unlinked_gpu_ops": summary["n_unlinked_gpu_ops"],
        "n_dropped": dropped,
        "rows_json": dumps(dict(written)),
        "steps_limit": options.steps,
        "step_marker": options.step_marker,
        "kind": summary["kind"],
        "skip_python": options.skip_python,
        "anomalies_json": dumps(dict(sorted(anomalies.items()))) if anomalies else None,
        "tracewh_version": __version__,
    }


def log_row(result: FileResult, *, sha: str | None, started: datetime) -> dict[str, Any]:
    """The ``ingest_log`` row of one attempt."""
    return {
        "attempt_id": uuid.uuid4().hex,
        "path": result.path,
        "sha256": sha,
        "run_id": result.run_id,
        "outcome": result.outcome,
        "error": result.error,
        "started_at": started,
        "finished_at": now_utc(),
        "bytes": result.bytes,
        "n_events": result.events,
        "host": socket.gethostname(),
        "tracewh_version": __version__,
    }
