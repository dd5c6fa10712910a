"""Real traces, whole processes, side by side with HTA and the bare parse (issue 16's table).

``python -m bench.bench_real [--only small,ladder,cold,mid,big,nightly,files,report] [--sizes 250MB,1GB]
[--base CHECKOUT]`` (default sizes: 250MB; 250MB,1GB,2GB under ``python -m bench.run --big``;
``--base``: another tracewh checkout, e.g. a ``git worktree`` of an earlier commit with its
extension built, whose ingest is measured in the same interleaved rounds, as
``PYTHONPATH=CHECKOUT python -m tracewh``: before/after side by side)

Every figure is one whole process, measured by ``bench/measure.py`` (wall time from
fork to exit, and the largest peak RSS of the process and its children), the
pairs run in interleaved rounds (alternating which goes first; medians):

* **small**: each small real trace (70-450 KB gzip, as it is in ``../shared/traces``):
  ingest + kernels, breakdown, idle breakdown, launches, queue depth through the Python
  API in one process, against HTA (``traceinsight``, from the bench-only venv
  ``data/bench/hta-venv`` that ``make bench`` creates) loading it and running its
  kernel breakdown, temporal breakdown, idle time breakdown, launch stats and queue
  length summary, and against the same on a small synthetic trace.
* **ladder**: the same session and HTA's on real traces of 1.2 to 18 MB of JSON
  (:data:`LADDER`): where tracewh's session overtakes HTA's as the trace grows.
* **cold**: ``tracewh kernels --top 5`` on a one-run warehouse against the bare
  ``python -c "import duckdb; duckdb.sql('select 1')"``.
* **mid**: ``tracewh ingest FILE`` (the default invocation) of a 52 MB real trace (as it
  is) and of the H100 trace tiled to at least 62 MB (4 tiles: 72 MB), against HTA's load of
  the same file.
* **big**: the H100 trace tiled to 250 MB and 1 GB: the bare
  ``deque(ijson.items(f, "traceEvents.item"))``, ``tracewh ingest FILE --jobs 1`` and
  ``tracewh ingest FILE`` (``--jobs auto``: split across the cores).
* **nightly**: ``tracewh ingest DIR`` (default options) of a nightly folder of 120 small and
  medium real traces (the shared traces up to 1.4 MB gzip in turn, each copy shifted in
  time: ~27 MB gzip, written once under ``$TRACEWH_BENCH_DATA``, default the system's temp
  folder, never the project) against one Python process that only gunzips and
  ``ijson``-parses the same files; peak memory summed over the process tree (PSS).
* **files**: ``tracewh ingest DIR --jobs 1`` of 60 copies of a tiny real trace (33 events,
  each shifted in time: distinct runs) and of 120 tiny synthetic traces: seconds per file.
* **report**: ``tracewh report --out`` (one run) and ``tracewh report --site`` (20 runs) on a
  20-night synthetic warehouse: seconds per report and per run page.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from bench import realtraces
from bench.timing import default_sizes

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data" / "bench"
PY = sys.executable
TW = str(Path(sys.executable).with_name("tracewh"))
HTA_PY = DATA / "hta-venv" / "bin" / "python"

TW_SESSION = """
import sys, tempfile
from tracewh.api import Warehouse
with tempfile.TemporaryDirectory(dir=sys.argv[2]) as tmp:
    wh = Warehouse(tmp + "/wh")
    report = wh.ingest([sys.argv[1]])
    assert report.ok and report.ingested, report.to_dict()
    for frame in (wh.kernels(), wh.breakdown(), wh.idle_breakdown(), wh.launches(), wh.queue_depth()):
        assert frame.width > 0
"""

HTA_SESSION = """
import os, sys
from hta.trace_analysis import TraceAnalysis
path, rank, full = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
a = TraceAnalysis(trace_files={rank: path}, trace_dir=os.path.dirname(path))
if full:
    a.get_gpu_kernel_breakdown(visualize=False)
    a.get_temporal_breakdown(visualize=False)
    a.get_idle_time_breakdown(ranks=[rank], visualize=False)
    a.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False)
    a.get_queue_length_summary(ranks=[rank])
