"""A fleet warehouse replicated at the storage level: ``wh-3000`` x 10 -> ``wh-30000`` in minutes.

Building 30,000 runs through ``tracewh synth`` + ``ingest`` (:mod:`bench.fleet_build`) takes
7-11 hours on the shared 2-core machine; this rewrites an existing fleet warehouse's Parquet
files instead (DuckDB), ``factor`` times, and commits them with tracewh's own storage code
(:meth:`tracewh.storage.store.Store.create` for the tables, :meth:`Store.add_files
<tracewh.storage.writes.Writes.add_files>` for the commits and their checkpoints).

**Layout: the replicas are more ranks of the same jobs.** Replica ``k`` (0 .. factor-1) of a
run of rank ``r`` in a job of world size ``w`` is rank ``r + k * w`` of the same job (same
``job`` folder, labels, day and start time) in a world of ``w * factor`` ranks: the fleet's
nightly jobs of 3 workloads x 2 ranks become 3 workloads x 20 ranks, "years of nightlies of
several models on 8+ ranks". tracewh groups the ranks of a job instance by ``job`` +
workload with distinct ranks (:mod:`tracewh.history.workload`), and a series is one
workload on one rank and world size, so each night still has 3 job instances, now of 20
ranks each, and the history has 20 series per workload instead of 2.

**What is rewritten, per replica** (replica 0 keeps its ids; every replica gets the new rank
and world size): in every table ``run_id`` (the first 16 hex digits of the new ``sha256``,
itself ``sha256(old sha256 + ':replica:' + k)``) and ``ingest_id`` (an md5 of the old one
and ``k``); in ``runs`` also ``sha256``, ``rank``, ``world_size``, the rank in
``source_path``, ``file_name`` and ``trace_name`` (``rank-0`` -> ``rank-6``), and
``distributedInfo`` in ``metadata_json`` (rank, world size, the default process group's
size and ranks); in ``ingest_log`` ``attempt_id``, ``path``, ``sha256`` and ``run_id``; in
``collectives`` ``pg_size`` and ``pg_ranks`` where they named the whole old world. Child
rows are joined on ``(run_id, ingest_id)`` of a visible ``runs`` row (invisible leftovers
are not copied). Kept as a nightly ingest leaves it: the ``day`` partitions, one file per
run per partitioned table, one commit per table per 10 nights (``bench.fleet_build``'s
ingest batch; a checkpoint every 10 commits), the small unpartitioned tables (``runs``,
``run_series``, ``ingest_log``) as many files as the source had (each holding its runs'
10 replicas, as their compaction after each ingest batch would).

**What the replicas share, and what it means.** Every value but the ids and ranks is a copy:
ranks ``r``, ``r + w``, ``r + 2w`` ... of a night hold identical events, durations, series
values and workload fingerprints (the MinHash of a workload's kernels, the same for every
rank of it). So the warehouse has 10x the runs, files, rows and series of ``wh-3000`` (what
the cost of a history command depends on), but only ``wh-3000``'s information: 18 of the 20
series of a workload are exact copies of the other 2, so a change seen on rank 0 is seen,
identically, on ranks 2, 4 ... 18. This is a fair test of cost and of grouping (each change
must fall into its job instance's one group however many ranks show it) and a weak test of
precision: replicas add no independent noise, so multiple-testing control is exercised with
10x the series but not with 10x independent ones (a real 20-rank fleet would add
rank-to-rank noise). Timings are real (tracewh reads 30,000 runs' files); precision figures
at 30,000 say "stable under 10x the ranks", not "at 10x the history length".

``python -m bench.fleet_replicate [--src /work/data-fleet/wh-3000] [--factor 10] [--out DIR]``
(default out: ``<src parent>/wh-<runs x factor>``, marked done by a ``BUILT`` file as
``bench.fleet_build`` writes it, so ``bench_fleet --sizes 3000,30000`` reuses it).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from tracewh.storage import deltalog
from tracewh.storage.store import Store

#: nights per commit of a partitioned table (bench.fleet_build's ingest batch)
NIGHTS_PER_COMMIT = 10
_MARK = "REPLICATING"
_STATS_KEYS = ("run_id", "ingest_id")


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _meta(text: str | None, rank: int, world: int, new_world: int) -> str | None:
    """``metadata_json`` with ``distributedInfo`` naming rank ``rank`` of ``new_world``."""
    if text is None:
        return None
    try:
        meta = json.loads(text)
    except ValueError:
        return text
    info = meta.get("distributedInfo") if isinstance(meta, dict) else None
    if not isinstance(info, dict):
        return text
    old = info.get("rank")
    info["rank"], info["world_size"] = rank, new_world
    name = meta.get("traceName")
    if isinstance(name, str) and old is not None:
        meta["traceName"] = re.sub(rf"rank([-_]?){old}(\D*)$", rf"rank\g<1>{rank}\g<2>", name)
    for pg in info.get("pg_config") or []:
        if isinstance(pg, dict) and pg.get("ranks") == list(range(world)):
            pg["ranks"], pg["pg_size"] = list(range(new_world)), new_world
    return json.dumps(meta, separators=(",", ":"))


def _rank_path(col: str) -> str:
    """SQL: ``col`` with the rank in its last path component renamed (``rank-0`` -> ``rank-6``)."""
    pattern = r"'rank([-_]?)\d+([^/]*)$'"
    return (f"CASE WHEN i.k = 0 THEN {col} WHEN regexp_matches({col}, {pattern}) "
            rf"THEN regexp_replace({col}, {pattern}, 'rank\1' || i.new_rank || '\2') "
            f"ELSE {col} || '#replica' || i.k END")  # fmt: skip


def _exprs(table: str, cols: Sequence[str]) -> list[str]:
    """The select list rewriting one table's columns for replica ``i.k`` (source alias ``t``)."""
    sub: dict[str, str] = {"run_id": "i.new_run", "ingest_id": "i.new_ingest"}
    if table == "runs":
        sub.update({
            "sha256": "i.new_sha", "rank": "CAST(i.new_rank AS INTEGER)",
            "world_size": "CAST(i.new_world AS INTEGER)",
            "metadata_json": "tw_meta(t.metadata_json, i.new_rank, i.old_world, i.new_world)",
            **{c: _rank_path(f"t.{c}") for c in ("source_path", "file_name", "trace_name")},
        })  # fmt: skip
    elif table == "ingest_log":
        sub = {
            "attempt_id": "CASE WHEN i.k = 0 THEN t.attempt_id "
                          "ELSE md5(t.attempt_id || ':replica:' || i.k) END",
            "path": _rank_path("t.path"), "sha256": "i.new_sha", "run_id": "i.new_run",
        }  # fmt: skip
    elif table == "collectives":
        whole = "t.pg_size = i.old_world"
        sub.update({
            "pg_size": f"CASE WHEN {whole} THEN i.new_world ELSE t.pg_size END",
            "pg_ranks": (f"CASE WHEN {whole} AND t.pg_ranks = '[' || array_to_string("
                         "range(i.old_world), ', ') || ']' THEN '[' || array_to_string("
                         "range(i.new_world), ', ') || ']' ELSE t.pg_ranks END"),
        })  # fmt: skip
    return [f"{sub[c]} AS {_q(c)}" if c in sub else f"t.{_q(c)}" for c in cols]


