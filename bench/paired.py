"""Two tracewh checkouts' ``tracewh ...`` commands, alternated round by round: paired ratios.

``python -m bench.paired ROUNDS BASE -- ingest DIR -w OUT``

Runs the command with this checkout's ``tracewh`` and with ``BASE``'s (another checkout with
its own built extension and its own ``tracewh/sql``, run as ``python -P -m tracewh`` with
only that checkout on ``PYTHONPATH``), swapping which goes first every round; an argument that
is exactly ``OUT`` becomes a fresh temporary folder for each run (removed after). Prints each
round's wall and CPU time (the process tree's, from ``RUSAGE_CHILDREN``) and, at the end, the medians
and the median of the per-round ratios this / base. On a noisy host the same command's time
moves by a third from one minute to the next; the paired ratio over many rounds is the figure
to quote (docs/performance.md, tenth pass). A run that fails stops the comparison (exit 1).
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]


def _run(checkout: Path, args: list[str]) -> tuple[float, float, int]:
    tmp = tempfile.mkdtemp(prefix="tracewh-paired-")
    try:
        argv = [os.path.join(tmp, "wh") if a == "OUT" else a for a in args]
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-P", "-m", "tracewh", *argv], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if done.returncode:
            print(f"  {checkout}: exit {done.returncode}: "
                  f"{done.stderr.decode(errors='replace').strip()[-300:]}")
        return wall, cpu, done.returncode
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) < 4 or "--" not in argv:
        print(__doc__)
        return 2
    rounds, base = int(argv[0]), Path(argv[1]).resolve()
    args = argv[argv.index("--") + 1:]
    sides = {"this": HERE, "base": base}
    got: dict[str, list[tuple[float, float]]] = {"this": [], "base": []}
    for r in range(rounds):
        order = ["this", "base"] if r % 2 == 0 else ["base", "this"]
        for side in order:
            wall, cpu, rc = _run(sides[side], args)
            if rc:  # a failed run's time is no measurement
                return 1
            got[side].append((wall, cpu))
        print(f"round {r + 1}: this {got['this'][-1][0]:.2f} s (CPU {got['this'][-1][1]:.2f} s)"
              f"  base {got['base'][-1][0]:.2f} s (CPU {got['base'][-1][1]:.2f} s)", flush=True)
    for k, label in ((0, "time"), (1, "CPU")):
        ratios = [t[k] / b[k] for t, b in zip(got["this"], got["base"], strict=True)]
        print(f"{label}: this median {statistics.median(v[k] for v in got['this']):.2f} s, "
              f"base {statistics.median(v[k] for v in got['base']):.2f} s, paired this/base "
              f"median {statistics.median(ratios):.3f} ({' '.join(f'{x:.2f}' for x in ratios)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