"""

BARE_DUCKDB = "import duckdb; duckdb.sql('select 1')"
BARE_IJSON_DIR = (
    "import gzip, sys; from collections import deque; from pathlib import Path; import ijson\n"
    "for p in sorted(Path(sys.argv[1]).glob('*.json.gz')):\n"
    "    with gzip.open(p, 'rb') as f:\n"
    "        deque(ijson.items(f, 'traceEvents.item'), maxlen=0)"
)
#: Set by --base: an earlier checkout measured beside this one (None: not measured).
BASE: list[str | None] = [None]
BARE_IJSON = (
    "import gzip, sys; from collections import deque; import ijson; "
    "f = gzip.open(sys.argv[1], 'rb'); deque(ijson.items(f, 'traceEvents.item'), maxlen=0)"
)


def measure(cmd: Sequence[str], *, tree: bool = False,
            env: dict[str, str] | None = None) -> dict[str, float]:
    """One run of ``cmd`` under ``bench/measure.py``: seconds, rss_mb, cpu_s (and with
    ``tree``, tree_mb: the peak PSS summed over its process tree)."""
    done = subprocess.run(
        [sys.executable, "-S", str(ROOT / "bench" / "measure.py"), *(["--tree"] if tree else []),
         *cmd],
        cwd=ROOT, capture_output=True, text=True, check=False,
        env=None if env is None else {**os.environ, **env},
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"measure failed: {cmd}: {done.stderr[-2000:]}")
    out = dict(json.loads(lines[-1]))
    if out["exit"] != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {out['exit']}: {done.stderr[-2000:]}")
    return out


def rounds(named: dict[str, Callable[[], Sequence[str]]], n: int, *, tree: bool = False,
           envs: dict[str, dict[str, str]] | None = None) -> dict[str, dict[str, float]]:
    """``n`` interleaved rounds of each command (the order rotating); medians per command.

    A command is a callable returning the argv, called before each run (fresh temp paths);
    ``envs``: extra environment variables of some commands (by name). Each result also has
    ``ratio_<name>``: the median over rounds of its time over that command's in the same round.
    """
    names = list(named)
    runs: dict[str, list[dict[str, float]]] = {k: [] for k in names}
    keys = ("seconds", "rss_mb", "cpu_s", *(("tree_mb",) if tree else ()))
    for r in range(n):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            runs[name].append(measure(named[name](), tree=tree, env=(envs or {}).get(name)))
    out = {k: {key: statistics.median(m[key] for m in v) for key in keys} for k, v in runs.items()}
    for k in names:
        for other in names:
            out[k][f"ratio_{other}"] = statistics.median(
                a["seconds"] / b["seconds"] for a, b in zip(runs[k], runs[other], strict=True))
    return out


def _base_cmd(args: Sequence[str]) -> list[str]:
    """``tracewh ARGS`` of the --base checkout (its env: :func:`_base_env`).

    ``-P``: the commands run from this checkout, and ``python -m`` would put it first on
    ``sys.path``, ahead of ``PYTHONPATH``: the base would run this checkout's code.
    """
    return [PY, "-P", "-m", "tracewh", *args]


def _base_env() -> dict[str, str]:
    return {"PYTHONPATH": str(BASE[0])}


def bench_data() -> Path:
    """Where the nightly folder is written: ``$TRACEWH_BENCH_DATA``, default the temp folder."""
    return Path(os.environ.get("TRACEWH_BENCH_DATA") or tempfile.gettempdir()) / "tracewh-bench"


def _load() -> str:
    """The host's load and the gzip inflater tracewh's ingest uses here (the ``fast`` extra)."""
    from tracewh.ingest.decompress import INFLATER

    try:
        one, five, fifteen = os.getloadavg()
        return f"load {one:.2f} {five:.2f} {fifteen:.2f}; gzip inflater {INFLATER}"
    except OSError:
        return f"load n/a; gzip inflater {INFLATER}"


def _tmp() -> str:
    DATA.mkdir(parents=True, exist_ok=True)
    return tempfile.mkdtemp(prefix="real-", dir=DATA)


def _fresh_wh() -> list[str]:
    return ["-w", str(Path(_tmp()) / "wh")]


def _line(label: str, ours: dict[str, float], theirs: dict[str, float] | None, goal: str,
          *, anchor: str, speed: str = "ours/theirs") -> None:
    if theirs is None:
        print(f"  {label:44} tracewh {ours['seconds']:7.2f} s {ours['rss_mb']:6.0f} MB | "
              f"{anchor}: not measured | goal {goal}", flush=True)
        return
    t = ours["seconds"] / theirs["seconds"]
    m = ours["rss_mb"] / theirs["rss_mb"]
    c = ours["cpu_s"] / theirs["cpu_s"] if theirs["cpu_s"] else float("nan")
    shown = (f"time {t:5.2f}x (CPU {c:4.2f}x)" if speed == "ours/theirs"
             else f"speed {1 / t:5.2f}x (CPU {1 / c:4.2f}x)")
    print(f"  {label:44} tracewh {ours['seconds']:7.2f} s {ours['rss_mb']:6.0f} MB | "
          f"{anchor} {theirs['seconds']:7.2f} s {theirs['rss_mb']:6.0f} MB | {shown}, "
          f"memory {m:4.2f}x | goal {goal}", flush=True)


def _hta() -> bool:
    return HTA_PY.exists()


def small(n: int) -> None:
    print(f"\n-- small traces: ingest + 5 analyses, one process, vs HTA load + the same ({_load()})")
    synth = DATA / "real" / "synth-small.pt.trace.json.gz"
    if not synth.exists():
        from tracewh.synth import SynthConfig, write_trace

        write_trace(synth, SynthConfig(steps=3, layers=2, seed=16))
    cases = [(realtraces.SHARED / name, rank) for name, rank in realtraces.SMALL.items()]
    cases.append((synth, 0))
    for path, rank in cases:
        cmds: dict[str, Callable[[], Sequence[str]]] = {
            "tw": lambda p=path: [PY, "-c", TW_SESSION, str(p), _tmp()],
        }
        if _hta():
            cmds["hta"] = lambda p=path, r=rank: [str(HTA_PY), "-c", HTA_SESSION, str(p), str(r), "1"]
        got = rounds(cmds, n)
        kb = path.stat().st_size / 1024
        _line(f"{path.name[:34]} ({kb:.0f} KB)", got["tw"], got.get("hta"),
              "time < 1x, memory < 1x", anchor="HTA")


#: Real traces between the small sessions and the mid-size ingests (1.2 to 18 MB of JSON), for
#: where the whole session (ingest + the 5 analyses) overtakes HTA's load + the same: name, rank.
LADDER = (
    ("tracelens__mi300__bert-small-uncased.json.gz", 0),
    ("mtia_inference_trace__mtia_inference_rank_0.json.gz", 0),
    ("nccl_parser_config__nccl_data.json.gz", 0),
    ("ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 0),
    ("tracelens__h100__timesformer-base-k400.json.gz", 0),
)


def ladder(n: int) -> None:
    print(f"\n-- session by trace size: ingest + 5 analyses, one process, vs HTA load + the same, "
          f"real traces of 1.2-18 MB JSON ({_load()})")
    if not _hta():
        print("  HTA not installed: no side-by-side")
        return
    for name, rank in LADDER:
        path = realtraces.SHARED / name
        if not path.exists():
            continue
        got = rounds({
            "tw": lambda p=path: [PY, "-c", TW_SESSION, str(p), _tmp()],
            "hta": lambda p=path, r=rank: [str(HTA_PY), "-c", HTA_SESSION, str(p), str(r), "1"],
        }, n)
        _line(f"{name[:30]} ({_json_mb(path):.1f} MB JSON)", got["tw"], got["hta"],
              "none (where the session overtakes HTA)", anchor="HTA")


def cold(n: int) -> None:
    print(f"\n-- cold start: tracewh kernels --top 5 vs bare python+duckdb, tracewh's bytecode compiled "
          f"as a pip install leaves it ({_load()})")
    wh = DATA / "real" / "cold_wh"
    if not (wh / "BUILT").exists():
        shutil.rmtree(wh, ignore_errors=True)
        src = realtraces.SHARED / "timeline_analysis__sampled_rank-0.json.gz"
        subprocess.run([TW, "ingest", str(src), "-w", str(wh)], check=True, capture_output=True)
        subprocess.run([TW, "kernels", "-w", str(wh)], check=True, capture_output=True)
        (wh / "BUILT").write_text("1")
    # tracewh's own bytecode, as `pip install` leaves it: an editable install has none, and
    # with PYTHONDONTWRITEBYTECODE=1 (set on these machines) every start would compile its
    # ~30 modules again (~0.05-0.1 s), which an installed tool never does
    import tracewh

    subprocess.run([PY, "-m", "compileall", "-q", str(Path(tracewh.__file__).parent)],
                   check=False, capture_output=True)
    got = rounds({
        "tw": lambda: [TW, "kernels", "-w", str(wh), "--top", "5"],
        "bare": lambda: [PY, "-c", BARE_DUCKDB],
        "version": lambda: [TW, "version"],
    }, n)
    ratio = got["tw"]["seconds"] / got["bare"]["seconds"]
    print(f"  tracewh kernels --top 5 {got['tw']['seconds']:.3f} s ({got['tw']['rss_mb']:.0f} MB), "
          f"bare {got['bare']['seconds']:.3f} s ({got['bare']['rss_mb']:.0f} MB): {ratio:.2f}x "
          f"(goal <= 2x); `tracewh version` {got['version']['seconds']:.3f} s "
          f"({got['version']['seconds'] / got['bare']['seconds']:.2f}x)", flush=True)


def mid(n: int) -> None:
    print(f"\n-- mid-size real traces: tracewh ingest FILE vs HTA's load ({_load()})")
    files = [
        (realtraces.SHARED / "df_index_resolver__df_index_resolver.json.gz", 1),
        (realtraces.tiled(realtraces.BIG_SOURCE, 62 * 10**6), 0),  # >= 62 MB: 4 tiles, 72 MB
    ]
    for path, rank in files:
        cmds: dict[str, Callable[[], Sequence[str]]] = {
            "tw": lambda p=path: [TW, "ingest", str(p), *_fresh_wh()],
        }
        if _hta():
            cmds["hta"] = lambda p=path, r=rank: [str(HTA_PY), "-c", HTA_SESSION, str(p), str(r), "0"]
        if BASE[0]:
            cmds["base"] = lambda p=path: _base_cmd(["ingest", str(p), *_fresh_wh()])
        got = rounds(cmds, n, envs={"base": _base_env()})
        mb = _json_mb(path)
        _line(f"{path.name[:34]} ({mb:.0f} MB JSON)", got["tw"], got.get("hta"),
              "speed >= 5x, memory <= 0.5x", anchor="HTA load", speed="theirs/ours")
        if "base" in got:
            _line(f"  --base ({mb:.0f} MB JSON)", got["base"], got.get("hta"),
                  "speed >= 5x, memory <= 0.5x", anchor="HTA load", speed="theirs/ours")
            print(f"  tracewh / --base, same rounds: time {got['tw']['ratio_base']:4.2f}x, "
                  f"peak RSS {got['tw']['rss_mb']:.0f} / {got['base']['rss_mb']:.0f} MB", flush=True)


def _json_mb(path: Path) -> float:
    import gzip

    if not path.name.endswith(".gz"):
        return path.stat().st_size / 1e6
    # the ISIZE trailer is the size mod 2**32: decompress to count (once, cached beside)
    cache = DATA / "real" / f"{path.name}.size"
    if cache.exists():
        return float(cache.read_text()) / 1e6
    n = 0
    with gzip.open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            n += len(chunk)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(str(n))
    return n / 1e6


def big(sizes: list[str], n: int) -> None:
    from tracewh.synth import parse_size

    print(f"\n-- big real traces (the H100 trace tiled): ingest vs bare ijson.items ({_load()})")
    for size in sizes:
        path = realtraces.tiled(realtraces.BIG_SOURCE, parse_size(size))
        got = rounds({
            "ijson": lambda p=path: [PY, "-c", BARE_IJSON, str(p)],
            "one": lambda p=path: [TW, "ingest", str(p), "--jobs", "1", *_fresh_wh()],
            "auto": lambda p=path: [TW, "ingest", str(p), *_fresh_wh()],
        }, n, tree=True)
        bare = got["ijson"]["seconds"]
        print(f"  {size:>6} ({_json_mb(path):.0f} MB JSON): bare ijson {bare:.1f} s; "
              f"--jobs 1 {got['one']['seconds']:.1f} s = {bare / got['one']['seconds']:.2f}x "
              f"(goal >= 0.7x), {got['one']['rss_mb']:.0f} MB; default (auto, "
              f"{os.cpu_count()} cores) {got['auto']['seconds']:.1f} s = "
              f"{bare / got['auto']['seconds']:.2f}x (goal >= 1.0x), largest process "
              f"{got['auto']['rss_mb']:.0f} MB (goal <= 300 MB), {got['auto']['tree_mb']:.0f} MB PSS "
              f"summed over its processes (issue 34 goal at 1 GB: >= 1.3x, <= 200 MB)", flush=True)


def nightly(n: int) -> None:
    print(f"\n-- nightly folder: tracewh ingest DIR (default options) vs one process that gunzips "
          f"+ ijson-parses the same files ({_load()})")
    folder = bench_data() / "nightly-120"
    paths = realtraces.nightly(folder)
    gz_mb = sum(p.stat().st_size for p in paths) / 1e6
    cmds: dict[str, Callable[[], Sequence[str]]] = {
        "bare": lambda: [PY, "-c", BARE_IJSON_DIR, str(folder)],
        "tw": lambda: [TW, "ingest", str(folder), *_fresh_wh()],
    }
    if BASE[0]:
        cmds["base"] = lambda: _base_cmd(["ingest", str(folder), *_fresh_wh()])
    got = rounds(cmds, n, tree=True, envs={"base": _base_env()})
    bare = got["bare"]
    for name in [k for k in ("tw", "base") if k in got]:
        ours = got[name]
        label = "tracewh" if name == "tw" else f"--base {Path(str(BASE[0])).name}"
        print(f"  {len(paths)} files ({gz_mb:.0f} MB gz) {label:14} {ours['seconds']:6.1f} s "
              f"(CPU {ours['cpu_s']:5.1f} s), {ours['tree_mb']:4.0f} MB PSS summed over the "
              f"process tree | bare gunzip+ijson {bare['seconds']:5.1f} s (CPU {bare['cpu_s']:4.1f} s) "
              f"| time {ours['ratio_bare']:4.2f}x the bare parse (goal <= 2x), memory goal <= "
              "400 MB", flush=True)
    if "base" in got:
        print(f"  tracewh / --base, same rounds: time {got['tw']['ratio_base']:4.2f}x", flush=True)


def files(n: int) -> None:
    print(f"\n-- many tiny files at --jobs 1: seconds per file ({_load()})")
    real = realtraces.variants(realtraces.TINY_SOURCE, 60)
    from bench.bench_scale import traces as synth_traces

    synth_dir = synth_traces()
    for label, folder, count in (
        (f"{len(real)} copies of a tiny real trace", real[0].parent, len(real)),
        ("120 tiny synthetic traces", synth_dir, 120),
    ):
        got = rounds({"one": lambda d=folder: [TW, "ingest", str(d), "--jobs", "1", *_fresh_wh()]}, n)
        per = got["one"]["seconds"] / count
        print(f"  {label:34} {got['one']['seconds']:6.1f} s: {per * 1000:5.0f} ms per file "
              f"(goal <= 100 ms), {got['one']['rss_mb']:.0f} MB", flush=True)


def report(n: int, site_rounds: int = 1) -> None:
    print(f"\n-- reports on a 20-night synthetic warehouse ({_load()})")
    wh = DATA / "real" / "report_wh"
    if not (wh / "BUILT").exists():
        shutil.rmtree(wh, ignore_errors=True)
        src = DATA / "real" / "report_src"
        subprocess.run([TW, "synth", str(src), "--runs", "20", "--start", "2025-01-01",
                        "--steps", "4", "--seed", "16"], check=True, capture_output=True)
        subprocess.run([TW, "ingest", str(src), "-w", str(wh)], check=True, capture_output=True)
        (wh / "BUILT").write_text("1")
    got = rounds({
        "one": lambda: [TW, "report", "-w", str(wh), "--out", str(Path(_tmp()) / "r")],
    }, n)
    # the 20-page site: one round unless --rounds asks for more (a minute or more each)
    got |= rounds({
        "site": lambda: [TW, "report", "-w", str(wh), "--site", str(Path(_tmp()) / "s")],
    }, site_rounds)
    print(f"  tracewh report --out: {got['one']['seconds']:.2f} s (goal <= 2 s), "
          f"{got['one']['rss_mb']:.0f} MB; report --site (20 run pages): "
          f"{got['site']['seconds']:.1f} s = {got['site']['seconds'] / 20:.2f} s per run page "
          f"(goal <= 0.5 s), {got['site']['rss_mb']:.0f} MB", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_real")
    ap.add_argument("--only", default="small,ladder,cold,mid,big,nightly,files,report")
    ap.add_argument("--base", default=None,
                    help="another tracewh checkout measured beside this one (mid, nightly)")
    ap.add_argument("--sizes", default=default_sizes(),
                    help="trace sizes (default 250MB; with bench.run --big: 250MB,1GB,2GB)")
    ap.add_argument("--rounds", type=int, default=0, help="rounds for every part (default: per part)")
    ns = ap.parse_args(argv if argv is not None else [])
    if not realtraces.available():
        print("../shared/traces is absent: no real-trace benchmarks")
        return
    if not _hta():
        print(f"HTA is not installed in {HTA_PY.parent.parent} (make bench creates it): "
              "no HTA side-by-side")
    only = set(ns.only.split(","))
    BASE[0] = ns.base
    if ns.base and not (Path(ns.base) / "tracewh" / "sql").exists():
        # tracewh.sql is the repository's sql/, mapped by this checkout's editable install
        print(f"note: {ns.base}/tracewh/sql does not exist: the base reads this checkout's SQL "
              f"files (ln -s ../sql {ns.base}/tracewh/sql gives it its own)")
    r = ns.rounds
    try:
        if "small" in only:
            small(r or 5)
        if "ladder" in only:
            ladder(r or 3)
        if "cold" in only:
            cold(r or 11)
        if "mid" in only:
            mid(r or 3)
        if "big" in only:
            big([s.strip() for s in ns.sizes.split(",") if s.strip()], r or 1)
        if "nightly" in only:
            nightly(r or 1)
        if "files" in only:
            files(r or 1)
        if "report" in only:
            report(r or 3, r or 1)
    finally:
        for tmp in DATA.glob("real-*"):
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(sys.argv[1:])
