"""The staging tables' empty schema files: written once, cached in the private cache folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pytest

from tracewh.ingest import schemafiles
from tracewh.ingest.chunks import STAGING_TABLES


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A process that has not written the schema files yet, with its own cache folder."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setattr(schemafiles, "_SCHEMA_FILES", {})
    return cache / "tracewh"


def _no_staging_connection(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    opened: list[int] = []
    real = schemafiles.connect_stage

    def counted(*args: object, **kwargs: object) -> object:
        opened.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(schemafiles, "connect_stage", counted)
    return opened


def _dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _files(folder: Path) -> dict[str, bytes]:
    return {t: (folder / t / "schema.parquet").read_bytes() for t in STAGING_TABLES}


def _columns(path: Path) -> list[tuple[str, str]]:
    con = duckdb.connect()
    try:
        return [(str(n), str(t)) for n, t, *_ in con.execute(
            "DESCRIBE SELECT * FROM read_parquet(?)", [str(path)]).fetchall()]
    finally:
        con.close()


def test_written_once_then_read_from_the_cache(fresh: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    opened = _no_staging_connection(monkeypatch)
    first = tmp_path / "a"
    first.mkdir()
    schemafiles.copy_schema_files(first)
    assert opened == [1]
    path = schemafiles.schema_cache_path()
    assert path is not None and path.parent == fresh and path.exists()
    assert os.stat(path).st_mode & 0o777 == 0o600

    # the columns are the staging tables' (what a staging connection holds)
    con = schemafiles.connect_stage(tmp_path, memory_limit="64MB")
    try:
        for table in STAGING_TABLES:
            want = [(str(n), str(t)) for n, t, *_ in con.execute(f"DESCRIBE {table}").fetchall()]
            assert _columns(first / table / "schema.parquet") == want
    finally:
        con.close()

    # a new process (nothing in memory) reads them from the cache: no staging connection
    monkeypatch.setattr(schemafiles, "_SCHEMA_FILES", {})
    opened.clear()
    second = tmp_path / "b"
    second.mkdir()
    schemafiles.copy_schema_files(second)
    assert opened == []
    assert _files(second) == _files(first)


def test_a_folder_with_rows_gets_no_schema_file(fresh: Path, tmp_path: Path) -> None:
    folder = tmp_path / "part"
    (folder / "ev").mkdir(parents=True)
    (folder / "ev" / "fast-000000.parquet").write_bytes(b"rows")
    schemafiles.copy_schema_files(_dir(tmp_path / "other"))  # the first call writes them
    schemafiles.copy_schema_files(folder)
    assert not (folder / "ev" / "schema.parquet").exists()
    assert (folder / "gpu" / "schema.parquet").exists()


@pytest.mark.parametrize("damage", ["not json", "wrong bytes", "a table missing", "not ours"])
def test_a_damaged_or_foreign_cache_is_written_again(
        fresh: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    schemafiles.copy_schema_files(_dir(tmp_path / "a"))
    good = _files(tmp_path / "a")
    path = schemafiles.schema_cache_path()
    assert path is not None
    data = json.loads(path.read_text())
    if damage == "not json":
        path.write_text("{")
    elif damage == "wrong bytes":
        path.write_text(json.dumps({t: "QUJD" for t in data}))  # b"ABC": not Parquet
    elif damage == "a table missing":
        path.write_text(json.dumps({t: b for t, b in data.items() if t != "ev"}))
    else:
        os.chmod(path, 0o666)  # others could have written it: not trusted
    monkeypatch.setattr(schemafiles, "_SCHEMA_FILES", {})
    opened = _no_staging_connection(monkeypatch)
    schemafiles.copy_schema_files(_dir(tmp_path / "b"))
    assert opened == [1]  # written by a staging connection again, not read from the cache
    assert _files(tmp_path / "b") == good
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert {t: len(b) for t, b in json.loads(path.read_text()).items()} == {
        t: len(b) for t, b in data.items()}


def test_without_a_private_cache_folder_it_still_works(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "tracewh").symlink_to(tmp_path)  # a link is never a private folder
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    monkeypatch.setattr(schemafiles, "_SCHEMA_FILES", {})
    assert schemafiles.schema_cache_path() is None
    schemafiles.copy_schema_files(_dir(tmp_path / "a"))
    assert set(_files(tmp_path / "a")) == set(STAGING_TABLES)
    assert not list(tmp_path.glob("stage-schema-*"))


def test_the_cache_key_follows_the_ddl_and_duckdb(fresh: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Another DuckDB version, another staging DDL or another COPY: another cache file."""
    first = schemafiles.schema_cache_path()
    assert first is not None
    monkeypatch.setattr(schemafiles.duckdb, "__version__", "0.0.0-other")
    assert schemafiles.schema_cache_path() not in (None, first)
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(fresh.parent))
    monkeypatch.setattr(schemafiles, "_COPY", schemafiles._COPY.replace("lz4_raw", "zstd"))
    assert schemafiles.schema_cache_path() not in (None, first)
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(fresh.parent))
    sql = tmp_path / "sql"
    sql.mkdir()
    (sql / "00_stage_tables.sql").write_text(
        (schemafiles.INGEST_SQL / "00_stage_tables.sql").read_text() + "\n-- changed\n")
    monkeypatch.setattr(schemafiles, "INGEST_SQL", sql)
    assert schemafiles.schema_cache_path() not in (None, first)
