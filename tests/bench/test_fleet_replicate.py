"""bench/fleet_replicate.py: a 12-run fleet warehouse (2 nights x 3 workloads x 2 ranks) x 3.

The replicas must be more ranks of the same jobs (ranks 0-5 of a world of 6), distinct runs
everywhere tracewh keys a run (run_id, ingest_id, sha256, ingest attempts), with each
replica's rows those of its source run, one file per run and day, and a warehouse that
``verify``, ``runs``, ``changes``, ``history`` and the collectives read.
"""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import polars as pl
import pytest

from tracewh.api import Warehouse

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # bench/ is a folder of the repository, not an installed package
    sys.path.insert(0, str(REPO))

pytestmark = pytest.mark.slow  # ~10 s: synth + ingest of 12 runs, then the replication

FACTOR = 3


@pytest.fixture(scope="module")
def whs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Warehouse, Warehouse]:
    from bench.fleet_build import build
    from bench.fleet_replicate import replicate

    root = tmp_path_factory.mktemp("fleet")
    src = build(root, 12, log=False)
    dst = replicate(src, root / "wh-36", factor=FACTOR, log=False)
    assert (dst / "BUILT").read_text().startswith("36 runs")
    return Warehouse(src), Warehouse(dst)


def test_verify_and_distinct_runs(whs: tuple[Warehouse, Warehouse]) -> None:
    _, wh = whs
    report = wh.verify()
    assert not report.problems and report.runs == 36
    runs = wh.sql("SELECT run_id, ingest_id, sha256, source_path, rank, world_size, job, "
                  "labels_json, day, metadata_json FROM runs")
    for col in ("run_id", "ingest_id", "sha256", "source_path"):
        assert runs[col].n_unique() == 36, col
    assert (runs["run_id"] == runs["sha256"].str.slice(0, 16)).all()
    assert set(runs["world_size"]) == {6}
    # each night's job of each workload: one job folder, ranks 0..5
    per_job = runs.group_by("job", "labels_json").agg(pl.col("rank").sort())
    assert per_job.height == 6 and all(r == list(range(6)) for r in per_job["rank"].to_list())
    assert runs["metadata_json"].str.contains('"world_size":6').all()
    log = wh.sql("SELECT attempt_id, run_id, sha256 FROM ingest_log")
    assert log.height == 36 and log["attempt_id"].n_unique() == 36
    assert set(log["run_id"]) == set(runs["run_id"])


def test_replica_rows_and_files_are_the_source_runs(whs: tuple[Warehouse, Warehouse]) -> None:
    src, wh = whs
    q = ("SELECT r.rank % 2 AS pair_rank, r.day, r.labels_json, count(*) AS n, "
         "sum(g.dur_ns) AS dur FROM gpu_ops g JOIN runs r USING (run_id) GROUP BY ALL")
    a = src.sql(q).sort("pair_rank", "day", "labels_json")
    b = wh.sql(q).sort("pair_rank", "day", "labels_json")
    assert b["n"].to_list() == [FACTOR * n for n in a["n"]]
    assert b["dur"].to_list() == [FACTOR * d for d in a["dur"]]
    files = list((wh.root / "tables" / "gpu_ops").glob("day=*/*.parquet"))
    assert len(files) == 36  # one file per run and day
    series = wh.sql("SELECT r.rank, s.day, s.metric, s.key, s.value FROM run_series s "
                    "JOIN runs r USING (run_id, ingest_id) WHERE r.labels_json LIKE '%dit-s%'")
    by_rank = {k[0]: v.sort("day", "metric", "key")["value"].to_list()
               for k, v in series.group_by("rank")}
    assert by_rank[0] == by_rank[2] == by_rank[4] and by_rank[1] == by_rank[3] == by_rank[5]


def test_history_commands_read_it(whs: tuple[Warehouse, Warehouse]) -> None:
    _, wh = whs
    assert wh.runs().height == 36
    wh.changes(since=dt.date(2000, 1, 1))
    assert wh.history(kernel="flash_fwd", since=dt.date(2000, 1, 1)).height > 0
    job = wh.sql("SELECT list(run_id) AS ids FROM runs WHERE day = '2020-01-01' "
                 "AND labels_json LIKE '%dit-s%'")["ids"].to_list()[0]
    matches = wh.sql("SELECT n_ranks, wait_ns FROM collective_matches($ids)", {"ids": job})
    assert matches.height > 0 and (matches["n_ranks"] == 6).all()


def test_an_existing_folder_is_not_replaced(tmp_path: Path) -> None:
    from bench.fleet_replicate import replicate

    (tmp_path / "dst").mkdir()
    with pytest.raises(FileExistsError):
        replicate(tmp_path / "src", tmp_path / "dst", log=False)
