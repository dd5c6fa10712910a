"""The fast Delta log reader gives delta-rs's live files, in delta-rs's order, or declines."""

from __future__ import annotations

import datetime as dt
import json
import urllib.parse
from pathlib import Path

import pyarrow as pa
import pytest

from tracewh.schema.arrow import EVENTS
from tracewh.storage import deltalog
from tracewh.storage.store import Store


def _commit(store: Store, i: int, day: dt.date) -> None:
    row = {"run_id": f"r{i}", "ingest_id": f"i{i}", "day": day, "event_index": i, "name": "k"}
    table = pa.Table.from_pylist([row], schema=EVENTS)
    store.append("events", lambda: table)


def _delta_rs(store: Store, name: str) -> list[str]:
    """delta-rs's live files, as local paths (it percent-encodes them)."""
    return [urllib.parse.unquote(u.removeprefix("file://")) for u in store.table(name).file_uris()]


def _ours(store: Store, name: str, cache: Path) -> list[str]:
    found = deltalog.live_files(store.table_uri(name), cache_dir=cache)
    assert found is not None
    return [p for p, _ in found]


@pytest.fixture()
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "w h")  # a space: delta-rs percent-encodes the paths in the log
    s.create()
    return s


def test_commits_checkpoints_and_compaction_match_delta_rs(store: Store, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert _ours(store, "events", cache) == _delta_rs(store, "events") == []
    days = [dt.date(2025, 1, 1 + i % 3) for i in range(23)]
    for i, day in enumerate(days):
        _commit(store, i, day)
        if i in (0, 8, 9, 10, 22):  # before, at and after the checkpoints of versions 10, 20
            assert _ours(store, "events", cache) == _delta_rs(store, "events")
    log = Path(store.table_uri("events")) / "_delta_log"
    assert list(log.glob("*.checkpoint.parquet")), "the table should have checkpoints by now"
    assert list(cache.glob("checkpoint-*.json")), "the checkpoint should have been cached"
    # the cached checkpoint gives the same answer as a fresh read
    assert _ours(store, "events", cache) == _ours(store, "events", tmp_path / "other-cache")
    # partition values come along
    found = deltalog.live_files(store.table_uri("events"), cache_dir=cache)
    assert found is not None
    assert sorted({v["day"] for _, v in found if v["day"]}) == ["2025-01-01", "2025-01-02", "2025-01-03"]
    # a compaction removes files and adds merged ones; a checkpoint after it
    dt_ = store.table("events")
    dt_.optimize.compact()
    dt_.create_checkpoint()
    assert sorted(_ours(store, "events", cache)) == sorted(_delta_rs(store, "events"))
    assert len(_ours(store, "events", cache)) == 3  # one file per day partition
    assert _ours(store, "events", cache) == _delta_rs(store, "events")


def test_snapshot_files_fast_path_equals_delta_rs(store: Store) -> None:
    for i in range(12):
        _commit(store, i, dt.date(2025, 2, 1 + i % 2))
    files = store.snapshot_files()
    assert files["events"] == _delta_rs(store, "events")
    only = store.snapshot_files(days=[dt.date(2025, 2, 2)])
    assert sorted(only["events"]) == sorted(p for p in _delta_rs(store, "events") if "day=2025-02-02" in p)
    assert only["ingest_log"] == []
    later = store.snapshot_files(since=dt.date(2025, 2, 2))
    assert sorted(later["events"]) == sorted(only["events"])


def test_declines_what_it_does_not_read(store: Store, tmp_path: Path) -> None:
    for i in range(3):
        _commit(store, i, dt.date(2025, 3, 1))
    log = Path(store.table_uri("events")) / "_delta_log"
    assert deltalog.live_files(log.parent, cache_dir=tmp_path) is not None
    # a reader feature (deletion vectors, column mapping...): delta-rs decides
    (log / "00000000000000000004.json").write_text(
        json.dumps({"protocol": {"minReaderVersion": 3, "minWriterVersion": 7,
                                 "readerFeatures": ["deletionVectors"]}}) + "\n"
    )
    assert deltalog.live_files(log.parent, cache_dir=tmp_path) is None
    (log / "00000000000000000004.json").unlink()
    # a gap in the commits (log cleanup without a checkpoint)
    (log / "00000000000000000001.json").unlink()
    assert deltalog.live_files(log.parent, cache_dir=tmp_path) is None
    # no log at all
    with pytest.raises(FileNotFoundError):
        deltalog.live_files(tmp_path / "nothing")


def test_deletion_vector_in_a_commit_declines(store: Store, tmp_path: Path) -> None:
    _commit(store, 0, dt.date(2025, 3, 1))
    log = Path(store.table_uri("events")) / "_delta_log"
    add = {"add": {"path": "day=2025-03-01/x.parquet", "partitionValues": {"day": "2025-03-01"},
                   "size": 1, "modificationTime": 0, "dataChange": True,
                   "deletionVector": {"storageType": "u", "pathOrInlineDv": "x", "offset": 1,
                                      "sizeInBytes": 1, "cardinality": 1}}}
    (log / "00000000000000000002.json").write_text(json.dumps(add) + "\n")
    assert deltalog.live_files(log.parent, cache_dir=tmp_path) is None


def test_checkpoint_cache_is_private_and_checked(store: Store, tmp_path: Path) -> None:
    """The checkpoint cache decides which files a query reads: it lives in the same private
    folder as the catalog (0700), and a cached file others could write is not trusted."""
    for i in range(11):
        _commit(store, i, dt.date(2025, 4, 1))
    cache = tmp_path / "cache"
    assert _ours(store, "events", cache) == _delta_rs(store, "events")
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    # the paths (what live_files reads) and their stats beside them (read only by live_adds)
    (cached,) = [p for p in cache.glob("checkpoint-*.json") if not p.name.endswith(".stats.json")]
    (stats,) = cache.glob("checkpoint-*.stats.json")
    assert oct(cached.stat().st_mode & 0o777) == oct(stats.stat().st_mode & 0o777) == "0o600"
    assert [a[0] for a in deltalog.live_adds(store.table_uri("events"), cache_dir=cache) or []] \
        == _ours(store, "events", cache)
    planted = json.dumps([["day=2025-04-01/planted.parquet"], [{"day": "2025-04-01"}]])
    cached.write_text(planted)
    cached.chmod(0o666)  # writable by others: read again from the checkpoint, not from it
    assert _ours(store, "events", cache) == _delta_rs(store, "events")
    cache.chmod(0o777)  # a folder others could enter is tightened (it is ours)
    assert _ours(store, "events", cache) == _delta_rs(store, "events")
    assert oct(cache.stat().st_mode & 0o777) == "0o700"


def test_the_cache_keeps_one_checkpoint_a_table(store: Store, tmp_path: Path) -> None:
    """A table's newer checkpoint replaces its older entries (the cache does not grow with every
    checkpoint), another table's stay, and entries of the cache's earlier formats go."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    old_format = cache / ("checkpoint-" + "a" * 24 + ".json")
    old_format.write_text("[]")
    old_format.chmod(0o600)
    someone_elses = cache / "notes.txt"  # not a cache entry: never touched
    someone_elses.write_text("x")
    for i in range(11):
        _commit(store, i, dt.date(2025, 4, 1))
    assert _ours(store, "events", cache) == _delta_rs(store, "events")
    first = sorted(p.name for p in cache.glob("checkpoint-*"))
    assert len(first) == 2 and not old_format.exists() and someone_elses.exists()
    for i in range(11, 21):  # a checkpoint at version 20
        _commit(store, i, dt.date(2025, 4, 2))
    assert _ours(store, "events", cache) == _delta_rs(store, "events")
    second = sorted(p.name for p in cache.glob("checkpoint-*"))
    assert len(second) == 2 and set(first).isdisjoint(second)
    assert second[0].removesuffix(".json") + ".stats.json" == second[1]
    # the stats of the entry kept are what live_adds reads
    adds = deltalog.live_adds(store.table_uri("events"), cache_dir=cache) or []
    assert [a[0] for a in adds] == _delta_rs(store, "events") and all(a[2] for a in adds)


def test_the_cache_drops_the_oldest_entries_past_its_cap(
        store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries of tables no longer read (removed or temporary warehouses) do not pile up:
    past the cap, the least recently written entry files go; the new entry, files that are
    not entries and entries that are not this user's own stay."""
    import os

    from tracewh.storage import checkpoints

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    stale = []
    for k in range(6):  # three gone tables' entries, oldest first
        p = cache / f"checkpoint-{k // 2:012x}-{'b' * 24}{'.stats' if k % 2 else ''}.json"
        p.write_text("[]")
        p.chmod(0o600)
        os.utime(p, ns=(10**9 * (k + 1), 10**9 * (k + 1)))
        stale.append(p)
    foreign = cache / f"checkpoint-{'f' * 12}-{'c' * 24}.json"  # others could write it: not ours
    foreign.write_text("[]")
    foreign.chmod(0o666)
    other = cache / "catalog-0123456789abcdef.duckdb"
    other.write_text("x")
    monkeypatch.setattr(checkpoints, "MAX_ENTRY_FILES", 6)
    for i in range(11):
        _commit(store, i, dt.date(2025, 4, 1))
    assert _ours(store, "events", cache) == _delta_rs(store, "events")
    # the new entry (2 files) + 4 of the 6 stale ones: the 2 oldest went
    assert [p.exists() for p in stale] == [False, False, True, True, True, True]
    assert foreign.exists() and other.exists()
    assert len([p for p in cache.glob("checkpoint-*") if p.stat().st_mode & 0o777 == 0o600]) == 6