def _columns(con: duckdb.DuckDBPyConnection, files: list[str]) -> list[str]:
    """The columns of ``files`` as stored (a partition column is in the path, not the file)."""
    rel = con.sql("SELECT * FROM read_parquet($f, hive_partitioning = false, union_by_name = true)"
                  " LIMIT 0", params={"f": files})  # fmt: skip
    return list(rel.columns)


def _ids(con: duckdb.DuckDBPyConnection, runs_files: list[str], factor: int) -> int:
    """The temp table ``ids``: each visible run's ids, rank and world in each replica."""
    con.execute(f"""
        CREATE TEMP TABLE ids AS
        WITH r AS (SELECT run_id, ingest_id, sha256, rank, world_size
                   FROM read_parquet($f, hive_partitioning = false, union_by_name = true)),
        x AS (SELECT r.*, t.range AS k,
                     CASE WHEN t.range = 0 THEN r.sha256
                          ELSE sha256(coalesce(r.sha256, r.run_id) || ':replica:' || t.range)
                     END AS sha
              FROM r, range({factor}) t)
        SELECT run_id AS old_run, ingest_id AS old_ingest, k::INTEGER AS k,
               CASE WHEN k = 0 THEN run_id ELSE left(sha, 16) END AS new_run,
               CASE WHEN k = 0 THEN ingest_id ELSE md5(ingest_id || ':replica:' || k) END
                   AS new_ingest,
               sha AS new_sha, (rank + world_size * k)::INTEGER AS new_rank,
               world_size::INTEGER AS old_world, (world_size * {factor})::INTEGER AS new_world
        FROM x""", {"f": runs_files})  # fmt: skip
    n, distinct, unranked = con.execute(
        "SELECT count(*), count(DISTINCT new_run), count(*) FILTER (new_rank IS NULL) FROM ids"
    ).fetchall()[0]
    if unranked:
        raise ValueError(f"{unranked // factor} run(s) without a rank and world size: replicas "
                         "are more ranks of a job, so every run must have both")  # fmt: skip
    if distinct != n:
        raise ValueError(f"replica run ids collide ({n - distinct} of {n})")
    return int(n)


