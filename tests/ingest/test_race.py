"""Rewrites of the same files by concurrent processes (issue 18, item 0).

Compaction used delta-rs's ``optimize.compact``, whose removes carry
``dataChange=false``; delta-rs lets two such concurrent removes of one file both
commit, so two processes compacting ``runs`` at once each added a merged copy and
every run was listed twice. These tests start the compactions in real processes
at the same instant, with the machine kept busy, and count rows straight from the
Delta snapshot.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
from helpers_ingest import (
    CHILD_TABLES,
    cpu_hog,
    incomplete_runs,
    raw_counts,
    read_runs,
    start_compact,
    start_ingest,
)

from tracewh.api import Warehouse
from tracewh.ingest.pipeline import IngestOptions, ingest_file
from tracewh.storage.store import Store
from tracewh.synth import SynthConfig, write_trace


def _traces(folder: Path, n: int, seed: int) -> list[Path]:
    out = []
    for i in range(n):
        path = folder / f"r{seed}-{i}.pt.trace.json.gz"
        write_trace(path, SynthConfig(steps=1, layers=1, seed=seed + i))
        out.append(path)
    return out


def _ingest_one_by_one(root: Path, files: list[Path]) -> None:
    """One commit per file and no batch compaction: many small files in every table."""
    store = Store(root)
    store.create()
    for f in files:
        assert ingest_file(store, f, IngestOptions()).outcome == "ingested"


def _rows_per_run(root: Path) -> Counter[str]:
    return Counter(r["run_id"] for r in read_runs(root))


def _concurrent_compactions(root: Path, processes: int) -> None:
    at = time.time() + 4.0  # every process imported and waiting when the clock gets there
    procs = [start_compact(root, at) for _ in range(processes)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        json.loads(out)


@pytest.mark.parametrize(
    ("rounds", "files_per_round"),
    # 19 s and more: make test-all (tests/ingest/test_concurrency.py races ingests by default)
    [pytest.param(1, 6, marks=pytest.mark.slow), pytest.param(2, 10, marks=pytest.mark.slow)],
)
def test_concurrent_compactions_keep_every_row_once(
    tmp_path: Path, rounds: int, files_per_round: int
) -> None:
    root = tmp_path / "wh"
    expected: set[str] = set()
    with cpu_hog():
        for r in range(rounds):
            files = _traces(tmp_path / f"in{r}", files_per_round, seed=100 * r)
            _ingest_one_by_one(root, files)
            expected |= {str(x["run_id"]) for x in read_runs(root)}
            _concurrent_compactions(root, processes=3)
            per_run = _rows_per_run(root)
            assert {k: n for k, n in per_run.items() if n > 1} == {}, f"round {r}"
            assert set(per_run) == expected
            assert incomplete_runs(root) == []
    for table in CHILD_TABLES:  # child rows: each (run, ingest) counted as recorded, once
        assert all(n > 0 for n in raw_counts(root, table).values())
    assert Warehouse(root).verify().ok


@pytest.mark.slow
@pytest.mark.parametrize("attempt", range(3))
def test_ingests_beside_repeated_compactions(tmp_path: Path, attempt: int) -> None:
    """Two ingest batches and three compaction rounds at once, on a machine kept busy."""
    root = tmp_path / "wh"
    files = _traces(tmp_path / "in", 24, seed=1000 * (attempt + 1))
    _ingest_one_by_one(root, files[:4])
    with cpu_hog():
        ingests = [start_ingest(root, files[4:14]), start_ingest(root, files[10:])]
        for _ in range(3):
            _concurrent_compactions(root, processes=2)
        for p in ingests:
            out, err = p.communicate(timeout=600)
            assert p.returncode == 0, err[-2000:]
            assert json.loads(out)["failed"] == []
    per_run = _rows_per_run(root)
    assert {k: n for k, n in per_run.items() if n > 1} == {}
    assert len(per_run) == len(files)
    assert incomplete_runs(root) == []
    assert Warehouse(root).verify().ok
