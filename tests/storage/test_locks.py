"""The lock files of runs and ingests: removed on release, never two holders at once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from tracewh.api import Warehouse
from tracewh.storage.locks import STALE_LOCK_AGE_S
from tracewh.storage.store import Store
from tracewh.synth import SynthConfig, write_trace


def _lock_files(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "_locks").iterdir())


def test_an_ingest_leaves_no_lock_file_per_run_or_ingest(tmp_path: Path) -> None:
    traces = []
    for i in range(3):
        p = tmp_path / "in" / f"rank-{i}.pt.trace.json.gz"
        write_trace(p, SynthConfig(steps=1, layers=1, seed=80 + i))
        traces.append(p)
    root = tmp_path / "wh"
    assert len(Warehouse(root).ingest(traces).ingested) == 3
    assert len(Warehouse(root).ingest(traces).skipped) == 3  # the run locks taken again
    left = _lock_files(root)
    assert not [n for n in left if n.startswith(("run-", "ingest-"))], left
    assert "writers.lock" in left  # the shared ones stay


def _wait_blocked_on(inode: int, timeout_s: float = 10.0) -> None:
    """Until a process waits for a lock on ``inode`` (a ``->`` line of ``/proc/locks``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if "->" in fields and fields[fields.index("->") + 5].endswith(f":{inode}"):
                return
        time.sleep(0.01)
    raise AssertionError("nobody waits for the lock")


def test_a_released_file_is_never_held_twice(tmp_path: Path) -> None:
    """A waiter that gets the lock of a file its holder removed on release takes the file
    there now: it and a newcomer never both hold ``run-x``."""
    store = Store(tmp_path / "wh")
    first = store.lock("run-x")
    assert first.__enter__()
    holding = threading.Event()
    release = threading.Event()

    def waiter() -> None:
        with store.lock("run-x") as held:  # blocks on the file ``first`` holds
            assert held
            holding.set()
            release.wait(10)

    inode = (store.locks_dir / "run-x.lock").stat().st_ino
    t = threading.Thread(target=waiter)
    t.start()
    _wait_blocked_on(inode)  # the waiter is blocked in flock on the first file
    first.__exit__(None, None, None)  # released: that file is unlinked
    assert holding.wait(10)
    with store.lock("run-x", blocking=False) as newcomer:
        assert not newcomer  # the waiter holds the file at the path now
    release.set()
    t.join(10)
    assert not (store.locks_dir / "run-x.lock").exists()
    with store.lock("run-x", blocking=False) as again:
        assert again


def test_stale_lock_files_go_held_and_young_ones_stay(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    store = Store(root)
    store.create()
    locks = store.locks_dir
    old = time.time() - 2 * STALE_LOCK_AGE_S
    for name in ("run-dead", "ingest-dead", "writers", "create-runs", "run-live", "run-young"):
        (locks / f"{name}.lock").write_text("12345\n")  # as a killed process leaves them
        if name != "run-young":  # just made by a process about to lock it
            os.utime(locks / f"{name}.lock", (old, old))
    code = (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(locks / 'run-live.lock')!r}, os.O_RDWR)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); time.sleep(30)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert store.remove_stale_locks() == 2
        left = set(_lock_files(root))
        assert {"run-live.lock", "run-young.lock", "create-runs.lock", "writers.lock"} <= left
        assert not {"run-dead.lock", "ingest-dead.lock"} & left
    finally:
        holder.kill()
        holder.communicate()
    assert store.remove_stale_locks() == 1  # the holder is gone
    assert store.remove_stale_locks(min_age_s=0) == 1  # the young one, once old enough
    assert not [n for n in _lock_files(root) if n.startswith(("run-", "ingest-"))]
