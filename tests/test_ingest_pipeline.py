"""Helpers of tracewh.ingest.pipeline that read the staged Parquet files."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from tracewh.ingest.pipeline import _FileRanges, _parquet_files


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
