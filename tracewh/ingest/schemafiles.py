"""The staging tables' empty ``schema.parquet`` files: their columns, for readers of a part.

A staged part's folder holds ``<table>/*.parquet``; a table the part gave no rows holds an
empty ``schema.parquet`` instead, so ``read_parquet`` over the folder always has its
columns (:mod:`tracewh.ingest.shred`, the linkage group of :mod:`tracewh.ingest.group`).
The staging connection (:func:`connect_stage`) holds those tables. The files are what DuckDB writes for ``COPY (FROM <table> LIMIT 0)`` of the tables of
``sql/ingest/00_stage_tables.sql``: the same bytes every time for one DuckDB and one SQL
file. A process writes them once (a staging connection: ~25 ms of a fresh process, most
of a small trace's staging) and copies the bytes after; they are also kept in the user's
private cache folder (:mod:`tracewh.core.cache`), keyed by the SQL file, DuckDB's version,
the tables and the ``COPY`` that writes them, so the next process reads them there instead.
A cache file that is not this user's alone, or does not hold a Parquet file per table, is
written again.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any

import duckdb

from tracewh.core.categories import GPU_OP_CATEGORIES
from tracewh.ingest.chunks import INGEST_SQL, STAGING_TABLES

__all__ = ["connect_stage", "copy_schema_files", "schema_cache_path", "write_schema_files"]

#: The bytes of each staging table's empty ``schema.parquet`` (this process's, once known).
_SCHEMA_FILES: dict[str, bytes] = {}

_PARQUET_MAGIC = b"PAR1"


def connect_stage(folder: Path, *, memory_limit: str) -> Any:
    """An in-memory DuckDB connection with empty staging tables, spilling into ``folder``."""
    con = duckdb.connect(
        config={"memory_limit": memory_limit, "threads": 1, "preserve_insertion_order": True},
    )
    try:
        tmp = folder / "duckdb_tmp"
        tmp.mkdir(exist_ok=True)
        con.execute("SET temp_directory = ?", [str(tmp)])
        con.execute((INGEST_SQL / "00_stage_tables.sql").read_text(encoding="utf-8"))
        con.execute("INSERT INTO t_gpu_cats SELECT unnest($cats::VARCHAR[])",
                    {"cats": sorted(GPU_OP_CATEGORIES)})
    except BaseException:
        con.close()
        raise
    return con


#: How each schema file is written (part of the cache's key, as the DDL and DuckDB's version).
_COPY = "COPY (FROM {table} LIMIT 0) TO $out (FORMAT parquet, COMPRESSION lz4_raw)"


def write_schema_files(con: Any, folder: Path) -> None:
    """An empty ``folder/<table>/schema.parquet`` per staging table: its columns, for readers."""
    for table in STAGING_TABLES:
        out = folder / table
        out.mkdir(exist_ok=True)
        con.execute(_COPY.format(table=table), {"out": str(out / "schema.parquet")})


def schema_cache_path(cache_dir: Path | None = None) -> Path | None:
    """The cache file of the schema files in the user's private cache folder, or None."""
    from tracewh.core.cache import cache_folder

    folder = cache_folder(cache_dir)
    if folder is None:
        return None
    h = hashlib.sha256((INGEST_SQL / "00_stage_tables.sql").read_bytes())
    h.update(f"\0duckdb {duckdb.__version__}\0{','.join(STAGING_TABLES)}\0{_COPY}".encode())
    return folder / f"stage-schema-{h.hexdigest()[:16]}.json"


def _valid(files: Any) -> bool:
    return (isinstance(files, dict) and set(files) == set(STAGING_TABLES)
            and all(isinstance(b, bytes) and len(b) >= 12 and b[:4] == _PARQUET_MAGIC
                    and b[-4:] == _PARQUET_MAGIC for b in files.values()))


def _read_cache(path: Path | None) -> dict[str, bytes] | None:
    from tracewh.core.cache import own_file

    if path is None or not own_file(path):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        files = {str(t): base64.b64decode(b, validate=True) for t, b in data.items()}
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    return files if _valid(files) else None


def _write_cache(path: Path | None, files: dict[str, bytes]) -> None:
    from tracewh.core.cache import write_private

    if path is None:
        return
    data = {t: base64.b64encode(b).decode("ascii") for t, b in files.items()}
    with contextlib.suppress(OSError):  # best effort: a cache not written costs the next process
        write_private(path, json.dumps(data).encode())


def copy_schema_files(folder: Path, con: Any = None) -> None:
    """:func:`write_schema_files` from the bytes written for them once, into the tables'
    folders that hold no Parquet file yet (a staged file gives its columns as well;
    creating a file costs ~0.5 ms here, ten a part).

    The bytes come from this process's first call, else the cache file
    (:func:`schema_cache_path`), else they are written by ``con`` (or a staging
    connection of its own) and cached.
    """
    if not _SCHEMA_FILES:
        path = schema_cache_path()
        cached = _read_cache(path)
        if cached is None:
            own = con is None
            if own:
                con = connect_stage(folder, memory_limit="64MB")
            try:
                write_schema_files(con, folder)
            finally:
                if own:
                    con.close()
            written = {t: (folder / t / "schema.parquet").read_bytes() for t in STAGING_TABLES}
            _SCHEMA_FILES.update(written)
            if _valid(written):
                _write_cache(path, written)
            return
        _SCHEMA_FILES.update(cached)
    for table, data in _SCHEMA_FILES.items():
        out = folder / table
        out.mkdir(exist_ok=True)
        if next(out.glob("*.parquet"), None) is None:
            (out / "schema.parquet").write_bytes(data)
