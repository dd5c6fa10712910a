"""Check and tidy a warehouse: ``tracewh verify`` and ``tracewh compact``.

verify checks that (1) every data file the Delta logs reference exists, has
the recorded size and a readable Parquet footer; (2) every visible run has
exactly the rows it recorded in ``runs.rows_json`` in each child table (a run
ingested before the ``fingerprints`` table, whose ``rows_json`` does not name it, may
have one backfilled row there: :mod:`tracewh.ingest.backfill`); (3) no run is
listed twice. Leftovers of crashed ingests (invisible orphan rows,
unreferenced files, staging folders) are reported but do not fail it: they
are invisible to queries and removed by the next ingest or by compact.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from tracewh.core.errors import UsageError
from tracewh.core.sqlfiles import glob_escaped, sql_string
from tracewh.ingest.cleanup import cleanup, find_orphans
from tracewh.ingest.compaction import compact_table
from tracewh.schema.arrow import CHILD_TABLES, TABLES
from tracewh.storage.confined import TableBounds
from tracewh.storage.store import Store


@dataclass
class VerifyReport:
    """Problems (which fail verify) and notes (leftovers, which do not)."""

    runs: int = 0
    files: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "runs": self.runs,
            "files": self.files,
            "problems": self.problems,
            "notes": self.notes,
        }


def _data_files(fs: Any, root: str) -> set[str]:
    """Relative paths of every Parquet data file under a table folder (not the log's)."""
    if fs is None:
        found = [p.relative_to(root).as_posix() for p in Path(root).rglob("*.parquet")]
    else:
        base = fs._strip_protocol(root).rstrip("/") + "/"
        found = [p[len(base):] for p in fs.find(root) if p.startswith(base)]
    return {
        os.path.normpath(rel) for rel in found
        if rel.endswith(".parquet") and not rel.startswith("_delta_log/")
    }


def _file_problem(fs: Any, full: str, rel: str, size: int) -> str | None:
    """What is wrong with one referenced data file (local path or URL), or None."""
    if not (fs.exists(full) if fs is not None else Path(full).exists()):
        return f"data file missing: {rel}"
    actual = fs.size(full) if fs is not None else Path(full).stat().st_size
    if actual != size:
        return f"data file {rel} has {actual} bytes, the log recorded {size}"
    try:
        if fs is None:
            pq.read_metadata(full)
        else:
            with fs.open(full, "rb") as f:
                pq.read_metadata(f)
    except Exception as exc:  # pyarrow raises several types for a bad footer
        return f"data file {rel} is unreadable: {exc}"
    return None


def _log_files(fs: Any, root: str) -> list[str]:
    """The commit (``*.json``) and checkpoint (``*.parquet``) files of a table's log."""
    log = f"{root}/_delta_log"
    if fs is None:
        if not Path(log).is_dir():
            return []
        return sorted(str(p) for p in Path(log).iterdir() if p.suffix in (".json", ".parquet"))
    return sorted(
        p for p in fs.find(log) if p.endswith(".json") or p.endswith(".parquet")
    )


def superseded_files(store: Store, name: str, fs: Any = None) -> set[str]:
    """Relative paths the table's log removed (replaced by compaction, delete or ``--force``).

    Read from the ``remove`` actions of the commits and checkpoints still in
    the log (tombstones): a file referenced once and removed since, unlike the
    file of a commit that never happened.
    """
    out: set[str] = set()
    for path in _log_files(fs, store.table_uri(name)):
        # a log file being written or cleaned up meanwhile is skipped
        with contextlib.suppress(Exception), (
            fs.open(path, "rb") if fs is not None else open(path, "rb")
        ) as f:
            if path.endswith(".parquet"):
                removes = pq.read_table(f, columns=["remove"]).column("remove").to_pylist()
                out.update(r["path"] for r in removes if r and r.get("path"))
                continue
            for line in f:
                if b'"remove"' not in line:
                    continue
                action = json.loads(line).get("remove")
                if isinstance(action, dict) and action.get("path"):
                    out.add(action["path"])
    return {os.path.normpath(urllib.parse.unquote(p)) for p in out}


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB"


def _check_files(store: Store, report: VerifyReport, fs: Any) -> dict[str, list[str]]:
    good: dict[str, list[str]] = {}
    for name in TABLES:
        actions = store.add_actions(name)
        root = store.table_uri(name)
        referenced: set[str] = set()
        paths = actions.column("path").to_pylist() if actions.num_rows else []
        sizes = actions.column("size_bytes").to_pylist() if actions.num_rows else []
        ok_files: list[str] = []
        bounds = TableBounds(root, remote=store.remote)
        for rel, size in zip(paths, sizes, strict=True):
            full = f"{root}/{rel}" if store.remote else str(Path(root) / rel)
            referenced.add(os.path.normpath(rel))
            report.files += 1
            outside = bounds.problem(full)
            if outside is not None:  # never opened: the log may point anywhere
                report.problems.append(f"{name}: the log names a data file that {outside}: {rel}")
                continue
            problem = _file_problem(fs, full, rel, size)
            if problem is not None:
                report.problems.append(f"{name}: {problem}")
                continue
            ok_files.append(full)
        good[name] = ok_files
        unreferenced = _data_files(fs, root) - referenced
        superseded = unreferenced & superseded_files(store, name, fs) if unreferenced else set()
        failed = unreferenced - superseded
        if superseded:
            report.notes.append(
                f"{name}: {len(superseded)} superseded data file(s), "
                f"{_mb(_sizes(store, name, sorted(superseded), fs))}, replaced by compaction "
                "or a re-ingest (invisible; `tracewh compact` removes them once older than "
                "the retention, `--retain-hours 0` at once)"
            )
        if failed:
            report.notes.append(
                f"{name}: {len(failed)} unreferenced data file(s) from failed commits, "
                f"{_mb(_sizes(store, name, sorted(failed), fs))} (invisible; removed by "
                "`tracewh compact` once older than the retention)"
            )
    return good


def _columns_of(paths: list[str], columns: str) -> str:
    """``SELECT columns`` from data files (no hive partitioning: a ``run_id=x`` folder above
    the warehouse would override the column)."""
    listing = ", ".join(sql_string(glob_escaped(p)) for p in paths)
    return f"SELECT {columns} FROM read_parquet([{listing}], hive_partitioning = false)"


def verify(store: Store) -> VerifyReport:
    """Check the warehouse; see the module docstring."""
    report = VerifyReport()
    fs = store.filesystem() if store.remote else None
    files = _check_files(store, report, fs)
    if report.problems:
        return report
    con = duckdb.connect()
    try:
        if fs is not None:
            con.register_filesystem(fs)
        runs = con.sql(_columns_of(files["runs"], "run_id, ingest_id, rows_json")) if files["runs"] else None
        if runs is None:
            return report
        rows = runs.project("run_id, ingest_id, rows_json").fetchall()
        report.runs = len(rows)
        seen: dict[str, int] = {}
        for run_id, _, _ in rows:
            seen[run_id] = seen.get(run_id, 0) + 1
        for run_id, n in seen.items():
            if n > 1:
                report.problems.append(f"run {run_id} is listed {n} times in runs")
        counts: dict[tuple[str, str, str], int] = {}
        for table in CHILD_TABLES:
            if not files[table]:
                continue
            rel = con.sql(_columns_of(files[table], "run_id, ingest_id"))
            for run_id, ingest_id, n in rel.aggregate(
                "run_id, ingest_id, count(*) AS n", "run_id, ingest_id"
            ).fetchall():
                counts[(table, run_id, ingest_id)] = n
        for run_id, ingest_id, rows_json in rows:
            expected: dict[str, int] = json.loads(rows_json) if rows_json else {}
            for table in CHILD_TABLES:
                want = expected.get(table, 0)
                have = counts.get((table, run_id, ingest_id), 0)
                if table == "fingerprints" and table not in expected and have <= 1:
                    continue  # ingested before the table: none, or one backfilled row
                if table == "run_series" and table not in expected:
                    continue  # stored later (migrate) or never (computed when read)
                if want != have:
                    report.problems.append(
                        f"run {run_id}: {table} has {have} rows, the run recorded {want}"
                    )
    finally:
        con.close()
    orphans = find_orphans(store)
    if orphans:
        n = len({i for ids in orphans.values() for i in ids})
        report.notes.append(
            f"{n} orphan ingest(s) from crashed or replaced ingests in "
            f"{', '.join(sorted(orphans))} (invisible; removed by the next ingest or compact)"
        )
    stale = store.stale_staging()
    if stale:
        report.notes.append(f"{len(stale)} stale staging folder(s) (removed by the next ingest)")
    return report


#: Below this retention a vacuum could delete the files of a commit in progress (an
#: ingest writes a table's file, then commits it): compact then excludes every writer.
MIN_SHARED_RETAIN_HOURS = 1


@dataclass(frozen=True)
class CompactReport:
    """What :func:`compact` did, per table.

    ``retain_hours`` is the retention applied; ``clamp`` says why it differs
    from the one asked for (None when it does not). ``kept`` counts the
    unreferenced files left because they are younger than the retention, with
    their bytes; ``freed_bytes`` what the vacuum deleted; ``fingerprints_added`` the
    fingerprints stored for runs ingested before the ``fingerprints`` table (by the
    API's :meth:`~tracewh.api.Warehouse.compact`, before the merges).
    """

    orphan_ingests: int
    staging_removed: int
    files_before: dict[str, int]
    files_after: dict[str, int]
    vacuumed: dict[str, int]
    freed_bytes: dict[str, int] = field(default_factory=dict)
    kept: dict[str, tuple[int, int]] = field(default_factory=dict)
    retain_hours: int = 168
    clamp: str | None = None
    exclusive: bool = False
    fingerprints_added: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "orphan_ingests": self.orphan_ingests, "staging_removed": self.staging_removed,
            "retain_hours": self.retain_hours, "clamp": self.clamp, "exclusive": self.exclusive,
            "fingerprints_added": self.fingerprints_added,
            "tables": {
                name: {
                    "files_before": self.files_before[name],
                    "files_after": self.files_after[name],
                    "vacuumed": self.vacuumed.get(name, 0),
                    "freed_bytes": self.freed_bytes.get(name, 0),
                    "kept_files": self.kept.get(name, (0, 0))[0],
                    "kept_bytes": self.kept.get(name, (0, 0))[1],
                }
                for name in self.files_before
            },
        }


