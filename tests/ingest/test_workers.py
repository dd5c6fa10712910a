"""The ingest's worker processes (``tracewh.ingest.workers``)."""

from __future__ import annotations

import os
import subprocess
import sys

from tracewh.ingest.workers import worker_pool

EXIT = """
import atexit, gc, os, sys
from tracewh.ingest import workers
workers._start(os.getppid(), None)
assert gc.get_freeze_count() == 0
atexit._run_exitfuncs()
print("frozen", gc.get_freeze_count() > 0)
"""


def test_a_worker_freezes_its_heap_among_its_exit_handlers() -> None:
    """A worker's initializer registers the exit handler that collects once and freezes
    the rest, so its interpreter exit (which the pool's owner waits for) skips the full
    collections."""
    done = subprocess.run([sys.executable, "-c", EXIT], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "frozen True"


def _pid() -> int:
    return os.getpid()


def test_a_pool_of_workers_ends_and_leaves_no_process() -> None:
    with worker_pool(2) as pool:
        pids = {f.result() for f in [pool.submit(_pid) for _ in range(4)]}
    assert pids and os.getpid() not in pids
    for pid in pids:  # exited and reaped: no process, not even a zombie
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"worker {pid} is still there")
