"""tracewh.ingest.pipeline: the helpers that read staged Parquet files, the gpu_ops slices."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers_ingest import delta_arrow

from tracewh.ingest import link
from tracewh.ingest.link import FileRanges as _FileRanges
from tracewh.ingest.link import parquet_files as _parquet_files
from tracewh.ingest.pipeline import IngestOptions, ingest_file
from tracewh.storage.store import Store
from tracewh.synth import SynthConfig, write_trace


def _write(path: Path, indices: list[int]) -> None:
    pq.write_table(pa.table({"event_index": pa.array(indices, pa.int64())}), path)


def test_a_slice_opens_only_the_files_that_overlap_it(tmp_path: Path) -> None:
    _write(tmp_path / "a.parquet", [0, 5, 9])
    _write(tmp_path / "b.parquet", [10, 19])
    _write(tmp_path / "c.parquet", [3, 25])  # a handed-back event far from its neighbours
    _write(tmp_path / "schema.parquet", [])
    ranges = _FileRanges()

    def names(lo: int, hi: int) -> list[str]:
        return sorted(p.name for p in ranges.overlapping(tmp_path, lo, hi))

    assert names(0, 3) == ["a.parquet"]
    assert names(9, 10) == ["a.parquet", "c.parquet"]
    assert names(10, 11) == ["b.parquet", "c.parquet"]
    assert names(20, 25) == ["c.parquet"]
    assert names(26, 100) == ["schema.parquet"]  # nothing overlaps: the columns, no rows
    (tmp_path / "schema.parquet").unlink()  # a folder of staged files only: one of them
    assert names(26, 100) == ["a.parquet"]  # (the slice's bounds filter its rows out)


def test_files_without_statistics_are_always_read(tmp_path: Path) -> None:
    pq.write_table(pa.table({"event_index": pa.array([1, 2], pa.int64())}),
                   tmp_path / "x.parquet", write_statistics=False)
    assert [p.name for p in _FileRanges().overlapping(tmp_path, 100, 200)] == ["x.parquet"]


def test_the_largest_file_comes_first(tmp_path: Path) -> None:
    """DuckDB sizes a multi-file scan by its first file: the largest one leads."""
    _write(tmp_path / "a-small.parquet", [1])
    _write(tmp_path / "b-large.parquet", list(range(10_000)))
    files = [tmp_path / "a-small.parquet", tmp_path / "b-large.parquet"]
    sql = _parquet_files(files)
    assert sql.index("b-large") < sql.index("a-small")
    assert duckdb.sql(f"SELECT count(*) FROM {sql}").fetchall() == [(10_001,)]


def test_gpu_ops_written_in_many_slices_are_the_rows_of_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slices of 7 GPU ops (each with its own operators' range) give the rows of one slice."""
    trace = tmp_path / "t.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=2, layers=2, seed=4))

    def gpu_ops(name: str) -> pl.DataFrame:
        store = Store(tmp_path / name)
        store.create()
        result = ingest_file(store, trace, IngestOptions())
        assert result.outcome == "ingested", result.error
        table = delta_arrow(tmp_path / name / "tables" / "gpu_ops")
        df = pl.from_arrow(table)
        assert isinstance(df, pl.DataFrame)
        # one file for the run's gpu_ops, its rows in event order (the slices in order)
        assert len(list((tmp_path / name / "tables" / "gpu_ops").rglob("*.parquet"))) == 1
        assert df["event_index"].is_sorted()
        return df.drop("ingest_id").sort("event_index")

    whole = gpu_ops("whole")
    assert whole.height > 7 * 10
    assert whole["op_name"].null_count() < whole.height  # operators joined
    monkeypatch.setattr(link, "GPU_SLICE_ROWS", 7)
    sliced = gpu_ops("sliced")
    assert sliced.equals(whole)
