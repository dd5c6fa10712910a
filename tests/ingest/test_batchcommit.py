"""Batched commits: many files, one Delta commit per table; the visibility rule kept.

Counts come from the Delta snapshot (helpers_ingest), never from tracewh's views.
"""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import duckdb
import pytest
from helpers_ingest import (
    incomplete_runs,
    orphan_ingests,
    read_runs,
    run_id_of,
    staging_leftovers,
    start_ingest,
    visible_state,
)

from tracewh.api import Warehouse
from tracewh.ingest.batchcommit import CommitBatch
from tracewh.ingest.pipeline import IngestOptions, ingest_file
from tracewh.storage.store import Store
from tracewh.synth import SynthConfig, write_trace


def _tiny(folder: Path, n: int, seed: int = 0) -> list[Path]:
    out = []
    for i in range(n):
        p = folder / f"rank-{i}.pt.trace.json.gz"
        write_trace(p, SynthConfig(steps=1, layers=1, seed=seed + i))
        out.append(p)
    return out


def _commits(root: Path, table: str) -> int:
    return len(list((root / "tables" / table / "_delta_log").glob("*.json")))


def test_a_batch_commits_each_table_once(tmp_path: Path) -> None:
    files = _tiny(tmp_path / "in", 6)
    root = tmp_path / "wh"
    store = Store(root)
    store.create()
    before = {t: _commits(root, t) for t in ("events", "gpu_ops", "runs", "ingest_log")}
    batch = CommitBatch(store)
    for f in files:
        ingest_file(store, f, IngestOptions(), commit=batch)
    assert read_runs(root) == []  # nothing visible before the flush
    results = batch.close()
    assert [r.outcome for r in results] == ["ingested"] * 6
    for table, n in before.items():
        assert _commits(root, table) == n + 1, table
    assert sorted(r["run_id"] for r in read_runs(root)) == sorted(run_id_of(f) for f in files)
    assert incomplete_runs(root) == [] and orphan_ingests(root) == set()
    assert staging_leftovers(root) == []
    assert Warehouse(root).verify().ok


def test_batch_same_bytes_twice_and_a_bad_file(tmp_path: Path) -> None:
    files = _tiny(tmp_path / "in", 3, seed=10)
    twin = tmp_path / "in" / "twin.pt.trace.json.gz"
    twin.write_bytes(files[0].read_bytes())
    bad = tmp_path / "in" / "bad.json.gz"
    bad.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X", "ts": 1, '))  # truncated
    root = tmp_path / "wh"
    report = Warehouse(root).ingest([files[0], twin, bad, files[1], files[2]], jobs=1)
    outcome = {Path(r.path).name: r.outcome for r in report.results}
    assert outcome == {"rank-0.pt.trace.json.gz": "ingested", "twin.pt.trace.json.gz": "skipped",
                       "bad.json.gz": "failed", "rank-1.pt.trace.json.gz": "ingested",
                       "rank-2.pt.trace.json.gz": "ingested"}
    assert len(read_runs(root)) == 3
    assert incomplete_runs(root) == [] and orphan_ingests(root) == set()
    # the failed file left no written file behind for the next ingest to clean
    again = Warehouse(root).ingest([tmp_path / "in"], jobs=1)
    assert sorted(r.outcome for r in again.results) == ["failed", "skipped", "skipped", "skipped", "skipped"]
    assert Warehouse(root).verify().ok
    log = Warehouse(root).sql("SELECT outcome, count(*) AS n FROM ingest_log GROUP BY 1 ORDER BY 1")
    assert dict(log.iter_rows()) == {"failed": 2, "ingested": 3, "skipped": 5}


def test_a_failed_batch_commit_fails_its_files_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _tiny(tmp_path / "in", 3, seed=20)
    root = tmp_path / "wh"
    wh = Warehouse(root)
    assert wh.ingest([files[0]]).ok
    before = visible_state(root)
    from tracewh.ingest import batchcommit

    calls = {"n": 0}
    real = batchcommit.commit_adds

    def flaky(store: Store, table: str, actions: list[object]) -> None:
        calls["n"] += 1
        if calls["n"] == 3:  # after two child tables committed
            raise OSError(28, "No space left on device")
        real(store, table, actions)  # type: ignore[arg-type]

    monkeypatch.setattr(batchcommit, "commit_adds", flaky)
    report = wh.ingest(files[1:], jobs=1)
    assert [r.outcome for r in report.results] == ["failed", "failed"]
    assert all("the batch commit failed" in (r.error or "") for r in report.results)
    assert visible_state(root) == before
    monkeypatch.setattr(batchcommit, "commit_adds", real)
    report = wh.ingest(files[1:], jobs=1)  # the next ingest cleans up and commits them
    assert [r.outcome for r in report.results] == ["ingested", "ingested"]
    assert incomplete_runs(root) == [] and orphan_ingests(root) == set()
    assert wh.verify().ok


