"""The ``run_series`` table: each run's value of every history series, stored with the run.

``changes``, ``check``, ``history`` and ``report`` read a run's step time, GPU idle fraction,
time per step of each kernel, category and module and memory peaks from here: a few hundred
rows a run instead of its events (``sql/92_run_series.sql`` defines the rows,
``series_rows``; ``series_values`` and ``metric_history`` read them back and compute the
same rows from the tables of any run without them).

Two writers, one definition:

* :func:`write_series` is the ingest's hook (``IngestOptions.derive``): a batch of ingests
  (:class:`~tracewh.ingest.batchcommit.CommitBatch`) has written its runs' child files but
  committed nothing yet; the hook reads those files and the pending ``runs`` rows and writes
  the batch's ``run_series`` file, which the batch commits with the other child tables,
  before the ``runs`` rows (the visibility rule: a reader sees a run with its series, or
  neither). A file committed alone (an object store) gets none: its series are computed
  from its tables until :func:`missing_runs` / ``tracewh migrate`` stores them.
* :func:`series_of` computes the rows of runs stored before the table (their ``run_series``
  rows are missing) from their tables, for ``tracewh migrate``, which commits them with
  :func:`tracewh.ingest.backfill.add_rows` (each batch one commit; killed midway, the runs
  not yet committed are simply still missing, and a second run finds only those).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracewh.query.db import connect_catalog, shadow_files
from tracewh.query.udfs import with_functions
from tracewh.schema.plain import tables
from tracewh.storage.bulk import insert_rows

if TYPE_CHECKING:
    import polars as pl

#: DuckDB memory of the ingest's series query (it spills beyond, into a private folder).
WRITE_MEMORY_LIMIT = "256MB"

#: Below this many bytes of the runs' child files, the series query runs on one DuckDB thread
#: (a small run's rows take milliseconds; a second thread's buffers raised the ingest's peak).
SMALL_INPUT_BYTES = 64 << 20

#: The visible runs with no ``run_series`` row (ingested before the table, or alone on an
#: object store), with their day: what ``tracewh migrate`` computes.
MISSING_SQL = """
SELECT r.run_id, r.day FROM runs r
WHERE r.run_id NOT IN (SELECT run_id FROM run_series)
ORDER BY r.day, r.run_id
"""


@dataclass(frozen=True)
class MigrateReport:
    """What :meth:`tracewh.api.Warehouse.migrate` did.

    Attributes
    ----------
    series_runs
        Runs whose ``run_series`` rows were computed from their tables and stored.
    fingerprints_added
        Runs whose fingerprint was computed and stored.
    files_before, files_after
        Files of the ``run_series`` table before and after its small files were merged.
    """

    series_runs: int
    fingerprints_added: int
    files_before: int
    files_after: int

    def to_dict(self) -> dict[str, int]:
        return {"series_runs": self.series_runs, "fingerprints_added": self.fingerprints_added,
                "files_before": self.files_before, "files_after": self.files_after}  # fmt: skip


def write_series(
    out: Path, files: Mapping[str, Sequence[str]], runs: Sequence[Mapping[str, Any]],
    spill: Path | None = None,
) -> dict[str, int]:
    """Write the ``run_series`` rows of ``runs`` (computed from ``files``) into ``out``.

    Parameters
    ----------
    out
        The Parquet file to write (in the ``run_series`` table's folder; not committed here).
    files
        The child tables' files of these runs, by table name (written, not yet committed).
    runs
        The runs' pending ``runs`` rows (``{column: value}``).
    spill
        A folder to make (0700, with its parents) for DuckDB to spill into, removed after
        (the ingest passes one in its staging folder); None: a private folder in the
        system's temporary folder.

    Returns
    -------
    dict[str, int]
        Rows written per run_id (empty, and no file, when there are none).
    """
    if not runs:
        return {}
    spec = tables()["runs"]
    if spill is None:
        tmp = tempfile.mkdtemp(prefix="tracewh-series-")
    else:
        spill.mkdir(mode=0o700, parents=True)
        tmp = str(spill)
    con = connect_catalog()
    try:
        con.execute("SET temp_directory = ?", [tmp])
        con.execute("SET memory_limit = ?", [WRITE_MEMORY_LIMIT])
        if _bytes(files) < SMALL_INPUT_BYTES:  # DuckDB's per-thread buffers: ~10 MB of peak
            con.execute("SET threads = 1")
        shadow_files(con, {name: list(paths) for name, paths in files.items() if name != "runs"})
        con.execute(f"CREATE OR REPLACE TEMP TABLE raw_runs ({spec.column_defs()})")
        insert_rows(con, "temp.raw_runs", spec.columns, runs)
        select = tables()["run_series"].select_list()
        with_functions(con, lambda: con.execute(
            f"COPY (SELECT {select} FROM run_series_rows ORDER BY run_id, metric, key) "
            "TO $out (FORMAT parquet, COMPRESSION zstd)", {"out": str(out)},
        ))
        counts = {
            str(r): int(n) for r, n in con.execute(
                "SELECT run_id, count(*) FROM read_parquet($out, hive_partitioning = false) GROUP BY run_id",
                {"out": str(out)}).fetchall()
        }  # fmt: skip
    except BaseException:
        with contextlib.suppress(OSError):
            out.unlink()
        raise
    finally:
        con.close()
        shutil.rmtree(tmp, ignore_errors=True)
    if not counts:
        out.unlink(missing_ok=True)
    return counts


def _bytes(files: Mapping[str, Sequence[str]]) -> int:
    """The total size of ``files`` (a file that cannot be read counts as large)."""
    total = 0
    for paths in files.values():
        for path in paths:
            try:
                total += os.path.getsize(path)
            except OSError:
                return SMALL_INPUT_BYTES
    return total


def missing_runs(src: Any) -> list[tuple[str, date]]:
    """(run_id, day) of the visible runs of ``src`` (a Warehouse) with no ``run_series`` row."""
    frame: pl.DataFrame = src.sql(MISSING_SQL, days=set())
    return list(zip(frame["run_id"].to_list(), frame["day"].to_list(), strict=True))


def unstored_days(src: Any, *, since: date | None = None) -> set[date]:
    """The days (>= ``since``) of the visible runs of ``src`` without ``run_series`` rows.

    The only partitions a history query over the stored series must open: a warehouse
    whose runs all have them (every run ingested since the table exists, or after
    ``tracewh migrate``) opens none. Inside a session, asked once per ``since`` (a report's
    ``changes``, ``check`` and trends ask it four times).
    """
    from tracewh.history.runset import memoized

    def compute() -> frozenset[date]:
        frame: pl.DataFrame = src.sql(
            "SELECT DISTINCT r.day FROM runs r WHERE r.run_id NOT IN (SELECT run_id FROM run_series)"
            " AND ($s IS NULL OR r.day >= $s)", {"s": since}, days=set(),
        )
        return frozenset(frame["day"].to_list())

    return set(memoized(src, ("unstored_days", since), compute))


def day_chunks(runs: Sequence[tuple[str, date]], size: int) -> list[list[tuple[str, date]]]:
    """``runs`` (ordered by day) in chunks of whole days, each of about ``size`` runs."""
    out: list[list[tuple[str, date]]] = []
    for run in runs:
        if out and (len(out[-1]) < size or out[-1][-1][1] == run[1]):
            out[-1].append(run)
        else:
            out.append([run])
    return out


def migrate_series(src: Any, store: Any, *, batch: int = 64) -> int:
    """Store the ``run_series`` rows of every visible run without them; runs stored.

    ``src`` is the warehouse (queries), ``store`` its :class:`~tracewh.store.Store`. The
    runs go in chunks of whole days (about ``batch`` runs: one query over those days'
    partitions and one commit each, :func:`tracewh.ingest.backfill.add_rows`). Idempotent
    (a run with rows is never computed again) and safe to kill at any point: a chunk is
    committed whole or not at all, and a run not committed is still missing next time.
    """
    from tracewh.ingest.backfill import add_rows

    done = 0
    for chunk in day_chunks(missing_runs(src), batch):
        rows = series_of(src, chunk)
        if add_rows(store, "run_series", rows.to_arrow()):
            done += rows["run_id"].n_unique()
    return done


def series_of(src: Any, chunk: Sequence[tuple[str, date]]) -> pl.DataFrame:
    """The ``run_series`` rows of the runs of ``chunk`` computed from their tables."""
    select = tables()["run_series"].select_list()
    frame: pl.DataFrame = src.sql(
        f"SELECT {select} FROM run_series_rows WHERE run_id IN (SELECT unnest($ids))",
        {"ids": [r for r, _ in chunk]}, days={d for _, d in chunk},
    )
    return frame


__all__ = [
    "MISSING_SQL",
    "SMALL_INPUT_BYTES",
    "WRITE_MEMORY_LIMIT",
    "MigrateReport",
    "day_chunks",
    "migrate_series",
    "missing_runs",
    "series_of",
    "write_series",
]