def _sizes(store: Store, name: str, rels: list[str], fs: Any) -> int:
    root = store.table_uri(name)
    total = 0
    for rel in rels:
        with contextlib.suppress(OSError):
            full = f"{root}/{rel}"
            total += int(fs.size(full)) if fs is not None else Path(full).stat().st_size
    return total


def _vacuum(store: Store, name: str, retain_hours: int, fs: Any) -> tuple[int, int, int, int]:
    """Vacuum one table: (files deleted, their bytes, files kept, their bytes)."""
    dt = store.table(name)
    kwargs: dict[str, Any] = dict(
        retention_hours=retain_hours, enforce_retention_duration=False, full=True
    )
    doomed = [_relative(store, name, p) for p in dt.vacuum(dry_run=True, **kwargs)]
    freed = _sizes(store, name, doomed, fs)
    removed = dt.vacuum(dry_run=False, **kwargs)
    referenced = {os.path.normpath(r) for r in _referenced(store, name)}
    left = sorted(_data_files(fs, store.table_uri(name)) - referenced)
    return len(removed), freed, len(left), _sizes(store, name, left, fs)


def _relative(store: Store, name: str, path: str) -> str:
    """A vacuumed file's path relative to the table (delta-rs lists them relative)."""
    root = store.table_uri(name).rstrip("/") + "/"
    return os.path.normpath(path.removeprefix(root))


