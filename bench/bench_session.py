"""Fixed costs (issue 34): where a small session's time and memory go, `tracewh runs`, the site.

``python -m bench.bench_session [--only breakdown,runs,site] [--rounds N]``

Every figure is a whole process (``bench/measure.py``: wall time, peak RSS, CPU), pairs in
interleaved rounds (alternating which goes first; medians), as in ``bench_real``:

* **breakdown**: the small-trace session of ``bench_real --only small`` (ingest one small real
  trace, then kernels, breakdown, idle breakdown, launches, queue depth) and HTA's load +
  the same analyses, each process writing what every phase cost (CPU s, wall s, resident and
  peak MB after it): imports, ingest / load, the first analysis, the other four; and what
  the phases leave out, the interpreter's start and exit (the whole wall minus the phases').
* **runs**: ``tracewh runs`` on the 20-night warehouse of ``bench_real --only report``
  against the bare ``python -c "import duckdb; duckdb.sql('select 1')"``: peak RSS (goal
  <= 150 MB) and time.
* **site**: ``tracewh report --site`` over the site it wrote before: nothing changed (every
  page must stay the same file: inode, mtime, bytes), then one more night ingested (its page
  is new, the other run pages must stay): seconds, and seconds per page built (goal <= 0.5 s):
  the new night's build over a copy of the 20-night site against the unchanged rebuild of
  the 21-night one, interleaved rounds, medians.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from bench import realtraces
from bench.bench_real import HTA_PY, PY, TW, _hta, _load, _tmp, measure, rounds

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "bench"
SMALL = "tracelens__mi300__bert-small-uncased.json.gz"

_PHASES = """
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
out = []
def phase(name):
    mem = {l.split(':')[0]: int(l.split()[1]) // 1024 for l in open('/proc/self/status')
           if l.startswith(('VmRSS', 'VmHWM'))}
    out.append({"phase": name, "cpu_s": time.process_time(), "wall_s": time.perf_counter() - t0,
                "rss_mb": mem['VmRSS'], "peak_mb": mem['VmHWM']})
"""

TW_PHASES = _PHASES + """
import tempfile
from tracewh.api import Warehouse
phase("imports")
with tempfile.TemporaryDirectory(dir=sys.argv[2]) as tmp:
    wh = Warehouse(tmp + "/wh")
    assert wh.ingest([sys.argv[1]]).ok
    phase("ingest")
    assert wh.kernels().width > 0
    phase("first analysis")
    for frame in (wh.breakdown(), wh.idle_breakdown(), wh.launches(), wh.queue_depth()):
        assert frame.width > 0
    phase("four more analyses")
