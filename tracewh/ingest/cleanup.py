"""Remove what crashed or replaced ingests left behind.

Child rows are tagged with their ``ingest_id``; they are garbage when no
``runs`` row carries that ``ingest_id`` and no live process holds the
ingest's lock (a killed ingest, a failed one, or the rows a ``--force``
re-ingest replaced). Staging folders of dead ingests are removed too, and the lock
files of runs and ingests that no process holds.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from tracewh.core.sqlfiles import glob_escaped
from tracewh.schema.plain import tables
from tracewh.storage import deltalog
from tracewh.storage.store import Store


@dataclass(frozen=True)
class CleanupReport:
    """What :func:`cleanup` removed."""

    orphan_ingests: tuple[str, ...]
    staging_removed: int


def _stats_range(stats: str | None, key: str) -> tuple[str | None, str | None]:
    try:
        parsed = json.loads(stats) if stats else None
    except ValueError:
        return None, None
    if not isinstance(parsed, dict):
        return None, None
    lo, hi = (parsed.get("minValues") or {}).get(key), (parsed.get("maxValues") or {}).get(key)
    return (lo if isinstance(lo, str) else None), (hi if isinstance(hi, str) else None)


def table_ingest_ids(store: Store, table: str) -> set[str]:
    """Distinct ``ingest_id`` values of a table's live files (from stats where possible).

    A local table's log is replayed by :mod:`tracewh.storage.deltalog` (no delta-rs, no
    pyarrow); a file whose stats do not name one ingest (a compacted file) is read.
    """
    adds = None if store.remote else deltalog.live_adds(store.table_uri(table))
    if adds is None:
        actions = store.add_actions(table)
        if actions.num_rows == 0:
            return set()
        cols = actions.column_names
        paths = [
            f"{store.table_uri(table)}/{p if store.remote else urllib.parse.unquote(p)}"
            for p in actions.column("path").to_pylist()
        ]
        if "min.ingest_id" in cols and "max.ingest_id" in cols:
            ranges = list(zip(actions.column("min.ingest_id").to_pylist(),
                              actions.column("max.ingest_id").to_pylist(), strict=True))
        else:
            ranges = [(None, None)] * len(paths)
    else:
        paths = [path for path, _, _ in adds]
        ranges = [_stats_range(stats, "ingest_id") for _, _, stats in adds]
    ids: set[str] = set()
    unknown: list[str] = []
    for uri, (lo, hi) in zip(paths, ranges, strict=True):
        if lo is not None and lo == hi:
            ids.add(lo)
        else:  # a compacted file holding several ingests: read the column
            unknown.append(uri)
    if unknown:
        ids.update(_read_ids(store, unknown, "ingest_id"))
    return ids


def _read_ids(store: Store, files: list[str], column: str) -> set[str]:
    """Distinct non-null values of a string column over Parquet files."""
    if store.remote:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        out: set[str] = set()
        for uri in files:
            with store.filesystem().open(uri, "rb") as f:
                col = pq.read_table(f, columns=[column], partitioning=None).column(column)
            out.update(x for x in pc.unique(col).to_pylist() if x is not None)
        return out
    import duckdb

    con = duckdb.connect(config={"threads": 1})
    try:
        rows = con.execute(
            f'SELECT DISTINCT "{column}" FROM read_parquet(?, hive_partitioning = false) '
            f'WHERE "{column}" IS NOT NULL',
            [[glob_escaped(f) for f in files]],
        ).fetchall()
    finally:
        con.close()
    return {str(r[0]) for r in rows}


def visible_ingest_ids(store: Store) -> set[str]:
    """``ingest_id`` of every run in the current ``runs`` snapshot."""
    if store.remote:
        table = store.read_table("runs", columns=["ingest_id"])
        return {x for x in table.column("ingest_id").to_pylist() if x is not None}
    files = store.file_uris("runs")
    return _read_ids(store, files, "ingest_id") if files else set()


def find_orphans(store: Store) -> dict[str, set[str]]:
    """Orphan ``ingest_id`` values per child table (dead, not in ``runs``)."""
    candidates = {t: table_ingest_ids(store, t) for t in _child_tables()}
    dead = {
        i for ids in candidates.values() for i in ids if not store.is_locked(f"ingest-{i}")
    }
    # read runs only after checking the locks: an ingest that finished in between has
    # committed its runs row before releasing its lock, so it is seen here
    visible = visible_ingest_ids(store)
    return {t: (ids & dead) - visible for t, ids in candidates.items() if (ids & dead) - visible}


def _child_tables() -> tuple[str, ...]:
    return tuple(name for name, spec in tables().items() if spec.run_child)


def delete_ingest(store: Store, ingest_id: str, names: tuple[str, ...] | None = None) -> None:
    """Delete every child row of one ingest attempt (of ``names``; default: every child table)."""
    if not all(c in "0123456789abcdef" for c in ingest_id):
        raise ValueError(f"not an ingest id: {ingest_id!r}")
    for table in names if names is not None else _child_tables():
        store.delete(table, f"ingest_id = '{ingest_id}'")


#: A temporary commit file older than this belongs to a writer that died before its link.
STALE_COMMIT_S = 600.0


def remove_stale_commit_files(store: Store) -> int:
    """Remove the temporary commit files (``_delta_log/_commit_*.json.tmp``) of dead writers.

    A commit's bytes sit under such a name for the milliseconds before they are linked
    to their version (:func:`tracewh.storage.deltalog.commit`, delta-rs does the same); one
    left behind by a kill is never read (readers take ``NNN.json`` names only).
    """
    if store.remote:
        return 0
    removed = 0
    now = time.time()
    for name in tables():
        log = Path(store.table_uri(name)) / "_delta_log"
        with contextlib.suppress(OSError):
            for tmp in log.glob("_commit_*.json.tmp"):
                with contextlib.suppress(OSError):
                    if now - tmp.stat().st_mtime > STALE_COMMIT_S:
                        tmp.unlink()
                        removed += 1
    return removed


def cleanup(store: Store) -> CleanupReport:
    """Remove orphan rows and stale staging folders; safe while other ingests run."""
    removed = 0
    for folder in store.stale_staging():
        store.remove_staging(folder)
        removed += 1
    store.remove_stale_locks()  # of runs and ingests no process holds (a killed one's)
    remove_stale_commit_files(store)
    orphans = find_orphans(store)
    all_ids: set[str] = set()
    for table, ids in orphans.items():
        for ingest_id in sorted(ids):
            delete_ingest(store, ingest_id, (table,))
            all_ids.add(ingest_id)
    return CleanupReport(tuple(sorted(all_ids)), removed)
