"""Signals to a parallel ingest (issue 33, class 8): workers stop, nothing committed afterwards.

``tracewh ingest --jobs 2`` runs as a real process tree; SIGTERM, SIGHUP (to the process,
as ``kill`` sends them) or SIGINT (to its process group, as a terminal's Ctrl-C does) arrives
while the workers are parsing. Within 10 s no process of the tree is left, the runs
visible are exactly those visible at the signal, and ``verify`` passes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers_ingest import driver_env

from tracewh.api import Warehouse
from tracewh.synth import SynthConfig, write_trace

TRACEWH = str(Path(sys.executable).with_name("tracewh"))


def _children() -> dict[int, int]:
    """pid -> parent pid of every process (from /proc)."""
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if fields[0] != "Z":
            out[int(entry)] = int(fields[1])
    return out


def descendants(pid: int) -> set[int]:
    tree = _children()
    found: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        for child, parent in tree.items():
            if parent == p and child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pids: set[int]) -> set[int]:
    live = _children()
    return {p for p in pids if p in live}


def visible_runs(root: Path) -> set[str]:
    if not (root / "tables" / "runs").exists():
        return set()
    try:
        return set(Warehouse(root).runs()["run_id"].to_list())
    except Exception:  # no runs table committed yet
        return set()


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    base = tmp_path_factory.mktemp("signals")
    many = []
    for i in range(6):
        p = base / "many" / f"rank-{i}.pt.trace.json"
        write_trace(p, SynthConfig(size_bytes=2_500_000, layers=2, seed=3380 + i))
        many.append(p)
    big = base / "big" / "big.pt.trace.json"
    return {"many": many, "big": [big]}


def _big(traces: dict[str, list[Path]]) -> None:
    """One file above the split size (16 MB): --jobs 2 parses it in two parts (a parts pool)."""
    (big,) = traces["big"]
    if not big.exists():
        write_trace(big, SynthConfig(size_bytes=48_000_000, layers=2, seed=3390))


SLOW = pytest.mark.slow
CASES = [
    pytest.param("many", signal.SIGTERM, id="many-SIGTERM"),
    pytest.param("many", signal.SIGINT, id="many-SIGINT", marks=SLOW),
    pytest.param("many", signal.SIGHUP, id="many-SIGHUP", marks=SLOW),
    pytest.param("big", signal.SIGTERM, id="big-SIGTERM", marks=SLOW),
]


@pytest.mark.parametrize(("which", "signum"), CASES)
def test_signal_stops_a_parallel_ingest(
    traces: dict[str, list[Path]], tmp_path: Path, which: str, signum: signal.Signals,
) -> None:
    if which == "big":
        _big(traces)
    root = tmp_path / "wh"
    proc = subprocess.Popen(
        [TRACEWH, "ingest", *map(str, traces[which]), "-w", str(root), "--jobs", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=driver_env(),
        start_new_session=True,
    )
    try:
        # wait until the workers run (two spawned processes, or the parts pool's one)
        deadline = time.monotonic() + 60
        tree: set[int] = set()
        while time.monotonic() < deadline and proc.poll() is None:
            tree = descendants(proc.pid)
            if len(tree) >= (2 if which == "many" else 1):
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.5)  # the workers parse
        tree |= descendants(proc.pid)
        at_signal = visible_runs(root)
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signum)  # Ctrl-C: the whole foreground group
        else:
            os.kill(proc.pid, signum)
        _, err = proc.communicate(timeout=10)
        tree |= {proc.pid}
        deadline = time.monotonic() + 10
        while alive(tree) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert alive(tree) == set(), "processes of the ingest still running 10 s after the signal"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + signum, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines[-1] == f"error: stopped by {signum.name}: nothing more was done", err
    assert "Traceback" not in err
    time.sleep(1.0)  # a straggler would commit now
    assert visible_runs(root) == at_signal
    if root.exists():
        v = subprocess.run([TRACEWH, "verify", "-w", str(root)], capture_output=True, text=True,
                           env=driver_env())
        assert v.returncode in (0, 2), v.stdout + v.stderr  # 2: no run committed at all
        assert "FAILED" not in v.stdout, v.stdout
    # the next ingest cleans up and ingests everything
    again = subprocess.run([TRACEWH, "ingest", *map(str, traces[which]), "-w", str(root), "--jobs", "2"],
                           capture_output=True, text=True, env=driver_env())
    assert again.returncode == 0, again.stderr
    assert len(visible_runs(root)) == len(traces[which])
    v = subprocess.run([TRACEWH, "verify", "-w", str(root)], capture_output=True, text=True,
                       env=driver_env())
    assert v.returncode == 0, v.stdout + v.stderr