def _stats(row_count: int, col_stats: dict[str, dict[str, str]], keys: Sequence[str]) -> str:
    """A file's Delta ``stats`` as tracewh's writers put them: row count, min/max of ``keys``."""
    stats: dict[str, Any] = {"numRecords": row_count}
    if keys:
        got = {k: col_stats.get(_q(k)) or col_stats.get(k) or {} for k in keys}
        stats["minValues"] = {k: got[k].get("min") for k in keys}
        stats["maxValues"] = {k: got[k].get("max") for k in keys}
        stats["nullCount"] = {k: int(got[k].get("null_count", 0)) for k in keys}
    return json.dumps(stats)


def _keys(adds: list[tuple[str, dict[str, str | None], str | None]]) -> list[str]:
    """The columns whose min/max the source's ``add`` stats carry (``run_id``, ``ingest_id``)."""
    for _, _, stats in adds:
        if stats:
            mins = json.loads(stats).get("minValues") or {}
            return [k for k in _STATS_KEYS if k in mins]
    return []


def _copy_partitioned(con: duckdb.DuckDBPyConnection, store: Store, table: str,
                      files: list[str], keys: list[str], staging: Path) -> list[deltalog.Add]:
    """One chunk of a ``day``-partitioned table: one file per (day, replica run)."""
    cols = _columns(con, files)
    out = staging / f"{table}-{uuid.uuid4().hex}"
    rows = con.execute(f"""
        COPY (SELECT {', '.join(_exprs(table, cols))},
                     CAST(t.day AS VARCHAR) AS tw_day, i.new_run AS tw_run
              FROM read_parquet($f, hive_partitioning = true, union_by_name = true,
                                file_row_number = true) t
              JOIN ids i ON t.run_id = i.old_run AND t.ingest_id = i.old_ingest
              ORDER BY tw_day, tw_run, t.file_row_number)
        TO '{out}' (FORMAT parquet, COMPRESSION zstd, PARTITION_BY (tw_day, tw_run),
                    RETURN_STATS true)""", {"f": files}).fetchall()  # fmt: skip
    adds, seen = [], set()
    for filename, count, _size, _footer, col_stats, parts, *_ in rows:
        day, run = parts["tw_day"], parts["tw_run"]
        if (day, run) in seen:
            raise RuntimeError(f"{table}: two files for run {run} on {day}")
        seen.add((day, run))
        rel = f"day={day}/part-{uuid.uuid4().hex}-c000.zstd.parquet"
        dest = Path(store.table_uri(table)) / rel
        dest.parent.mkdir(exist_ok=True)
        os.rename(filename, dest)
        adds.append(deltalog.Add(path=rel, size=dest.stat().st_size,
                                 partition_values={"day": day},
                                 modification_time=int(time.time() * 1000),
                                 stats=_stats(int(count), col_stats, keys)))  # fmt: skip
    shutil.rmtree(out, ignore_errors=True)
    return adds


def _copy_flat(con: duckdb.DuckDBPyConnection, store: Store, table: str, source: str,
               keys: list[str]) -> deltalog.Add:
    """One file of an unpartitioned table, rewritten with its runs' replicas (k, then rows)."""
    cols = _columns(con, [source])
    join = ("LEFT JOIN ids i ON t.run_id = i.old_run" if table == "ingest_log" else
            "JOIN ids i ON t.run_id = i.old_run AND t.ingest_id = i.old_ingest")
    # ingest_log rows of no run (failed attempts): kept once, as they were
    exprs = _exprs(table, cols)
    if table == "ingest_log":
        exprs = [f"CASE WHEN i.k IS NULL THEN t.{_q(c)} ELSE {e.rsplit(' AS ', 1)[0]} END"
                 f" AS {_q(c)}" for c, e in zip(cols, exprs, strict=True)]  # fmt: skip
    rel = f"part-{uuid.uuid4().hex}-c000.zstd.parquet"
    dest = Path(store.table_uri(table)) / rel
    rows = con.execute(f"""
        COPY (SELECT {', '.join(exprs)}
              FROM read_parquet($f, hive_partitioning = false, file_row_number = true) t {join}
              ORDER BY coalesce(i.k, 0), t.file_row_number)
        TO '{dest}' (FORMAT parquet, COMPRESSION zstd, RETURN_STATS true)""",
                       {"f": [source]}).fetchall()  # fmt: skip
    _, count, _size, _footer, col_stats, *_ = rows[0]
    return deltalog.Add(path=rel, size=dest.stat().st_size, partition_values={},
                        modification_time=int(time.time() * 1000),
                        stats=_stats(int(count), col_stats, keys))  # fmt: skip


