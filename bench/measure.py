"""Run one command and report its wall time and peak resident memory (``python -S``, tiny).

``python -S bench/measure.py [--tree] CMD...`` forks and execs CMD, waits for it and prints
one JSON line: ``seconds`` (fork to exit), ``rss_mb`` (the largest peak RSS of CMD and its
descendants: ``ru_maxrss`` of ``wait4``, i.e. the biggest single process), ``cpu_s`` and
``exit``; with ``--tree`` also ``tree_mb``: the peak, over samples every 20 ms, of the PSS
summed over CMD and all its descendants (``/proc/PID/smaps_rollup``: shared pages counted
once across the tree), the memory a many-process ingest holds at once. It runs under
``-S`` (no site imports), so the process CMD starts from is ~10 MB: ``ru_maxrss`` carries
the peak of the image a process was forked from, and this wrapper keeps that small
whatever the benchmark parent holds. CMD's standard output goes to /dev/null; its
standard error is kept for errors.
"""

import json
import os
import sys
import threading
import time


def _children() -> dict[int, list[int]]:
    """Every process's children, from ``/proc/*/stat`` (pid -> child pids)."""
    out: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        out.setdefault(ppid, []).append(int(name))
    return out


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_pss_mb(root: int) -> float:
    """PSS summed over ``root`` and its descendants, in MB."""
    children, todo, total = _children(), [root], 0
    while todo:
        pid = todo.pop()
        total += _pss_kb(pid)
        todo += children.get(pid, [])
    return total / 1024


def main() -> None:
    args = sys.argv[1:]
    tree = bool(args) and args[0] == "--tree"
    cmd = args[1:] if tree else args
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    peak = [0.0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], tree_pss_mb(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    if tree:
        sampler.start()
    _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - t0
    done.set()
    out = {
        "seconds": seconds,
        "rss_mb": usage.ru_maxrss / 1024,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "exit": os.waitstatus_to_exitcode(status),
    }
    if tree:
        sampler.join()
        out["tree_mb"] = peak[0]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
