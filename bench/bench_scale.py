"""Scale-out ingest: ``--jobs 1`` vs ``--jobs 2`` vs ``--dask local:2`` on many small traces.

Generates (once, cached under ``data/bench/scale/``) ``N_FILES`` tiny synthetic
traces (one step, one layer, a distinct seed each), then ingests all of them
into a fresh warehouse with each executor, side by side in one process, in
``ROUNDS`` interleaved rounds (the order rotating; medians reported):

* the speedup of ``--jobs 2`` and of ``--dask local:2`` over ``--jobs 1``;
* Dask's per-file overhead: (Dask wall time - ``--jobs 2`` wall time) / files,
  both with two worker processes; the local cluster's start-up is reported
  apart (``LocalCluster`` start, measured alone) and included in the Dask time.

The machine has 2 cores: with two workers the ideal speedup is 2x.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from tracewh.api import Warehouse
from tracewh.ingest.batch import build_executor
from tracewh.ingest.dask_executor import import_distributed
from tracewh.synth import SynthConfig, write_trace

BENCH = Path("data/bench/scale")
N_FILES = 120
ROUNDS = 3


def traces() -> Path:
    """``N_FILES`` tiny traces under ``data/bench/scale/traces`` (generated once)."""
    out = BENCH / "traces"
    for i in range(N_FILES):
        path = out / f"job-{i // 8:02d}" / f"rank-{i % 8}.pt.trace.json.gz"
        if not path.exists():
            write_trace(path, SynthConfig(steps=1, layers=1, seed=10_000 + i, gzip_level=1))
    return out


def _ingest(src: Path, *, jobs: int = 1, dask: str | None = None) -> float:
    with tempfile.TemporaryDirectory(prefix="tracewh-bench-scale-") as tmp:
        wh = Warehouse(Path(tmp) / "wh")
        t0 = time.perf_counter()
        report = wh.ingest([src], jobs=jobs, executor=build_executor(dask=dask))
        elapsed = time.perf_counter() - t0
        if not report.ok or len(report.ingested) != N_FILES:
            raise RuntimeError(f"bench ingest failed: {report.to_dict()['failed'][:3]}")
        return elapsed


def _cluster_start() -> float:
    distributed = import_distributed()
    t0 = time.perf_counter()
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
        scheduler_kwargs={"dashboard_address": ":0"},
    ) as cluster, distributed.Client(cluster.scheduler_address) as client:
        client.wait_for_workers(2)
        return time.perf_counter() - t0


def main() -> None:
    src = traces()
    size = sum(p.stat().st_size for p in src.rglob("*.json.gz"))
    print(f"{N_FILES} traces, {size / 1e6:.1f} MB gzip, into fresh warehouses")
    # interleaved rounds, the order rotating: a noisy spell hits every executor alike
    runs: dict[str, list[float]] = {"serial": [], "two": [], "dask": []}
    order = ["serial", "two", "dask"]
    for r in range(ROUNDS):
        for name in order[r % 3:] + order[: r % 3]:
            runs[name].append(
                _ingest(src, jobs=1) if name == "serial"
                else _ingest(src, jobs=2) if name == "two"
                else _ingest(src, dask="local:2")
            )
    serial, two, dask = (statistics.median(runs[k]) for k in order)
    start = _cluster_start()
    print(f"median of {ROUNDS} interleaved rounds")
    print(f"{'executor':18} {'wall s':>8} {'files/s':>8} {'speedup':>8}")
    for name, t in (("--jobs 1", serial), ("--jobs 2", two), ("--dask local:2", dask)):
        print(f"{name:18} {t:8.1f} {N_FILES / t:8.1f} {serial / t:7.2f}x")
    print(
        f"Dask overhead vs --jobs 2: {(dask - two) / N_FILES * 1000:+.0f} ms/file "
        f"(LocalCluster start {start:.1f} s included; "
        f"{(dask - two - start) / N_FILES * 1000:+.0f} ms/file without it)"
    )


if __name__ == "__main__":
    main()
