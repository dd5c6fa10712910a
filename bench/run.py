"""`make bench`: run every ``bench/bench_*.py`` module's ``main()`` in turn.

Each benchmark prints ratios measured side by side in one run and peak memory.
Absolute times on shared machines are noisy; the ratios and memory are what we track.
``python -m bench.run NAME...`` runs only the named benchmarks (e.g. ``ingest``).
"""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).resolve().parent
    names = sorted(p.stem for p in here.glob("bench_*.py"))
    if argv:
        names = [n for n in names if n.removeprefix("bench_") in argv or n in argv]
    for name in names:
        print(f"\n=== {name} ===", flush=True)
        t0 = time.perf_counter()
        module = importlib.import_module(f"bench.{name}")
        module.main()
        print(f"=== {name} took {time.perf_counter() - t0:.1f} s ===", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