json.dump(out, open(sys.argv[3], "w"))
"""

HTA_PHASES = _PHASES + """
import os
from hta.trace_analysis import TraceAnalysis
phase("imports")
path, rank = sys.argv[1], int(sys.argv[2])
a = TraceAnalysis(trace_files={rank: path}, trace_dir=os.path.dirname(path))
phase("load")
a.get_gpu_kernel_breakdown(visualize=False)
phase("first analysis")
a.get_temporal_breakdown(visualize=False)
a.get_idle_time_breakdown(ranks=[rank], visualize=False)
a.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False)
a.get_queue_length_summary(ranks=[rank])
phase("four more analyses")
json.dump(out, open(sys.argv[3], "w"))
"""


def _phased(runs: list[list[dict[str, float]]]) -> list[dict[str, float | str]]:
    """Median per phase of each run's phases; CPU and wall as the phase's own share."""
    out: list[dict[str, float | str]] = []
    for i, first in enumerate(runs[0]):
        row: dict[str, float | str] = {"phase": str(first["phase"])}
        for key in ("cpu_s", "wall_s"):
            row[key] = statistics.median(r[i][key] - (r[i - 1][key] if i else 0.0) for r in runs)
        for key in ("rss_mb", "peak_mb"):
            row[key] = statistics.median(r[i][key] for r in runs)
        out.append(row)
    return out


def breakdown(n: int) -> None:
    print(f"\n-- small session by phase ({SMALL}), whole processes, medians of {n} "
          f"interleaved rounds ({_load()})")
    path = realtraces.SHARED / SMALL
    results: dict[str, list[list[dict[str, float]]]] = {"tracewh": [], "HTA": []}

    def cmd(name: str) -> Callable[[], Sequence[str]]:
        def make() -> list[str]:
            tmp = _tmp()
            if name == "tracewh":
                argv = [PY, "-c", TW_PHASES, str(path), tmp, f"{tmp}/phases.json"]
            else:
                argv = [str(HTA_PY), "-c", HTA_PHASES, str(path), "0", f"{tmp}/phases.json"]
            _pending.append((name, Path(tmp) / "phases.json"))
            return argv
        return make

    _pending: list[tuple[str, Path]] = []
    named = {"tracewh": cmd("tracewh")}
    if _hta():
        named["HTA"] = cmd("HTA")
    whole = rounds(named, n)
    for name, file in _pending:
        results[name].append(json.loads(file.read_text()))
    for name, runs in results.items():
        if not runs:
            print(f"  {name}: not measured (no HTA venv: make hta-venv)")
            continue
        w = whole[name]
        print(f"  {name:8} whole process {w['seconds']:.2f} s wall, {w['cpu_s']:.2f} s CPU, "
              f"{w['rss_mb']:.0f} MB peak")
        phases = _phased(runs)
        for p in phases:
            print(f"    {p['phase']:22} CPU {p['cpu_s']:6.3f} s  wall {p['wall_s']:6.3f} s  "
                  f"resident {p['rss_mb']:4.0f} MB  peak {p['peak_mb']:4.0f} MB", flush=True)
        # what the phases leave out: the interpreter's start (before the first import is
        # timed) and its exit (the last full garbage collections, destructors): median whole
        # wall minus the sum of the phases' median walls
        rest = w["seconds"] - sum(float(p["wall_s"]) for p in phases)
        print(f"    {'start and exit':22} wall {rest:6.3f} s (whole minus the phases)", flush=True)


def _report_wh() -> Path:
    """The 20-night synthetic warehouse of ``bench_real --only report`` (built once)."""
    wh = DATA / "real" / "report_wh"
    if not (wh / "BUILT").exists():
        import subprocess

        shutil.rmtree(wh, ignore_errors=True)
        src = DATA / "real" / "report_src"
        subprocess.run([TW, "synth", str(src), "--runs", "20", "--start", "2025-01-01",
                        "--steps", "4", "--seed", "16"], check=True, capture_output=True)
        subprocess.run([TW, "ingest", str(src), "-w", str(wh)], check=True, capture_output=True)
        (wh / "BUILT").write_text("1")
    return wh


def runs_rss(n: int) -> None:
    print(f"\n-- tracewh runs (20-run warehouse) vs bare python + duckdb ({_load()})")
    wh = _report_wh()
    got = rounds({
        "runs": lambda: [TW, "runs", "-w", str(wh)],
        "bare": lambda: [PY, "-c", "import duckdb; duckdb.sql('select 1')"],
    }, n)
    r, b = got["runs"], got["bare"]
    print(f"  tracewh runs {r['seconds']:.3f} s, {r['rss_mb']:.0f} MB peak (goal <= 150 MB); "
          f"bare {b['seconds']:.3f} s, {b['rss_mb']:.0f} MB: {r['rss_mb'] / b['rss_mb']:.2f}x the "
          f"memory, {r['seconds'] / b['seconds']:.2f}x the time", flush=True)


def _pages(site: Path) -> dict[str, tuple[int, int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.stat().st_size)
            for p in site.glob("*.html")}


def site(n: int) -> None:
    import subprocess

    print(f"\n-- report --site over its previous site, 20-night synthetic warehouse ({_load()})")
    base = Path(_tmp())
    wh = base / "wh"
    shutil.copytree(_report_wh(), wh)
    out = base / "site"
    full = measure([TW, "report", "-w", str(wh), "--site", str(out)])
    before = _pages(out)
    same = rounds({"same": lambda: [TW, "report", "-w", str(wh), "--site", str(out)]}, n)["same"]
    untouched = _pages(out) == before
    site20 = base / "site20"  # the site as it was before the new night, for each round
    shutil.copytree(out, site20)
    night = base / "night21"
    subprocess.run([TW, "synth", str(night), "--runs", "1", "--start", "2025-01-21",
                    "--steps", "4", "--seed", "16"], check=True, capture_output=True)
    subprocess.run([TW, "ingest", str(night), "-w", str(wh)], check=True, capture_output=True)
    measure([TW, "report", "-w", str(wh), "--site", str(out)])  # out: the site of 21 nights
    after = _pages(out)
    kept = sum(1 for k, v in after.items() if before.get(k) == v)
    built = [k for k in after if before.get(k) != after[k]]
    runs_built = [k for k in built if k.startswith("run-")]
    work = base / "site-next"

    def next_night() -> list[str]:
        # a copy of the site before the new night (made before the measured process starts)
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(site20, work)
        return [TW, "report", "-w", str(wh), "--site", str(work)]

    # interleaved rounds, the same warehouse: the new night's pages over the 20-night site,
    # against the same site rebuilt with nothing changed; the difference is the new pages' cost
    paired = rounds({"next night": next_night,
                     "unchanged": lambda: [TW, "report", "-w", str(wh), "--site", str(out)]}, n)
    one, same21 = paired["next night"], paired["unchanged"]
    print(f"  full site (20 run pages): {full['seconds']:.1f} s, {full['cpu_s']:.1f} s CPU = "
          f"{full['seconds'] / 20:.2f} s per run page, {full['rss_mb']:.0f} MB", flush=True)
    print(f"  again, nothing changed: {same['seconds']:.2f} s ({same['cpu_s']:.2f} s CPU), "
          f"{same['rss_mb']:.0f} MB; every page untouched (inode, mtime, size): {untouched}",
          flush=True)
    print(f"  one more night (medians of {n} interleaved rounds): {one['seconds']:.2f} s "
          f"({one['cpu_s']:.2f} s CPU) against {same21['seconds']:.2f} s unchanged; pages kept "
          f"{kept}, written {len(built)} ({', '.join(sorted(built))[:90]}); run pages built "
          f"{len(runs_built)}: {(one['seconds'] - same21['seconds']) / max(len(runs_built), 1):.2f} s "
          f"per run page built over the unchanged rebuild, the other pages written with it "
          f"included (goal <= 0.5 s); {(one['seconds'] - same21['seconds']) / max(len(built), 1):.2f} s "
          f"per page written", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_session")
    ap.add_argument("--only", default="breakdown,runs,site")
    ap.add_argument("--rounds", type=int, default=0, help="rounds for every part (default: per part)")
    ns = ap.parse_args(argv if argv is not None else [])
    if not realtraces.available():
        print("../shared/traces is absent: no session benchmarks")
        return
    only, r = set(ns.only.split(",")), ns.rounds
    try:
        if "breakdown" in only:
            breakdown(r or 5)
        if "runs" in only:
            runs_rss(r or 7)
        if "site" in only:
            site(r or 3)
    finally:
        for tmp in DATA.glob("real-*"):
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
