"""Remove what crashed or replaced ingests left behind.

Child rows are tagged with their ``ingest_id``; they are garbage when no
``runs`` row carries that ``ingest_id`` and no live process holds the
ingest's lock (a killed ingest, a failed one, or the rows a ``--force``
re-ingest replaced). Staging folders of dead ingests are removed too.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow.compute as pc
import pyarrow.parquet as pq

from tracewh.schema import CHILD_TABLES
from tracewh.store import Store


@dataclass(frozen=True)
class CleanupReport:
    """What :func:`cleanup` removed."""

    orphan_ingests: tuple[str, ...]
    staging_removed: int


def table_ingest_ids(store: Store, table: str) -> set[str]:
    """Distinct ``ingest_id`` values of a table's live files (from stats where possible)."""
    actions = store.add_actions(table)
    if actions.num_rows == 0:
        return set()
    ids: set[str] = set()
    cols = actions.column_names
    if "min.ingest_id" in cols and "max.ingest_id" in cols:
        mins = actions.column("min.ingest_id").to_pylist()
        maxs = actions.column("max.ingest_id").to_pylist()
        paths = actions.column("path").to_pylist()
        for lo, hi, rel in zip(mins, maxs, paths, strict=True):
            if lo is not None and lo == hi:
                ids.add(lo)
            else:  # a compacted file holding several ingests: read the column
                uri = f"{store.table_uri(table)}/{rel}"
                if store.remote:
                    with store.filesystem().open(uri, "rb") as f:
                        col = pq.read_table(f, columns=["ingest_id"]).column("ingest_id")
                else:
                    col = pq.read_table(uri, columns=["ingest_id"], partitioning=None).column("ingest_id")
                ids.update(x for x in pc.unique(col).to_pylist() if x is not None)
    return ids


def visible_ingest_ids(store: Store) -> set[str]:
    """``ingest_id`` of every run in the current ``runs`` snapshot."""
    table = store.read_table("runs", columns=["ingest_id"])
    return {x for x in table.column("ingest_id").to_pylist() if x is not None}


def find_orphans(store: Store) -> dict[str, set[str]]:
    """Orphan ``ingest_id`` values per child table (dead, not in ``runs``)."""
    candidates = {t: table_ingest_ids(store, t) for t in CHILD_TABLES}
    dead = {
        i for ids in candidates.values() for i in ids if not store.is_locked(f"ingest-{i}")
    }
    # read runs only after checking the locks: an ingest that finished in between has
    # committed its runs row before releasing its lock, so it is seen here
    visible = visible_ingest_ids(store)
    return {t: (ids & dead) - visible for t, ids in candidates.items() if (ids & dead) - visible}


def delete_ingest(store: Store, ingest_id: str, tables: tuple[str, ...] = CHILD_TABLES) -> None:
    """Delete every child row of one ingest attempt."""
    if not all(c in "0123456789abcdef" for c in ingest_id):
        raise ValueError(f"not an ingest id: {ingest_id!r}")
    for table in tables:
        store.delete(table, f"ingest_id = '{ingest_id}'")


def cleanup(store: Store) -> CleanupReport:
    """Remove orphan rows and stale staging folders; safe while other ingests run."""
    removed = 0
    for folder in store.stale_staging():
        store.remove_staging(folder)
        removed += 1
    orphans = find_orphans(store)
    all_ids: set[str] = set()
    for table, ids in orphans.items():
        for ingest_id in sorted(ids):
            delete_ingest(store, ingest_id, (table,))
            all_ids.add(ingest_id)
    return CleanupReport(tuple(sorted(all_ids)), removed)
