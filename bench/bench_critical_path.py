"""Critical path: tracewh beside HTA (traceinsight) on real traces, and peak memory on a big one.

``python bench/bench_critical_path.py [--hta PY] [--big MB] [--no-parity]``

For each shared trace HTA handles: ingest it into a scratch warehouse, compute tracewh's
critical path (the first ProfilerStep when the trace has steps, else the whole trace; the
same window HTA takes with ``annotation="ProfilerStep", instance_id=0`` or ``annotation=""``)
and run HTA's in its own venv (``bench/hta_critical_path.py`` under
``HTA_DISABLE_NS_ROUNDING=1``), then print both totals, their ratio and the largest
difference in a bound's share (percentage points).

``--big MB``: also the whole-run critical path of the H100 trace tiled to MB of JSON
(``bench/realtraces.tiled``), in its own process under ``bench/measure.py``: wall time and
peak RSS (the largest process).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: HTA in the bench-only venv `make bench` (`make hta-venv`) installs
HTA_PY = ROOT / "data" / "bench" / "hta-venv" / "bin" / "python"
SHARED = (ROOT / ".." / "shared" / "traces").resolve()
TRACES = (
    "critical_path__cuda_event_sync__event_sync_trace.json.gz",
    "critical_path__cuda_event_sync_multi_stream__event_sync_trace.json.gz",
    "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    "critical_path__end_to_end__simple_add__input__trace.json.gz",
    "tracelens__h100__timesformer-base-k400.json.gz",
    "tracelens__mi300__bert-small-uncased.json.gz",
    "ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "negative_queue_length_values_check__rank0.json.gz",
    "trace_diff__control__control.json.gz",
    "timeline_analysis__sampled_rank-0.json.gz",
    "trace_filter__sampled_rank-1.json.gz",
    "trace_diff__test__test.json.gz",
    "df_index_resolver__df_index_resolver.json.gz",
    "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
)

OURS = """
import json, sys
from tracewh.api import Warehouse
wh = Warehouse(sys.argv[1])
wh.ingest([sys.argv[2]], jobs=1)
ref = wh.resolve_run("latest")
steps = wh.sql("SELECT min(step) AS s FROM steps WHERE run_id = $r", {"r": ref.run_id})["s"][0]
import time
t0 = time.perf_counter()
p = wh.critical_path(ref, step=None if steps is None else int(steps))
print(json.dumps({"total_ns": p.total_ns, "by_bound": p.by_bound, "edges": p.edges.height,
                  "step": steps, "seconds": round(time.perf_counter() - t0, 3)}))
"""


def _json(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        return {"error": (res.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def _shares(d: dict) -> dict[str, float]:
    total = d.get("total_ns") or 0
    return {k: 100.0 * v / total for k, v in d.get("by_bound", {}).items()} if total else {}


def parity(hta_py: str) -> None:
    print(f"{'trace':58} {'window':>8} {'tracewh ms':>12} {'HTA ms':>12} {'ratio':>7} "
          f"{'max share diff pp':>18}")
    env = {**os.environ, "HTA_DISABLE_NS_ROUNDING": "1"}
    for name in TRACES:
        path = SHARED / name
        if not path.exists():
            continue
        with tempfile.TemporaryDirectory() as tmp:
            ours = _json([sys.executable, "-c", OURS, str(Path(tmp) / "wh"), str(path)])
        hta: dict = {"error": f"no HTA ({hta_py} is missing: make hta-venv)"}
        if "error" not in ours and Path(hta_py).exists():
            args = [hta_py, str(ROOT / "bench" / "hta_critical_path.py"), str(path)]
            hta = _json(args + (["0"] if ours.get("step") is not None else []), env)
        window = "step 0" if ours.get("step") is not None else "whole"
        if "error" in ours or "error" in hta:
            print(f"{name[:58]:58} {window:>8} {ours.get('error') or hta.get('error')}")
            continue
        so, sh = _shares(ours), _shares(hta)
        diff = max((abs(so.get(k, 0.0) - sh.get(k, 0.0)) for k in set(so) | set(sh)), default=0.0)
        ratio = ours["total_ns"] / hta["total_ns"] if hta["total_ns"] else float("nan")
        print(f"{name[:58]:58} {window:>8} {ours['total_ns'] / 1e6:12.3f} "
              f"{hta['total_ns'] / 1e6:12.3f} {ratio:7.4f} {diff:18.2f}", flush=True)
        for k in sorted(set(so) | set(sh)):
            if abs(so.get(k, 0.0) - sh.get(k, 0.0)) >= 0.01:
                print(f"    {k:30} tracewh {so.get(k, 0.0):6.2f}%  HTA {sh.get(k, 0.0):6.2f}%")


BIG = """
import sys, time, json
from tracewh.api import Warehouse
wh = Warehouse(sys.argv[1])
t0 = time.perf_counter()
p = wh.critical_path("latest")
print(json.dumps({"total_ns": p.total_ns, "nodes": p.nodes, "graph_edges": p.graph_edges,
                  "path_edges": p.edges.height, "seconds": round(time.perf_counter() - t0, 1)}),
      file=sys.stderr)
"""


def big(mb: int) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from realtraces import tiled  # type: ignore[import-not-found]

    trace = tiled("tracelens__h100__timesformer-base-k400.json.gz", mb << 20)
    with tempfile.TemporaryDirectory() as tmp:
        wh = str(Path(tmp) / "wh")
        subprocess.run([sys.executable, "-m", "tracewh", "ingest", "-w", wh, str(trace)],
                       check=True, capture_output=True)
        res = subprocess.run([sys.executable, "-S", str(ROOT / "bench" / "measure.py"),
                              sys.executable, "-c", BIG, wh], capture_output=True, text=True)
        print(f"{trace.name}: critical path of the whole run: {res.stderr.strip()}")
        print(f"  measured: {res.stdout.strip()}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hta", default=str(HTA_PY), help="HTA's python (default: make hta-venv's)")
    ap.add_argument("--big", type=int, default=0, help="MB of JSON for the tiled trace (0: skip)")
    ap.add_argument("--no-parity", action="store_true", help="only the big trace")
    a = ap.parse_args(argv if argv is not None else [])  # bench.run passes none
    if not a.no_parity:
        parity(a.hta)
    if a.big:
        big(a.big)


if __name__ == "__main__":
    main(sys.argv[1:])
