"""A cluster's tasks (files packed by cost) and what a lost task had committed."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tracewh.api import Warehouse
from tracewh.ingest import batch, cluster, pool
from tracewh.ingest.options import IngestOptions
from tracewh.ingest.tasks import Task, choose
from tracewh.storage.store import Store
from tracewh.synth import SynthConfig, write_trace


def _files(tmp_path: Path, sizes: list[int]) -> list[str]:
    paths = []
    for k, size in enumerate(sizes):
        p = tmp_path / f"{k:03d}.json"
        with p.open("wb") as f:
            f.truncate(size)  # sparse: only the size counts
        paths.append(str(p))
    return paths


def _flat(chunks: list[tuple[str, ...]]) -> list[str]:
    return [p for c in chunks for p in c]


def test_tiny_files_go_together_big_ones_alone(tmp_path: Path) -> None:
    big = 200_000_000  # over the target: a task of its own
    paths = _files(tmp_path, [1_000] * 100 + [big, big])
    chunks = cluster.cost_chunks(paths, None)
    assert sorted(_flat(chunks)) == sorted(paths) and len(_flat(chunks)) == len(paths)
    assert chunks[:2] == [(paths[100],), (paths[101],)]  # the costliest first
    small = chunks[2:]
    assert all(1 < len(c) <= cluster.TASK_MAX_FILES for c in small[:-1])
    assert _flat(small) == paths[:100]  # equal costs keep their order
    assert len(small) == -(-100 // cluster.TASK_MAX_FILES)


def test_known_slots_make_several_tasks_per_worker(tmp_path: Path) -> None:
    paths = _files(tmp_path, [1_000] * 120)
    chunks = cluster.cost_chunks(paths, 2)
    assert _flat(chunks) == paths
    # ~120 tiny files on 2 workers: TASKS_PER_SLOT tasks each, not one file per task
    assert 2 * cluster.TASKS_PER_SLOT <= len(chunks) <= 2 * cluster.TASKS_PER_SLOT + 1
    assert max(map(len, chunks)) - min(map(len, chunks[:-1])) <= 1
    # more workers than files: one file per task
    assert cluster.cost_chunks(paths[:3], 8) == [(p,) for p in paths[:3]]
    assert cluster.cost_chunks([], 2) == []


def test_a_cluster_executor_gets_the_cost_chunks(tmp_path: Path) -> None:
    paths = _files(tmp_path, [1_000] * 40)

    class Cluster:
        def slots(self) -> int:
            return 2

        def map_unordered(self, fn, items):  # pragma: no cover - not run here
            raise AssertionError

    assert batch._chunks(paths, Cluster()) == cluster.cost_chunks(paths, 2)
    assert batch._chunks(paths, batch.SerialExecutor()) == [tuple(paths)]
    assert pool.pull_order(paths) == _flat(batch._chunks(paths, Cluster()))


def test_a_lost_task_reports_the_files_it_had_committed(tmp_path: Path) -> None:
    traces = []
    for i in range(3):
        p = tmp_path / "t" / f"rank-{i}.pt.trace.json.gz"
        write_trace(p, SynthConfig(steps=1, layers=1, seed=70 + i))
        traces.append(str(p))
    root = tmp_path / "wh"
    report = Warehouse(root).ingest(traces[:2])
    assert len(report.ingested) == 2
    store = Store(root)
    at = store.read_table("runs", columns=["ingested_at"]).to_pylist()[0]["ingested_at"]
    options = replace(IngestOptions(), ingested_at=at)
    task = Task(store, (traces[0], traces[2]), options, choose(store, options))

    results = batch._task_failed(task, RuntimeError("KilledWorker: the worker died"))
    assert [(r.path, r.outcome) for r in results] == [(traces[0], "ingested"), (traces[2], "failed")]
    by_path = {r.path: r for r in report.ingested}
    assert results[0].run_id == by_path[traces[0]].run_id
    assert results[0].events == by_path[traces[0]].events > 0
    assert "lost" in results[0].warnings[0]
    assert "the worker failed: RuntimeError: KilledWorker" in (results[1].error or "")

    # another ingest's runs are not this one's: every file of the task failed
    other = replace(options, ingested_at=datetime(2020, 1, 1, tzinfo=UTC))
    assert [r.outcome for r in batch._task_failed(replace(task, options=other),
                                                  RuntimeError("x"))] == ["failed", "failed"]
    assert cluster.committed_runs(store, [traces[0]], None) == {}


def test_an_unreadable_warehouse_leaves_a_lost_task_failed(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(tmp_path / "wh")

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("the share went away")

    monkeypatch.setattr(Store, "read_table", broken)
    at = datetime.now(UTC)
    assert cluster.committed_runs(store, ["/x/a.json"], at) == {}