def replicate(src: Path, dst: Path, *, factor: int = 10, threads: int = 2,
              log: bool = True) -> Path:
    """``src`` replicated ``factor`` times into ``dst`` (see the module docstring); ``dst``."""
    if (dst / "BUILT").exists():
        return dst
    if dst.exists():
        if not (dst / _MARK).exists():
            raise FileExistsError(f"{dst} exists and is not an unfinished replica")
        shutil.rmtree(dst)  # an interrupted replication starts again
    t0 = time.perf_counter()
    store = Store(dst)
    store.create()
    (dst / _MARK).write_text(f"replicating {src} x{factor}\n")
    staging = dst / "_staging" / "replicate"
    staging.mkdir(parents=True)
    live = {p.name: deltalog.live_adds(p) for p in sorted((src / "tables").iterdir())
            if (p / "_delta_log").is_dir()}  # fmt: skip
    if any(v is None for v in live.values()):
        raise ValueError(f"{src}: a table log this reader cannot replay (delta-rs only)")
    plain = {n: v for n, v in live.items() if v is not None}
    partitioned = {n: v for n, v in plain.items() if v and v[0][1].get("day") is not None}
    con = duckdb.connect(config={"threads": threads, "partitioned_write_max_open_files": 4096})
    con.execute("SET enable_progress_bar = false")
    con.create_function("tw_meta", _meta, ["VARCHAR", "INTEGER", "INTEGER", "INTEGER"],
                        "VARCHAR")  # fmt: skip
    try:
        n = _ids(con, [p for p, _, _ in plain["runs"]], factor)
        days = sorted({str(v["day"]) for adds in partitioned.values() for _, v, _ in adds})
        for c in range(0, len(days), NIGHTS_PER_COMMIT):
            chunk = set(days[c:c + NIGHTS_PER_COMMIT])
            for table, adds in partitioned.items():
                files = [p for p, v, _ in adds if v.get("day") in chunk]
                if files:
                    store.add_files(table, _copy_partitioned(
                        con, store, table, files, _keys(adds), staging))
            if log and (c // NIGHTS_PER_COMMIT) % 10 == 9:
                print(f"  {min(c + NIGHTS_PER_COMMIT, len(days))}/{len(days)} nights "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
        # the unpartitioned tables, ``runs`` last: a run becomes visible once all its rows are in
        for table in sorted((t for t in plain if t not in partitioned), key=lambda t: t == "runs"):
            adds = plain[table]
            store.add_files(table, [_copy_flat(con, store, table, p, _keys(adds))
                                    for p, _, _ in adds])  # fmt: skip
    finally:
        con.close()
    shutil.rmtree(staging, ignore_errors=True)
    (dst / _MARK).unlink()
    took = time.perf_counter() - t0
    (dst / "BUILT").write_text(f"{n} runs, replicated from {src} x{factor} (bench/fleet_replicate"
                               f".py: more ranks of the same jobs) in {took:.0f} s\n")  # fmt: skip
    if log:
        print(f"  {dst}: {n:,} runs in {took:.0f} s", flush=True)
    return dst


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="fleet_replicate", description=__doc__.split("\n")[0])
    ap.add_argument("--src", default="/work/data-fleet/wh-3000")
    ap.add_argument("--factor", type=int, default=10)
    ap.add_argument("--out", default="")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(list(argv) if argv is not None else [])
    src = Path(args.src)
    size = int(src.name.rsplit("-", 1)[-1]) * args.factor if src.name[-1:].isdigit() else 0
    dst = Path(args.out) if args.out else src.with_name(f"wh-{size}")
    replicate(src, dst, factor=args.factor, threads=args.threads)


if __name__ == "__main__":
    main(sys.argv[1:])
