"""Check and tidy a warehouse: ``tracewh verify`` and ``tracewh compact``.

verify checks that (1) every data file the Delta logs reference exists, has
the recorded size and a readable Parquet footer; (2) every visible run has
exactly the rows it recorded in ``runs.rows_json`` in each child table; (3)
no run is listed twice. Leftovers of crashed ingests (invisible orphan rows,
unreferenced files, staging folders) are reported but do not fail it: they
are invisible to queries and removed by the next ingest or by compact.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from tracewh.ingest.cleanup import cleanup, find_orphans
from tracewh.schema import CHILD_TABLES, TABLES
from tracewh.store import Store


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


def _check_files(store: Store, report: VerifyReport, fs: Any) -> dict[str, list[str]]:
    good: dict[str, list[str]] = {}
    for name in TABLES:
        actions = store.add_actions(name)
        root = store.table_uri(name)
        referenced: set[str] = set()
        paths = actions.column("path").to_pylist() if actions.num_rows else []
        sizes = actions.column("size_bytes").to_pylist() if actions.num_rows else []
        ok_files: list[str] = []
        for rel, size in zip(paths, sizes, strict=True):
            full = f"{root}/{rel}" if store.remote else str(Path(root) / rel)
            referenced.add(os.path.normpath(rel))
            report.files += 1
            problem = _file_problem(fs, full, rel, size)
            if problem is not None:
                report.problems.append(f"{name}: {problem}")
                continue
            ok_files.append(full)
        good[name] = ok_files
        unreferenced = _data_files(fs, root) - referenced
        if unreferenced:
            report.notes.append(
                f"{name}: {len(unreferenced)} unreferenced data file(s) from failed commits "
                "(invisible; removed by `tracewh compact` once older than the retention)"
            )
    return good


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
        runs = con.read_parquet(files["runs"], hive_partitioning=True) if files["runs"] else None
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
            rel = con.read_parquet(files[table], hive_partitioning=True)
            for run_id, ingest_id, n in rel.aggregate(
                "run_id, ingest_id, count(*) AS n", "run_id, ingest_id"
            ).fetchall():
                counts[(table, run_id, ingest_id)] = n
        for run_id, ingest_id, rows_json in rows:
            expected: dict[str, int] = json.loads(rows_json) if rows_json else {}
            for table in CHILD_TABLES:
                want = expected.get(table, 0)
                have = counts.get((table, run_id, ingest_id), 0)
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


@dataclass(frozen=True)
class CompactReport:
    """What :func:`compact` did, per table."""

    orphan_ingests: int
    staging_removed: int
    files_before: dict[str, int]
    files_after: dict[str, int]
    vacuumed: dict[str, int]


def compact(store: Store, *, retain_hours: int = 168) -> CompactReport:
    """Remove leftovers, merge small files per partition, vacuum old unreferenced files.

    ``retain_hours`` (default one week) keeps files a reader or time-travel
    query of that age may still need; never below one hour.
    """
    retain_hours = max(1, retain_hours)
    cleaned = cleanup(store)
    before: dict[str, int] = {}
    after: dict[str, int] = {}
    vacuumed: dict[str, int] = {}
    for name in TABLES:
        dt = store.table(name)
        before[name] = len(dt.file_uris())
        if before[name] > 1:
            dt.optimize.compact()
            dt = store.table(name)
        after[name] = len(dt.file_uris())
        removed = dt.vacuum(
            retention_hours=retain_hours, dry_run=False, enforce_retention_duration=False
        )
        vacuumed[name] = len(removed)
        dt.create_checkpoint()
        dt.cleanup_metadata()
    return CompactReport(
        len(cleaned.orphan_ingests), cleaned.staging_removed, before, after, vacuumed
    )
