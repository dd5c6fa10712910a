"""A Delta table's checkpoint, read with DuckDB and cached in the user's private cache folder.

:mod:`tracewh.storage.deltalog` replays a log from its latest checkpoint. Reading a
checkpoint's Parquet costs a DuckDB connection, so its ``add`` actions are cached as JSON in
the private cache folder (:mod:`tracewh.core.cache`): ``checkpoint-<table>-<key>.json`` holds
the paths and partition values, ``checkpoint-<table>-<key>.stats.json`` the files'
statistics (most of the bytes: read only by callers that want them). ``<table>`` hashes the
log's folder, ``<key>`` the checkpoint's path, size and mtime (a checkpoint is written once).
Writing a table's newer checkpoint removes its older entries, so the cache holds one a table;
and the entries of tables no longer read (warehouses removed, temporary ones) are bounded:
past :data:`MAX_ENTRY_FILES` entry files, the least recently written go.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from tracewh.core.cache import cache_folder, own_file, write_private

__all__ = ["Entry", "Unsupported", "cached_checkpoint", "protocol"]

#: One live file: its partition values and stats (None unless asked).
Entry = tuple[dict[str, str | None], str | None]


class Unsupported(Exception):
    """The log uses something this reader does not handle: ask delta-rs."""


def protocol(action: dict[str, object]) -> None:
    """Raise :class:`Unsupported` when a ``protocol`` action asks for more than reader version 1."""
    if int(action.get("minReaderVersion", 1)) > 1 or action.get("readerFeatures"):  # type: ignore[call-overload]
        raise Unsupported("a reader feature")


def cached_checkpoint(
    log: Path, parts: list[tuple[int, int, str]], cache_dir: Path | None, *, stats: bool
) -> dict[str, Entry]:
    """:func:`_read_checkpoint` as path -> (partition values, stats or None), in the
    checkpoint's order, through the cache (best effort: a cache error only reads).

    The cache holds two files per checkpoint: the paths with their partition values, and
    their stats (most of the bytes), read only when ``stats`` is asked for. Their names start
    with a hash of the log's folder: writing a table's new checkpoint removes its older ones
    (and entries of the cache's earlier formats), so the cache holds one checkpoint a table.
    """
    files = [log / name for _, _, name in parts]
    key = hashlib.sha256(b"v3")  # v3: paths and stats in two files
    for f in files:
        st = f.stat()
        key.update(f"{f.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    base = cache_folder(cache_dir)
    if base is None:  # no private folder: no cache
        return _entries(_read_checkpoint(log, parts), stats)
    table = hashlib.sha256(str(log.resolve()).encode()).hexdigest()[:12]
    name = f"checkpoint-{table}-{key.hexdigest()[:24]}"
    paths_file, stats_file = base / f"{name}.json", base / f"{name}.stats.json"
    if own_file(paths_file) and (not stats or own_file(stats_file)):
        try:
            with open(paths_file, encoding="utf-8") as fh:
                rels, values = json.load(fh)
            texts = [None] * len(rels)
            if stats:
                with open(stats_file, encoding="utf-8") as fh:
                    texts = json.load(fh)
            if len(rels) == len(values) == len(texts):
                return {str(r): (dict(v), t) for r, v, t in zip(rels, values, texts, strict=True)}
        except (OSError, ValueError, TypeError):
            pass
    adds = _read_checkpoint(log, parts)
    with contextlib.suppress(OSError):
        # the stats first: a paths file is only there with its stats beside it
        write_private(stats_file, json.dumps([st for _, _, st in adds]).encode())
        write_private(paths_file, json.dumps([[r for r, _, _ in adds], [v for _, v, _ in adds]]).encode())
        _prune(base, table, keep=name)
    return _entries(adds, stats)


#: Cache entries of earlier formats: ``checkpoint-<24 hex>.json`` (and ``.stats.json``).
_OLD_ENTRY = re.compile(r"^checkpoint-[0-9a-f]{24}(\.stats)?\.json$")
#: Any entry file of this cache (this format's and earlier ones).
_ENTRY = re.compile(r"^checkpoint-[0-9a-f-]+(\.stats)?\.json$")
#: Entry files kept at most (two a table: ~2,000 tables, ~100 warehouses of 17 tables); the
#: entries of tables no longer read would otherwise stay for good (a table's entry is only
#: replaced when that table is checkpointed again).
MAX_ENTRY_FILES = 4_000


def _prune(base: Path, table: str, *, keep: str, max_files: int | None = None) -> None:
    """Remove the cache's other entries of ``table`` (older checkpoints of its log), the
    entries of earlier formats and, past ``max_files`` (:data:`MAX_ENTRY_FILES`) entry
    files, the least recently written ones (never ``keep``'s): files of this user in the
    private cache folder, ours."""
    cap = MAX_ENTRY_FILES if max_files is None else max_files
    others: list[tuple[int, str]] = []
    with os.scandir(base) as entries:
        for entry in entries:
            if not _ENTRY.match(entry.name) or entry.name.startswith(f"{keep}."):
                continue
            if not own_file(Path(entry.path)):
                continue
            if entry.name.startswith(f"checkpoint-{table}-") or _OLD_ENTRY.match(entry.name):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
                continue
            with contextlib.suppress(OSError):
                others.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.path))
    excess = len(others) + 2 - cap  # keep's two files count
    if excess > 0:
        for _, path in sorted(others)[:excess]:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _entries(adds: list[tuple[str, dict[str, str | None], str | None]], stats: bool
             ) -> dict[str, Entry]:
    return {rel: (values, st if stats else None) for rel, values, st in adds}


def _read_checkpoint(
    log: Path, parts: list[tuple[int, int, str]]
) -> list[tuple[str, dict[str, str | None], str | None]]:
    """The ``add`` actions of a (multi-part) checkpoint, in file order; the protocol checked."""
    import duckdb  # the query path has it loaded already

    files = [str(log / name) for _, _, name in parts]
    try:
        return _checkpoint_adds(duckdb.connect(), files)
    except Unsupported:
        raise
    except Exception as exc:  # duckdb.Error and friends: a checkpoint we cannot read
        raise Unsupported(f"checkpoint: {exc}") from exc


def _checkpoint_adds(
    con: Any, files: list[str]
) -> list[tuple[str, dict[str, str | None], str | None]]:
    try:
        rel = con.read_parquet(files, hive_partitioning=False)
        types = {c: str(t) for c, t in zip(rel.columns, rel.types, strict=True)}
        if "protocol" in types:
            for (proto,) in con.execute(
                "SELECT protocol FROM read_parquet(?, hive_partitioning = false) WHERE protocol IS NOT NULL", [files]
            ).fetchall():
                protocol(proto)
        add_type = types.get("add")
        if add_type is None:
            return []
        if "deletionVector" in add_type and con.execute(
            "SELECT count(*) FROM read_parquet(?, hive_partitioning = false) WHERE add.deletionVector IS NOT NULL", [files]
        ).fetchall()[0][0]:
            raise Unsupported("deletion vectors")
        values = "map_entries(add.partitionValues)" if "partitionValues" in add_type else "NULL"
        stats = "add.stats" if "stats VARCHAR" in add_type else "NULL"
        rows = con.execute(
            f"SELECT add.path, {values}, {stats} FROM read_parquet(?, hive_partitioning = false) "
            "WHERE add IS NOT NULL AND add.path IS NOT NULL",
            [files],
        ).fetchall()
    finally:
        con.close()
    return [
        (unquote(path), {e["key"]: e["value"] for e in entries or []}, stats)
        for path, entries, stats in rows
    ]
