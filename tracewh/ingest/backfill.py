"""Store the fingerprints (and history series) of runs ingested before their table existed.

Such a run's ``runs.rows_json`` has no ``fingerprints`` entry and no ``fingerprints`` row
carries its ``(run_id, ingest_id)`` (a newer run whose row was lost is treated alike: its
row comes back, and ``verify`` then finds the count it recorded). Its row is computed from
its own stored tables by the
``run_fingerprints_in`` macro (``sql/08_fingerprints.sql``, the ingest's definition applied
to ``gpu_ops``/``events``); the API runs that query and hands the rows to
:func:`add_fingerprints`, which commits them (``tracewh compact`` does both).

Visibility: a backfilled row carries the run's current ``ingest_id``, so readers see it
exactly while that version of the run is visible (the usual rule: a child row is visible
when ``runs`` holds its ``(run_id, ingest_id)``); the run is already visible, and the row
is complete in its one commit, so a reader sees the fingerprint or not, never part of it
(and without it, history commands compute the same signature from the tables). A
``--force`` re-ingest that replaces the run meanwhile writes its own fingerprint under a
new ``ingest_id``; the backfilled row is then an invisible orphan, removed by the next
cleanup like any replaced row.

Concurrency: every row is added by one overwrite whose predicate names exactly the
``(run_id, ingest_id)`` pairs added, on a snapshot checked (after the ``runs`` snapshot,
so a run committed meanwhile is seen with its ingest-time row) to hold none of them:
delta-rs rejects the commit when a concurrent one added a matching row, and the retry
finds it and leaves it alone (the same conditional insert as ``runs`` on object stores,
:meth:`tracewh.storage.store.Store._insert_runs`). So two backfills at once, on one machine or
two, add each row once. The ``writers`` lock is held shared, as by every write (a
``compact --retain-hours 0`` vacuum excludes it), and a local ``backfill-fingerprints``
lock keeps two processes of one machine from computing the same rows twice.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tracewh.schema.arrow import TABLES
from tracewh.storage.store import Store, writer_properties

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

_RETRIES = 20
_ID = re.compile(r"^[0-9A-Za-z_-]{1,64}$")

#: The local lock of a fingerprints backfill (see the module docstring).
LOCK = "backfill-fingerprints"


def _wanted(store: Store, table: str, rows: pa.Table, version: int, *, unique: bool) -> pa.Table:
    """The rows still missing: their run visible with that ``ingest_id``, with no row yet
    (with ``unique``, the first row of each run only)."""
    import pyarrow as pa

    runs = store.read_table("runs", columns=["run_id", "ingest_id"])
    visible = set(zip(runs.column("run_id").to_pylist(), runs.column("ingest_id").to_pylist(),
                      strict=True))  # fmt: skip
    # read after runs: a run committed in between shows with its ingest-time row
    have_t = store.read_table(table, columns=["run_id", "ingest_id"], version=version)
    have = set(zip(have_t.column("run_id").to_pylist(), have_t.column("ingest_id").to_pylist(),
                   strict=True))  # fmt: skip
    keys = list(zip(rows.column("run_id").to_pylist(), rows.column("ingest_id").to_pylist(),
                    strict=True))  # fmt: skip
    seen: set[tuple[str, str]] = set()
    mask = []
    for k in keys:
        # ids are hex (run ids: the trace's hash, ingest ids: uuid4 hex): safe in a predicate
        ids_ok = all(isinstance(x, str) and _ID.match(x) for x in k)
        mask.append(ids_ok and k in visible and k not in have and not (unique and k in seen))
        seen.add(k)
    return rows.filter(pa.array(mask, type=pa.bool_())) if keys else rows


def add_fingerprints(store: Store, rows: pa.Table) -> int:
    """Commit backfilled ``fingerprints`` rows that are still missing; how many were added.

    Parameters
    ----------
    store
        The warehouse.
    rows
        Rows of ``run_fingerprints_in`` (the columns of the ``fingerprints`` table).

    Returns
    -------
    int
        The rows committed: those whose run is still visible with the same ``ingest_id``
        and has no row yet (a concurrent backfill's rows are kept).
    """
    return add_rows(store, "fingerprints", rows, unique=True)


def add_rows(store: Store, table: str, rows: pa.Table, *, unique: bool = False) -> int:
    """Commit backfilled rows of a derived run-child ``table`` (``fingerprints``, ``run_series``).

    The rules of the module docstring, for any table whose rows a run gets once: only the
    rows of runs still visible with the same ``ingest_id`` and holding no row of ``table``
    yet are committed (every row of such a run, in one commit; with ``unique``, a run has
    one row: only its first is kept).

    Returns
    -------
    int
        The rows committed.
    """
    from deltalake import write_deltalake
    from deltalake.exceptions import CommitFailedError

    spec = TABLES[table]
    if rows.num_rows == 0:
        return 0
    rows = rows.select(spec.schema.names).cast(spec.schema)
    with store.lock("writers", shared=True), store.lock(f"backfill-{table}"):
        for attempt in range(_RETRIES):
            snapshot = store.table(table)
            todo = _wanted(store, table, rows, snapshot.version(), unique=unique)
            if todo.num_rows == 0:
                return 0
            pairs = sorted(set(zip(todo.column("run_id").to_pylist(),
                                   todo.column("ingest_id").to_pylist(), strict=True)))
            predicate = " OR ".join(f"(run_id = '{r}' AND ingest_id = '{i}')" for r, i in pairs)
            try:
                write_deltalake(
                    snapshot, todo, mode="overwrite", predicate=predicate,
                    partition_by=list(spec.partition_by) or None,
                    writer_properties=writer_properties(),
                )
                return int(todo.num_rows)
            except CommitFailedError:
                if attempt == _RETRIES - 1:
                    raise
                time.sleep(0.05 * (attempt + 1))
    return 0


def backfill(store: Store, sql: Callable[..., pl.DataFrame], *, batch: int = 64) -> int:
    """Store the fingerprint of every visible run without one; how many were added.

    ``sql(query, params, days=...)`` runs a read-only query over the warehouse's views (the
    facade's :meth:`~tracewh.api.Warehouse.sql`): the runs without a fingerprint, then their
    signatures (``run_fingerprints_in``), ``batch`` runs (of their day partitions) per
    query and commit (:func:`add_fingerprints`).
    """
    missing = sql(
        "SELECT r.run_id, r.day FROM runs r "
        "WHERE NOT EXISTS (SELECT 1 FROM fingerprints f WHERE f.run_id = r.run_id) "
        "ORDER BY r.day, r.run_id"
    )
    todo: list[tuple[Any, ...]] = list(missing.iter_rows())
    added = 0
    for i in range(0, len(todo), batch):
        chunk = todo[i : i + batch]
        rows = sql(
            "SELECT * FROM run_fingerprints_in($ids)", {"ids": [r for r, _ in chunk]},
            days={d for _, d in chunk},
        )
        added += add_fingerprints(store, rows.to_arrow())
    return added
