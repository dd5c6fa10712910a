"""Memory analysis at 10^5 and 10^6 [memory] events: ingest and query time and peak RSS.

``python -m bench.bench_memory [--events 100000,1000000]``

For each size a synthetic trace with about that many ``[memory]`` events (and a
leak, so nothing is trivially flat) is generated under ``data/bench/`` and
ingested once, in a fresh process (its ``VmHWM``). Then each ``tracewh memory``
view runs in a fresh process, beside ``kernels`` (the kernel ranking of the same
run) as the reference of an ordinary per-run query: seconds and ``VmHWM`` of each,
and the ratio of their seconds. Absolute times on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "bench"
VIEWS = ("summary", "peak", "allocations", "steps", "leaks", "timeline")


def _hwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _trace(events: int) -> tuple[Path, int]:
    from tracewh.synth import SynthConfig, write_trace

    probe = write_trace(DATA / "mem-probe.json", SynthConfig(steps=4, seed=1, leak_bytes=1_000_000))
    per_step = probe.by_category["cpu_instant_event"] / probe.steps
    steps = math.ceil(events / per_step)
    path = DATA / f"mem-{events}.pt.trace.json.gz"
    if not path.exists():
        print(f"generating {path} ({steps} steps) ...", flush=True)
        write_trace(path, SynthConfig(steps=steps, seed=1, leak_bytes=1_000_000))
    return path, steps


def _child(mode: str, arg: str, wh_root: str) -> dict[str, float]:
    out: dict[str, float] = {}
    t0 = time.perf_counter()
    if mode == "ingest":
        from tracewh.api import Warehouse

        (result,) = Warehouse(wh_root).ingest([arg]).results
        if result.outcome not in ("ingested", "skipped"):
            raise SystemExit(f"ingest failed: {result.error}")
    else:
        from tracewh.api import Warehouse

        wh = Warehouse(wh_root)
        df = wh.kernels("latest") if mode == "kernels" else wh.memory("latest", view=arg)
        out["rows"] = df.height
    out["seconds"] = time.perf_counter() - t0
    out["rss_mb"] = _hwm_mb()
    return out


def _measure(mode: str, arg: str, wh_root: Path) -> dict[str, float]:
    cmd = [sys.executable, "-m", "bench.bench_memory", "--child", mode, arg, str(wh_root)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{mode} {arg} failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _size(events: int) -> None:
    path, steps = _trace(events)
    wh_root = DATA / f"mem-wh-{events}"
    ing = _measure("ingest", str(path), wh_root)
    print(f"\n{events:,} memory events target ({steps} steps, {path.stat().st_size / 1e6:.0f} MB gzip): "
          f"ingest {ing['seconds']:.1f} s, peak RSS {ing['rss_mb']:.0f} MB", flush=True)
    ref = _measure("kernels", "-", wh_root)
    print(f"{'query':>22} {'rows':>7} {'seconds':>8} {'÷ kernels':>9} {'RSS MB':>7}")
    print(f"{'kernels (reference)':>22} {int(ref['rows']):7d} {ref['seconds']:8.2f} {1.0:9.2f} {ref['rss_mb']:7.0f}")
    for view in VIEWS:
        r = _measure("view", view, wh_root)
        print(f"{'memory --view ' + view:>22} {int(r['rows']):7d} {r['seconds']:8.2f} "
              f"{r['seconds'] / ref['seconds']:9.2f} {r['rss_mb']:7.0f}", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_memory")
    ap.add_argument("--events", default="100000,1000000")
    ap.add_argument("--child", nargs=3, metavar=("MODE", "ARG", "WAREHOUSE"))
    ns = ap.parse_args(argv if argv is not None else [])
    if ns.child:
        print(json.dumps(_child(*ns.child)))
        return
    DATA.mkdir(parents=True, exist_ok=True)
    for n in (int(x) for x in ns.events.split(",") if x.strip()):
        _size(n)


if __name__ == "__main__":
    main(sys.argv[1:])