def _referenced(store: Store, name: str) -> list[str]:
    actions = store.add_actions(name)
    return actions.column("path").to_pylist() if actions.num_rows else []


def compact(store: Store, *, retain_hours: int = 168) -> CompactReport:
    """Remove leftovers, merge small files per partition, vacuum old unreferenced files.

    ``retain_hours`` (default one week) keeps unreferenced files a reader of an
    older snapshot may still need: the files superseded by compaction or a
    ``--force`` re-ingest, and those of failed commits. Below
    :data:`MIN_SHARED_RETAIN_HOURS` the vacuum could delete the file of a
    commit in progress, so it then waits for running ingests and compactions
    of this machine and keeps new ones waiting (the ``writers`` lock, taken
    exclusively) while it vacuums. Readers of an older snapshot (a report, a query) hold
    the ``readers`` lock (:meth:`~tracewh.storage.store.Store.reading`): when one does, the
    retention is raised to that minimum for this run (``clamp`` says so) and the files it
    reads stay; readers starting meanwhile wait for the vacuum. On an object store, where locks are local to a machine,
    the retention is raised to that minimum instead (``clamp`` says so).
    """
    if retain_hours < 0:
        raise UsageError("--retain-hours must be >= 0")
    clamp = None
    applied = retain_hours
    exclusive = retain_hours < MIN_SHARED_RETAIN_HOURS
    if exclusive and store.remote:
        applied, exclusive = MIN_SHARED_RETAIN_HOURS, False
        clamp = (
            f"retention raised from {retain_hours} h to {applied} h: on an object store an "
            "ingest on another machine may be committing younger files"
        )
    store.check_writable()
    cleaned = cleanup(store)
    before: dict[str, int] = {}
    after: dict[str, int] = {}
    for name in TABLES:
        result = compact_table(store, name, max_files=1)
        before[name], after[name] = result.files_before, result.files_after
    fs = store.filesystem() if store.remote else None
    vacuumed: dict[str, int] = {}
    freed: dict[str, int] = {}
    kept: dict[str, tuple[int, int]] = {}
    readers = (store.lock("readers", blocking=False) if exclusive
               else contextlib.nullcontext(True))
    with store.lock("writers", shared=not exclusive), readers as alone:
        if exclusive and not alone:
            # a reader holds a snapshot whose files this vacuum would delete: keep them
            applied = MIN_SHARED_RETAIN_HOURS
            clamp = (f"retention raised from {retain_hours} h to {applied} h: a query or "
                     "report is reading the warehouse; run compact again once it is done")
        for name in TABLES:
            n, nbytes, k, kbytes = _vacuum(store, name, applied, fs)
            vacuumed[name], freed[name], kept[name] = n, nbytes, (k, kbytes)
    for name in TABLES:
        dt = store.table(name)
        dt.create_checkpoint()
        dt.cleanup_metadata()
    return CompactReport(
        len(cleaned.orphan_ingests), cleaned.staging_removed, before, after, vacuumed,
        freed, kept, applied, clamp, exclusive,
    )