@pytest.mark.slow  # ~10-30 s: make test-all (the default suite's 8-minute budget)
def test_kill_during_a_batch_shows_whole_runs_only(tmp_path: Path) -> None:
    """SIGKILL at several moments of a 12-file batch: only complete runs ever visible."""
    files = _tiny(tmp_path / "in", 12, seed=40)
    root = tmp_path / "wh"
    assert Warehouse(root).ingest(files[:1]).ok
    for delay in (0.5, 1.5, 3.0, 6.0):
        proc = start_ingest(root, files)
        time.sleep(delay)
        proc.kill()
        proc.communicate()
        assert incomplete_runs(root) == [], delay
        assert Warehouse(root).verify().ok, delay
    report = Warehouse(root).ingest(files)  # finishes the job and removes every leftover
    assert not report.failed
    assert sorted(r["run_id"] for r in read_runs(root)) == sorted(run_id_of(f) for f in files)
    assert orphan_ingests(root) == set() and staging_leftovers(root) == []
    assert incomplete_runs(root) == []


def test_two_batches_of_overlapping_files_at_once(tmp_path: Path) -> None:
    files = _tiny(tmp_path / "in", 10, seed=60)
    root = tmp_path / "wh"
    Store(root).create()
    procs = [start_ingest(root, files[:7]), start_ingest(root, files[3:])]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-2000:]
        outs.append(json.loads(out))
    assert all(o["failed"] == [] for o in outs)
    ingested = sum(len(o["ingested"]) for o in outs)
    assert ingested == 10  # each file ingested once, the overlap skipped by one of them
    runs = read_runs(root)
    assert len(runs) == len({r["run_id"] for r in runs}) == 10
    assert incomplete_runs(root) == [] and orphan_ingests(root) == set()
    assert Warehouse(root).verify().ok


def test_a_file_changed_before_the_flush_fails_alone(tmp_path: Path) -> None:
    """Ingested into a batch, then appended to before the batch commits: that file fails
    with 'changed while it was read', nothing of it is visible, the others commit."""
    files = _tiny(tmp_path / "in", 3, seed=30)
    root = tmp_path / "wh"
    store = Store(root)
    store.create()
    batch = CommitBatch(store)
    for f in files:
        ingest_file(store, f, IngestOptions(), commit=batch)
    with open(files[1], "ab") as fh:  # still being written: more bytes arrive
        fh.write(b"\0" * 10)
    results = {Path(r.path).name: r for r in batch.close()}
    assert results["rank-1.pt.trace.json.gz"].outcome == "failed"
    assert "changed while it was read" in (results["rank-1.pt.trace.json.gz"].error or "")
    assert [results[f.name].outcome for f in (files[0], files[2])] == ["ingested", "ingested"]
    assert sorted(r["run_id"] for r in read_runs(root)) == sorted(
        run_id_of(f) for f in (files[0], files[2]))
    assert incomplete_runs(root) == [] and orphan_ingests(root) == set()
    assert Warehouse(root).verify().ok


def _log_rows(root: Path) -> list[dict[str, object]]:
    from helpers_ingest import _arrow, _table

    dt = _table(root, "ingest_log")
    return [] if dt is None else _arrow(dt).to_pylist()


@pytest.mark.parametrize("opens", [True, False])
def test_a_flush_writes_runs_and_the_log_with_one_connection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opens: bool) -> None:
    """The flush's ``runs`` and ``ingest_log`` rows share one DuckDB; where it cannot be
    opened, each append opens its own and the batch commits the same."""
    files = _tiny(tmp_path / "in", 3)
    root = tmp_path / "wh"
    store = Store(root)
    store.create()
    opened: list[object] = []
    real = Store.rows_connection

    def counted() -> object:
        opened.append(1)
        if not opens and len(opened) == 1:
            raise OSError("no DuckDB for the flush")
        con = real()
        opened[-1] = con
        return con

    monkeypatch.setattr(Store, "rows_connection", staticmethod(counted))
    batch = CommitBatch(store)
    for f in files:
        ingest_file(store, f, IngestOptions(), commit=batch)
    results = batch.close()
    assert [r.outcome for r in results] == ["ingested"] * 3
    assert len(opened) == (1 if opens else 3)  # else: the flush's try, then one per append
    for con in opened:  # every one closed
        if con != 1:
            with pytest.raises(duckdb.ConnectionException):
                con.execute("SELECT 1")  # type: ignore[attr-defined]
    assert sorted(r["run_id"] for r in read_runs(root)) == sorted(run_id_of(f) for f in files)
    log = _log_rows(root)
    assert sorted(str(r["path"]) for r in log) == sorted(str(f) for f in files)
    assert incomplete_runs(root) == [] and orphan_ingests(root) == set()


