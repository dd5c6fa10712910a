"""tracewh's own Delta commits (local tables): what delta-rs and Polars read back, races, checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tracewh.api import Warehouse
from tracewh.schema.arrow import TABLES
from tracewh.storage import deltalog
from tracewh.storage.store import Store
from tracewh.synth import SynthConfig, write_trace


def _delta_rs(store: Store, name: str) -> list[str]:
    return sorted(urllib.parse.unquote(u.removeprefix("file://")) for u in store.table(name).file_uris())


def _ours(store: Store, name: str) -> list[str]:
    found = deltalog.live_files(store.table_uri(name))
    assert found is not None
    return sorted(p for p, _ in found)


def _log_actions(table_dir: Path, version: int) -> list[dict[str, object]]:
    text = (table_dir / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _empty_file(store: Store, name: str, i: int) -> deltalog.Add:
    """A real (empty-schema) Parquet file of ``name`` written by DuckDB, as an add action."""
    import duckdb

    from tracewh.schema.plain import tables

    spec = tables()[name]
    rel = (f"day=2025-01-0{1 + i % 3}/" if spec.partition_by else "") + f"part-{i:05d}-c000.zstd.parquet"
    out = Path(store.table_uri(name)) / rel
    out.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect() as con:
        con.execute(f"CREATE TABLE t ({spec.column_defs()})")
        con.execute(f"COPY (SELECT {spec.select_list()} FROM t) TO '{out}' (FORMAT parquet)")
    values = {"day": f"2025-01-0{1 + i % 3}"} if spec.partition_by else {}
    return deltalog.Add(rel, out.stat().st_size, values, int(time.time() * 1000),
                        json.dumps({"numRecords": 0}))


def test_tables_created_like_delta_rs_creates_them(tmp_path: Path) -> None:
    store = Store(tmp_path / "w h")
    store.create()
    for name, spec in TABLES.items():
        ref = tmp_path / "ref" / name
        DeltaTable.create(str(ref), spec.schema, partition_by=list(spec.partition_by) or None,
                          configuration={"delta.checkpointInterval": "10"})
        ours = {k: v for a in _log_actions(Path(store.table_uri(name)), 0) for k, v in a.items()}
        theirs = {k: v for a in _log_actions(ref, 0) for k, v in a.items()}
        assert ours["protocol"] == theirs["protocol"] == {"minReaderVersion": 1, "minWriterVersion": 2}
        assert json.loads(ours["metaData"]["schemaString"]) == json.loads(  # type: ignore[index]
            theirs["metaData"]["schemaString"])  # type: ignore[index]
        for key in ("partitionColumns", "configuration", "format"):
            assert ours["metaData"][key] == theirs["metaData"][key], (name, key)  # type: ignore[index]
        # and delta-rs opens it with the declared schema
        table = store.table(name)
        assert table.version() == 0
        assert [f.name for f in table.schema().fields] == spec.schema.names
    store.create()  # idempotent: nothing rewritten
    assert all(store.table(n).version() == 0 for n in TABLES)


def test_an_ingest_commits_what_delta_rs_and_polars_read(tmp_path: Path) -> None:
    import duckdb
    import polars as pl

    traces = tmp_path / "in"
    traces.mkdir()
    for k in range(3):
        write_trace(traces / f"r{k}.pt.trace.json.gz", SynthConfig(steps=1, layers=1, seed=70 + k))
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([traces], jobs=1).ok
    store = wh.store
    for name in TABLES:
        assert _ours(store, name) == _delta_rs(store, name), name
        files = _ours(store, name)
        rows = duckdb.sql(f"SELECT count(*) FROM read_parquet({files!r})").fetchall()[0][0] if files else 0
        assert pl.read_delta(store.table_uri(name)).height == rows, name
        # the add actions' stats say how many rows each file holds
        actions = store.add_actions(name)
        assert sum(actions.column("num_records").to_pylist()) == rows, name
    runs = pl.read_delta(store.table_uri("runs"))
    assert runs.height == 3 and runs["run_id"].n_unique() == 3
    events = pl.read_delta(store.table_uri("events"))
    assert set(events["run_id"]) == set(runs["run_id"])


def test_concurrent_commits_each_get_a_version(tmp_path: Path) -> None:
    store = Store(tmp_path / "wh")
    store.create()
    adds = [_empty_file(store, "steps", i) for i in range(24)]
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for a in adds[k::6]:
                store.add_files("steps", [a])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert deltalog.latest_version(store.table_uri("steps")) == 24  # 0 (create) + 24 appends
    root = store.table_uri("steps")
    assert _ours(store, "steps") == _delta_rs(store, "steps") == sorted(f"{root}/{a.path}" for a in adds)
    # every commit file holds one add: none was lost or written twice
    for v in range(1, 25):
        assert sum("add" in a for a in _log_actions(Path(root), v)) == 1
    log = Path(root) / "_delta_log"
    assert not list(log.glob("_commit_*")), "no temporary commit file is left behind"


def test_a_checkpoint_every_ten_versions(tmp_path: Path) -> None:
    store = Store(tmp_path / "wh")
    store.create()
    for i in range(21):
        store.add_files("runs", [_empty_file(store, "runs", i)])
    log = Path(store.table_uri("runs")) / "_delta_log"
    names = sorted(p.name for p in log.glob("*.checkpoint.parquet"))
    assert names == [f"{10:020d}.checkpoint.parquet", f"{20:020d}.checkpoint.parquet"]
    assert _ours(store, "runs") == _delta_rs(store, "runs")
    assert len(_ours(store, "runs")) == 21


def test_a_table_written_by_delta_rs_takes_our_commits(tmp_path: Path) -> None:
    """An old warehouse (every table created and appended by delta-rs) keeps working."""
    import pyarrow as pa

    from tracewh.schema.arrow import RUNS

    root = tmp_path / "old"
    uri = str(root / "tables" / "runs")
    DeltaTable.create(uri, RUNS, configuration={"delta.checkpointInterval": "10"})
    import datetime as dt

    from deltalake import write_deltalake

    row = {"run_id": "a" * 16, "ingest_id": "b" * 32, "day": dt.date(2025, 1, 1)}
    write_deltalake(uri, pa.Table.from_pylist([row], schema=RUNS), mode="append")
    store = Store(root)
    store.create()  # the other tables are added; runs is left as it is
    assert store.table("runs").version() == 1
    store.append_rows("runs", [{"run_id": "c" * 16, "ingest_id": "d" * 32, "day": dt.date(2025, 1, 2),
                                "device_names": ["x", "y"], "ingested_at": dt.datetime.now(dt.UTC)}])
    assert store.table("runs").version() == 2
    assert _ours(store, "runs") == _delta_rs(store, "runs")
    got = store.read_table("runs", columns=["run_id", "device_names"]).to_pylist()
    assert sorted((r["run_id"], r["device_names"]) for r in got) == [
        ("a" * 16, None), ("c" * 16, ["x", "y"])]


def test_a_local_ingest_does_not_load_delta_rs(tmp_path: Path) -> None:
    trace = tmp_path / "t.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=1, layers=1, seed=77))
    code = (
        "import sys; from tracewh.api import Warehouse; "
        f"r = Warehouse({str(tmp_path / 'wh')!r}).ingest([{str(trace)!r}]); "
        "assert r.ok and r.ingested, r.to_dict(); "
        "print(sorted(m for m in ('deltalake', 'polars') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("name", ["runs", "events"])
def test_add_paths_are_the_relative_paths(tmp_path: Path, name: str) -> None:
    store = Store(tmp_path / "w h")  # the space is in the root, never in a relative path
    store.create()
    add = _empty_file(store, name, 1)
    store.add_files(name, [add])
    (action,) = [a["add"] for a in _log_actions(Path(store.table_uri(name)), 1) if "add" in a]
    assert action["path"] == add.path  # type: ignore[index]
    assert action["partitionValues"] == add.partition_values  # type: ignore[index]


def test_a_killed_writers_temporary_commit_file_is_removed(tmp_path: Path) -> None:
    import os

    from tracewh.ingest.cleanup import STALE_COMMIT_S, cleanup

    store = Store(tmp_path / "wh")
    store.create()
    log = Path(store.table_uri("events")) / "_delta_log"
    old, fresh = log / "_commit_dead.json.tmp", log / "_commit_live.json.tmp"
    for f in (old, fresh):
        f.write_text('{"commitInfo": {}}\n')
    past = time.time() - STALE_COMMIT_S - 60
    os.utime(old, (past, past))
    assert deltalog.live_files(store.table_uri("events")) == []  # never read as a commit
    cleanup(store)
    assert not old.exists() and fresh.exists()  # a live writer's file is left alone
