"""Ingest throughput vs the bare ijson parse, peak memory, Parquet vs gzip bytes, --jobs scaling.

``python -m bench.bench_ingest [--sizes 250MB,1GB] [--files 20] [--no-files]``
(default sizes: 250MB; 250MB,1GB,2GB under ``python -m bench.run --big``)

For each size, a synthetic trace (cached under ``data/bench/``) is measured side
by side, each measurement in a fresh subprocess: the bare parse
``deque(ijson.items(gzip_file, "traceEvents.item"), maxlen=0)``, then
``ingest_file`` with ``parts=1`` and ``parts=2``. The ratio is throughput
ingest / ijson (= ijson seconds / ingest seconds; the target is >= 0.7). Peak RSS
is reported for the ingesting process and for its largest child (the second
parsing process of ``parts=2``), as the kernel's high-water mark ``VmHWM``: the
process's own from ``/proc/self/status`` at the end, a child's by polling its
``/proc/<pid>/status`` every 50 ms while it runs. Not ``ru_maxrss``: Linux carries
the parent's peak into a child's ``ru_maxrss`` across fork and exec, so under
``make bench`` (earlier benchmarks in the same parent) it reported the parent's
peak. The many-files part ingests small traces with a
process pool of 1 then 2 workers (the ``--jobs`` driver's shape).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench.timing import default_sizes

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "bench"


def _trace(size: str) -> Path:
    from tracewh.synth import SynthConfig, parse_size, write_trace

    path = DATA / f"synth-{size.lower()}.pt.trace.json.gz"
    if not path.exists():
        print(f"generating {path} ...", flush=True)
        write_trace(path, SynthConfig(size_bytes=parse_size(size), seed=1))
    return path


def _hwm_mb(pid: int | str = "self") -> float:
    """Peak resident set (``VmHWM``) of a process in MB; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class _ChildPeak(threading.Thread):
    """The largest ``VmHWM`` of this process's children, polled every 50 ms while they run."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_mb = 0.0
        self._done = threading.Event()

    def run(self) -> None:
        tasks = Path("/proc/self/task")
        while not self._done.wait(0.05):
            for task in tasks.iterdir():
                try:
                    pids = (task / "children").read_text().split()
                except OSError:
                    continue
                for pid in pids:
                    self.peak_mb = max(self.peak_mb, _hwm_mb(pid))

    def stop(self) -> float:
        self._done.set()
        self.join()
        return self.peak_mb


def _child(mode: str, path: Path, parts: int) -> dict[str, float]:
    """Run in a fresh interpreter: one measurement, as JSON on stdout."""
    out: dict[str, float] = {}
    children = _ChildPeak()
    children.start()
    t0 = time.perf_counter()
    if mode == "ijson":
        import gzip
        from collections import deque

        import ijson

        with gzip.open(path, "rb") as f:
            deque(ijson.items(f, "traceEvents.item"), maxlen=0)
    else:
        from tracewh.ingest.pipeline import IngestOptions, ingest_file
        from tracewh.storage.store import Store

        with tempfile.TemporaryDirectory(dir=DATA) as tmp:
            store = Store(Path(tmp) / "wh")
            store.create()
            t0 = time.perf_counter()
            result = ingest_file(store, path, IngestOptions(parts=parts))
            out["seconds"] = time.perf_counter() - t0
            if result.outcome != "ingested":
                raise SystemExit(f"ingest failed: {result.error}")
            out["events"] = result.events
            out["parquet_bytes"] = sum(
                p.stat().st_size for p in (Path(tmp) / "wh" / "tables").rglob("*.parquet")
            )
    out.setdefault("seconds", time.perf_counter() - t0)
    out["rss_mb"] = _hwm_mb()
    out["child_rss_mb"] = children.stop()
    return out


def _measure(mode: str, path: Path, parts: int = 1) -> dict[str, float]:
    cmd = [sys.executable, "-m", "bench.bench_ingest", "--child", mode, str(path), str(parts)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{mode} failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _sizes(sizes: list[str]) -> None:
    head = (f"{'trace':>7} {'gzip MB':>8} {'events':>9} {'ijson s':>8} | {'parts':>5} "
            f"{'ingest s':>9} {'ratio':>6} {'RSS MB':>7} {'child MB':>8} {'parquet MB':>10} "
            f"{'pq/gz':>6}")
    print(head)
    print("-" * len(head))
    for size in sizes:
        path = _trace(size)
        gz = path.stat().st_size
        bare = _measure("ijson", path)
        for parts in (1, 2):
            r = _measure("ingest", path, parts)
            print(f"{size:>7} {gz / 1e6:8.1f} {int(r['events']):9d} {bare['seconds']:8.2f} | "
                  f"{parts:5d} {r['seconds']:9.2f} {bare['seconds'] / r['seconds']:6.2f} "
                  f"{r['rss_mb']:7.0f} {r['child_rss_mb']:8.0f} {r['parquet_bytes'] / 1e6:10.1f} "
                  f"{r['parquet_bytes'] / gz:6.2f}", flush=True)


def _warm(_: int) -> None:
    import tracewh.ingest.pipeline  # noqa: F401 - imports only


def _ingest_one(args: tuple[str, str, int]) -> str:
    import os

    from tracewh.ingest.pipeline import IngestOptions, ingest_file
    from tracewh.storage.store import Store

    root, trace, jobs = args
    # DuckDB threads per process as the --jobs driver sets them (tracewh.ingest.batch)
    threads = max(1, (os.cpu_count() or 2) // jobs)
    return ingest_file(Store(Path(root)), Path(trace), IngestOptions(threads=threads)).outcome


def _files(n: int, rounds: int = 3) -> None:
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from tracewh.storage.store import Store
    from tracewh.synth import SynthConfig, write_trace

    folder = DATA / f"files-{n}"
    traces = []
    for i in range(n):
        p = folder / f"rank-{i}.pt.trace.json.gz"
        if not p.exists():
            write_trace(p, SynthConfig(steps=3, seed=100 + i))
        traces.append(str(p))
    times: dict[int, list[float]] = {1: [], 2: []}
    for r in range(rounds):  # interleaved, alternating which goes first: noise hits both
        for jobs in ((1, 2) if r % 2 == 0 else (2, 1)):
            with tempfile.TemporaryDirectory(dir=DATA) as tmp:
                store = Store(Path(tmp) / "wh")
                store.create()
                with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
                    list(pool.map(_warm, range(jobs)))  # start the workers and import
                    t0 = time.perf_counter()
                    outcomes = list(pool.map(_ingest_one, [(str(store.root), t, jobs) for t in traces]))
                    times[jobs].append(time.perf_counter() - t0)
                assert outcomes.count("ingested") == n, outcomes
    seconds = {jobs: statistics.median(ts) for jobs, ts in times.items()}
    mb = sum(Path(t).stat().st_size for t in traces) / 1e6
    print(f"\n{n} files ({mb:.1f} MB gzip), median of {rounds} interleaved rounds: "
          f"--jobs 1 {seconds[1]:.2f} s, --jobs 2 {seconds[2]:.2f} s, "
          f"speed-up {seconds[1] / seconds[2]:.2f}x (target >= 1.7)")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_ingest")
    ap.add_argument("--sizes", default=default_sizes(),
                    help="trace sizes (default 250MB; with bench.run --big: 250MB,1GB,2GB)")
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--no-files", action="store_true")
    ap.add_argument("--child", nargs=3, metavar=("MODE", "PATH", "PARTS"))
    ns = ap.parse_args(argv if argv is not None else [])
    if ns.child:
        mode, path, parts = ns.child
        print(json.dumps(_child(mode, Path(path), int(parts))))
        return
    DATA.mkdir(parents=True, exist_ok=True)
    _sizes([s.strip() for s in ns.sizes.split(",") if s.strip()])
    if not ns.no_files:
        _files(ns.files)


if __name__ == "__main__":
    main(sys.argv[1:])