def test_a_failed_runs_commit_still_logs_its_files(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``runs`` append fails: every file of the batch is failed, nothing is visible, and
    the log still records them (written by a DuckDB of its own, not the failed one's)."""
    files = _tiny(tmp_path / "in", 2)
    root = tmp_path / "wh"
    store = Store(root)
    store.create()
    real = Store._write_rows
    used: list[object] = []

    def failing(self: Store, name: str, rows: object, con: object = None) -> object:
        used.append((name, con))
        if name == "runs":
            raise OSError("disk full")
        return real(self, name, rows, con)  # type: ignore[arg-type]

    monkeypatch.setattr(Store, "_write_rows", failing)
    batch = CommitBatch(store)
    for f in files:
        ingest_file(store, f, IngestOptions(), commit=batch)
    results = batch.close()
    assert [r.outcome for r in results] == ["failed"] * 2
    assert all("disk full" in (r.error or "") for r in results)
    assert read_runs(root) == []
    assert [name for name, _ in used] == ["runs", "ingest_log"]
    assert used[0][1] is not None and used[1][1] is None  # the log: a DuckDB of its own
    log = _log_rows(root)
    assert sorted(str(r["path"]) for r in log) == sorted(str(f) for f in files)
    assert {r["outcome"] for r in log} == {"failed"}


def test_the_series_hook_spills_under_a_held_staging_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run_series``' DuckDB spills into the staging folder of one of the batch's ingests
    (its lock held), never the system's temp folder; nothing of it is left after."""
    from tracewh.history import runseries

    def no_tmp(*args: object, **kwargs: object) -> str:
        raise AssertionError("the series writer made a folder in the system's temp folder")

    monkeypatch.setattr(runseries.tempfile, "mkdtemp", no_tmp)
    files = _tiny(tmp_path / "in", 3)
    root = tmp_path / "wh"
    store = Store(root)
    store.create()
    given: list[tuple[Path, bool, bool]] = []

    def derive(out, files, runs, spill):  # type: ignore[no-untyped-def]
        before = spill.exists()
        held = store._locked_here(f"ingest-{spill.parent.name}")
        counts = runseries.write_series(out, files, runs, spill)
        given.append((spill, before, held))
        return counts

    batch = CommitBatch(store, derive=derive)
    for f in files:
        ingest_file(store, f, IngestOptions(), commit=batch)
    assert [r.outcome for r in batch.close()] == ["ingested"] * 3
    [(spill, existed_before, held)] = given
    assert spill.parent.parent == store.staging_root and spill.name.startswith("series-")
    assert not existed_before and held  # made by write_series, under a lock this batch held
    assert not spill.exists() and staging_leftovers(root) == []
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{root}/tables/run_series/*.parquet')"
                      ).fetchall()[0][0] > 0


def test_a_spill_folder_of_a_killed_ingest_is_in_its_staging_and_goes(tmp_path: Path) -> None:
    """An ingest killed (SIGKILL) while its run_series writer has its spill folder leaves
    it in the warehouse's staging folder, not the system's temp folder; the next ingest's
    cleanup removes it."""
    import os
    import signal
    import subprocess
    import sys
    import tempfile

    root = tmp_path / "wh"
    trace = _tiny(tmp_path / "in", 1)[0]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = (
        "import sys, time\n"
        "from tracewh.history import runseries\n"
        "real = runseries.write_series\n"
        "def slow(out, files, runs, spill=None):\n"
        "    spill.mkdir(mode=0o700, parents=True)\n"
        "    print(spill, flush=True); time.sleep(60)\n"
        "runseries.write_series = slow\n"
        "from tracewh.api import Warehouse\n"
        f"Warehouse({str(root)!r}).ingest([{str(trace)!r}], jobs=1)\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp)}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        spill = Path(proc.stdout.readline().strip())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    assert spill.is_dir() and spill.parent.parent == Store(root).staging_root
    assert not [p.name for p in tmp.iterdir() if p.name.startswith("tracewh-series-")]
    assert tempfile.gettempdir() != str(tmp)
    Warehouse(root).ingest(_tiny(tmp_path / "in2", 1, seed=9))
    assert not spill.exists() and staging_leftovers(root) == []


def test_an_ingest_lock_held_for_a_moment_is_waited_for_not_flushed(tmp_path: Path) -> None:
    """A fresh ``ingest-<id>`` lock that a cleanup's probe holds for a moment: the batch
    waits for it, keeping the file's run lock (a flush would release it after the
    "already ingested?" check)."""
    import subprocess
    import sys

    store = Store(tmp_path / "wh")
    store.create()
    batch = CommitBatch(store)
    flushes = []
    real_flush = batch.flush
    batch.flush = lambda: (flushes.append(1), real_flush())[1]  # type: ignore[method-assign]
    batch.begin_file()
    batch.hold("run-0123456789abcdef")
    key = "ingest-" + "e" * 32
    code = ("import fcntl, os, sys, time\n"
            f"fd = os.open({str(store.locks_dir / (key + '.lock'))!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(0.5)\n")
    other = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert other.stdout is not None and other.stdout.readline().strip() == "held"
    batch.hold(key)  # waits the half second
    other.communicate()
    assert flushes == [] and {"run-0123456789abcdef", key} <= batch._held
    batch.close()
    assert not store.is_locked(key) and not store.is_locked("run-0123456789abcdef")
