"""`make bench`: run every ``bench/bench_*.py`` module's ``main()`` in turn.

Each benchmark prints ratios measured side by side in one run and peak memory.
Absolute times on shared machines are noisy; the ratios and memory are what we track.
``python -m bench.run NAME...`` runs only the named benchmarks (e.g. ``ingest``).

The size-tiered rows (``bench_ingest``'s throughput vs ijson and ``bench_real``'s big real
traces) run at 250 MB by default, so that the whole of ``make bench`` stays within ~15 minutes
on a quiet 2-core machine; ``--big`` (``make bench BIG=1``) adds the 1 GB and 2 GB tiers
(their traces are generated once under ``data/bench/``, minutes each): the rows "1 GB real
trace >= 0.7x / >= 1.0x bare ijson" and "peak RSS <= 300 MB at every size" need it.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path

from bench.timing import BIG_ENV


def main(argv: list[str]) -> int:
    if "--big" in argv:
        argv = [a for a in argv if a != "--big"]
        os.environ[BIG_ENV] = "1"
    elif not os.environ.get(BIG_ENV):
        print("(the 1 GB / 2 GB tiers are left out: `make bench BIG=1` or "
              "`python -m bench.run --big` runs them)", flush=True)
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
