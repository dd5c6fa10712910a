"""Run one command and report its wall time and peak resident memory (``python -S``, tiny).

``python -S bench/measure.py CMD...`` forks and execs CMD, waits for it and prints one
JSON line: ``seconds`` (fork to exit), ``rss_mb`` (the largest peak RSS of CMD and its
descendants: ``ru_maxrss`` of ``wait4``, i.e. the biggest single process) and
``exit``. It runs under ``-S`` (no site imports), so the process CMD starts from is
~10 MB: ``ru_maxrss`` carries the peak of the image a process was forked from, and this
wrapper keeps that small whatever the benchmark parent holds. CMD's standard output
goes to /dev/null; its standard error is kept for errors.
"""

import json
import os
import sys
import time


def main() -> None:
    cmd = sys.argv[1:]
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    seconds = time.perf_counter() - t0
    print(json.dumps({
        "seconds": seconds,
        "rss_mb": usage.ru_maxrss / 1024,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "exit": os.waitstatus_to_exitcode(status),
    }))


if __name__ == "__main__":
    main()
