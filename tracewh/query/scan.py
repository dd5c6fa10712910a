"""A table's visible rows as a Polars LazyFrame, read from the snapshot's Parquet files."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from tracewh.core.errors import UsageError
from tracewh.query.session import Session

if TYPE_CHECKING:
    from datetime import date

    import polars as pl

__all__ = ["scan"]


def scan(session: Session, table: str, *, days: Collection[date] | None = None) -> pl.LazyFrame:
    """``table``'s visible rows (a run child table's rows whose run is committed).

    ``days``: of a run child table partitioned by ``day``, only the files of those partitions
    are read (a run's rows are all in its ``day``: a scan of one run then costs the same
    whatever the warehouse's size); other tables are read whole.
    Inside :meth:`Session.session`, the session's snapshot. The snapshot's Parquet files
    are read, not ``pl.scan_delta``: that goes through delta-rs's pyarrow dataset, after
    which the process may abort at exit (pola-rs/polars#24169).
    """
    from tracewh.schema.arrow import TABLES

    if table not in TABLES:
        raise UsageError(f"unknown table {table!r} (tables: {', '.join(TABLES)})")
    session.store.require()
    runs = _scan_files(session, "runs").select("run_id", "ingest_id")
    frame = _scan_files(session, table, days=days)
    if not TABLES[table].is_run_child:
        return frame
    return frame.join(runs, on=["run_id", "ingest_id"], how="semi")


def _scan_files(
    session: Session, table: str, *, days: Collection[date] | None = None
) -> pl.LazyFrame:
    """A LazyFrame over the snapshot's files of ``table`` (with ``days``: of those ``day``
    partitions, see :func:`scan`), typed as :mod:`tracewh.schema.arrow` says."""
    import polars as pl

    from tracewh.schema.arrow import TABLES

    spec = TABLES[table]
    schema = pl.Schema(pl.DataFrame(spec.schema.empty_table()).schema)
    pinned = session.pinned
    if days is not None:
        files = session.snapshot([(table, spec.is_run_child)], days=days, since=None).get(table, [])
    elif pinned is not None:
        files = [path for path, _ in pinned.live.get(table, [])]
    else:
        files = session.store.file_uris(table)
    if not files:
        return pl.LazyFrame(schema=schema)
    # no hive partitioning (it would read every key=value folder of the whole path):
    # the partition value comes from the file's own folder name
    # files written before a column was added (schema.ADDED_COLUMNS) lack it: NULL there
    frame = pl.scan_parquet(
        files, hive_partitioning=False, include_file_paths="__file",
        storage_options=session.store.options, missing_columns="insert",
    )
    day = pl.col("__file").str.extract(r"/day=(\d{4}-\d{2}-\d{2})/[^/]*$", 1)
    return frame.select([
        (day.str.to_date() if c in spec.partition_by else pl.col(c)).cast(t).alias(c)
        for c, t in schema.items()
    ])
