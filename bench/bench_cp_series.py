"""What storing the critical-path series at ingest would cost: a run's paths beside its ingest.

``python -m bench.bench_cp_series [--repeat N]``

For each shared trace below, N rounds (default 3), the measurements of a round interleaved
(one ingest into a fresh scratch warehouse, then, on it, the whole run's critical path, the
critical-path series values ``changes --critical-path`` computes for the run: the paths of
its first 5 steps, ``tracewh.history.cpseries``), so that load on a shared machine hits all
three alike. Prints the median of each and its ratio to the ingest: what the series would add
to every ingest if they were stored in ``run_series`` (docs/concepts/history.md).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tracewh.api import Warehouse
from tracewh.history.cpseries import critical_path_values

SHARED = (Path(__file__).resolve().parent.parent / ".." / "shared" / "traces").resolve()
TRACES = (
    "tracelens__h100__timesformer-base-k400.json.gz",
    "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    "ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
)


def _round(trace: Path, scratch: Path) -> tuple[float, float, float, int]:
    """Seconds of the ingest, the whole run's path, the series values; steps used."""
    shutil.rmtree(scratch, ignore_errors=True)
    wh = Warehouse(scratch)
    t0 = time.perf_counter()
    assert wh.ingest([trace], jobs=1).ok
    t1 = time.perf_counter()
    wh.critical_path("latest")
    t2 = time.perf_counter()
    values = critical_path_values(wh, [wh.resolve_run("latest").run_id])
    t3 = time.perf_counter()
    steps = int(values["n_steps"][0]) if values.height else 0
    return t1 - t0, t2 - t1, t3 - t2, steps


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv if argv is not None else [])  # bench.run passes none
    print(f"{'trace':<44} {'ingest':>8} {'whole path':>16} {'series (steps)':>22}")
    with tempfile.TemporaryDirectory(prefix="tracewh-cpbench-") as tmp:
        for name in TRACES:
            trace = SHARED / name
            if not trace.is_file():
                print(f"{name[:44]:<44} (absent)")
                continue
            rounds = [_round(trace, Path(tmp) / "wh") for _ in range(args.repeat)]
            ing, whole, series = (statistics.median(r[i] for r in rounds) for i in range(3))
            steps = rounds[0][3]
            print(f"{name[:44]:<44} {ing:7.2f}s {whole:6.2f}s ({whole / ing:4.0%}) "
                  f"{series:6.2f}s ({series / ing:4.0%}, {steps})")


if __name__ == "__main__":
    main(sys.argv[1:])
