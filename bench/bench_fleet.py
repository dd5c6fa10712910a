"""History at fleet scale: 300 vs 3,000 (vs 30,000) nightly runs, whole processes, side by side.

The warehouses (``bench/fleet_build.py``: 3 workloads x 2 ranks a night, 4 injected
regressions) are built once under ``--root`` (default ``/work/data-fleet``, else
``data/bench/fleet``) and reused. A 30,000-run one is made from the 3,000-run one by
``python -m bench.fleet_replicate`` (the same 500 nights, each job on 20 ranks: minutes,
not the 7-11 hours of a build), which writes the ``BUILT`` marker ``build`` looks for. Then, per size, interleaved (each round runs every command
at every size before the next round, so a change of load on a shared machine hits all sizes
alike; medians of ``--rounds``, after one unmeasured pass at the smallest size):

* whole processes (``bench/measure.py``: wall seconds, peak RSS of the biggest process):
  ``tracewh changes --since all``, ``check``, ``report``, ``history --kernel flash_fwd``,
  ``runs``, and a bare DuckDB ``GROUP BY run_id, name`` over every ``gpu_ops`` file of the
  snapshot (a Python process importing duckdb and deltalake: what a user without tracewh
  runs); the table shows each command's growth from the smallest size to each other size
  and its ratio to the bare scan at the same size;
* ``EXPLAIN ANALYZE`` of the history queries (``series_values``, the report's memory
  series, ``metric_history``) at each size: the rows and bytes all operators move, and
  the largest operator. A plan whose operator rows grow more than 1.5x faster than the runs
  makes the bench fail loudly (exit 1). Bytes are shown, not checked: DuckDB counts a string
  vector's whole buffer for each chunk that references it, so the rows of an ``unnest`` of
  one list (the kernel-key resolution) each count the list's buffer; the N^2 of issue 35
  (a 3,000-id list copied onto every ``[memory]`` row) showed in both, and peak RSS of the
  whole processes is the memory measured;
* precision of ``changes``: each injected regression must come out as exactly one group
  whose run is within a night of its injection, and no other group may exist.

With ``--compacted``, each warehouse is first copied to ``ROOT/wh-N-compacted`` and
compacted there by ``tracewh compact --retain-hours 0`` (the small files of each table
merged per day, each log checkpointed; timed once, the copy is reused). ``--baseline PATH``
measures a second ``tracewh`` executable beside this one (rows ``... (baseline)``, same
rounds, same warehouses): the figures before a change, side by side.

With ``--migrated``, each warehouse is first copied to ``ROOT/wh-N-migrated`` and brought up
to date there by ``tracewh migrate`` (timed once; the copy is reused): the warehouses are
built by whichever tracewh ran the build (an older one: "existing warehouses"), and the
migrated copies are what this tracewh reads after ``tracewh migrate``. ``--tracewh PATH``
measures another installation's ``tracewh`` (e.g. ``/work/main/.venv/bin/tracewh``: the
figures before a change), side by side with the same bare scan.

``python -m bench.bench_fleet [--sizes 300,3000] [--rounds 3] [--root DIR] [--migrated]
[--compacted] [--tracewh PATH] [--baseline PATH] [--no-process] [--no-plans]
[--no-precision]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.fleet_build import REGRESSIONS, START, build

HERE = Path(__file__).resolve().parent
TRACEWH = str(Path(sys.executable).with_name("tracewh"))
_EXE: dict[str, str] = {"tracewh": TRACEWH}
#: the plans checked for superlinear growth
PLANS: dict[str, str] = {
    "series_values": "SELECT * FROM series_values()",
    "memory_series": (
        "SELECT r.run_id, m.value FROM (SELECT run_id, max(peak_allocated_per_step_bytes) AS value"
        " FROM run_memory_in($ids) WHERE device_type = 'gpu' GROUP BY run_id) m"
        " JOIN runs r USING (run_id)"
    ),
    "metric_history": "SELECT * FROM metric_history(kernel_pattern := 'flash_fwd')",
}
#: a plan's bytes may grow this much faster than the runs before the bench fails
SUPERLINEAR = 1.5

BARE = """
import sys, duckdb, deltalake
files = deltalake.DeltaTable(sys.argv[1] + '/tables/gpu_ops').file_uris()
duckdb.sql("SET enable_progress_bar = false")
duckdb.sql("SELECT run_id, name, count(*), sum(dur_ns) FROM read_parquet($f) GROUP BY ALL",
           params={"f": files}).fetchall()
"""


def _root(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    fleet = Path("/work/data-fleet")
    return fleet if fleet.exists() else Path("data/bench/fleet")


def commands(wh: Path, out: Path) -> dict[str, list[str]]:
    w = ["-w", str(wh)]
    cmds: dict[str, list[str]] = {}
    for tag, exe in (("", _EXE["tracewh"]), (" (baseline)", _EXE.get("baseline", ""))):
        if not exe:
            continue
        cmds.update({
            f"changes{tag}": [exe, "changes", "--since", "all", *w, "--format", "json"],
            f"check{tag}": [exe, "check", *w],
            f"report{tag}": [exe, "report", *w, "-o", f"{out}{tag.strip(' ()')}"],
            f"history{tag}": [exe, "history", "--kernel", "flash_fwd", "--since", "all", *w],
            f"runs{tag}": [exe, "runs", *w],
        })  # fmt: skip
    cmds["bare scan"] = [sys.executable, "-c", BARE, str(wh)]
    return cmds


def measure(cmd: list[str]) -> dict[str, Any]:
    res = subprocess.run([sys.executable, "-S", str(HERE / "measure.py"), *cmd],
                         capture_output=True, text=True, check=True)  # fmt: skip
    out: dict[str, Any] = json.loads(res.stdout.strip().splitlines()[-1])
    if out["exit"] not in (0, 1):  # check exits 1 on a regression: that is an answer
        raise RuntimeError(f"{' '.join(cmd)} exited {out['exit']}: {res.stderr[-2000:]}")
    return out


def processes(whs: dict[int, Path], rounds: int) -> None:
    """Every command at every size, ``rounds`` interleaved rounds; a table of medians."""
    got: dict[tuple[str, int], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="tracewh-bench-fleet-") as tmp:
        # one unmeasured pass at the smallest size: byte-compiled modules and the prepared
        # catalog are cached once per installation, not per warehouse
        for cmd in commands(whs[min(whs)], Path(tmp) / "warmup").values():
            measure(cmd)
        for r in range(rounds):
            order = sorted(whs) if r % 2 == 0 else sorted(whs, reverse=True)
            for n in order:
                for name, cmd in commands(whs[n], Path(tmp) / f"report-{n}").items():
                    got.setdefault((name, n), []).append(measure(cmd))
    sizes = sorted(whs)
    base = sizes[0]
    head = " | ".join(f"{n:,} runs s (RSS MB)" for n in sizes)
    grow = " | ".join(f"x{n // base} growth" for n in sizes[1:])
    bare = " | ".join(f"vs bare at {n:,}" for n in sizes)
    print(f"\n| command | {head} | {grow} | {bare} |")
    print("|---" * (1 + 3 * len(sizes) - 1) + "|")
    med = {k: (statistics.median(x["seconds"] for x in v), max(x["rss_mb"] for x in v))
           for k, v in got.items()}  # fmt: skip
    for name in commands(Path("."), Path(".")):
        cells = [f"{med[(name, n)][0]:.2f} ({med[(name, n)][1]:.0f})" for n in sizes]
        cells += [f"{med[(name, n)][0] / med[(name, base)][0]:.2f}x" for n in sizes[1:]]
        cells += [f"{med[(name, n)][0] / med[('bare scan', n)][0]:.2f}x" for n in sizes]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"(median of {rounds} interleaved rounds; RSS: the largest peak of any round)")


def _walk(node: dict[str, Any], out: list[tuple[str, int, int]]) -> None:
    out.append((str(node.get("name", "")), int(node.get("intermediate_rows", 0) or 0),
                int(node.get("intermediate_size_bytes", 0) or 0)))  # fmt: skip
    for child in node.get("children", []):
        _walk(child, out)


def plan_profile(wh: Path, query: str) -> dict[str, Any]:
    """Rows and bytes moved by every operator of ``query``'s plan (EXPLAIN ANALYZE)."""
    from tracewh.api import Warehouse

    w = Warehouse(wh)
    ids = w.sql("SELECT run_id FROM runs")["run_id"].to_list()
    days = None
    if "$ids" not in query:  # as the product runs it: only the days of runs without run_series
        try:
            from tracewh.history.runseries import unstored_days
        except ImportError:  # a tracewh before run_series: every partition
            pass
        else:
            days = unstored_days(w)
    with w.connection(days=days) as con:
        params = {"ids": ids} if "$ids" in query else {}
        text = con.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {query}", params).fetchall()[0][1]
    ops: list[tuple[str, int, int]] = []
    for node in json.loads(text)["operator"]:
        _walk(node, ops)
    top = max(ops, key=lambda o: o[2])
    return {"rows": sum(o[1] for o in ops), "bytes": sum(o[2] for o in ops),
            "top": f"{top[0]} {top[1]:,} rows {top[2] / 1e6:.1f} MB"}  # fmt: skip


def plans(whs: dict[int, Path]) -> bool:
    """EXPLAIN ANALYZE of each history query at each size; False on superlinear growth."""
    sizes = sorted(whs)
    ok = True
    print("\n| query | runs | operator rows | operator MB | largest operator (by bytes) | growth (rows) | growth (bytes) |")
    print("|---|---|---|---|---|---|---|")
    for name, query in PLANS.items():
        prof = {n: plan_profile(whs[n], query) for n in sizes}
        for n in sizes:
            rows = prof[n]["rows"] / max(prof[sizes[0]]["rows"], 1)
            growth = prof[n]["bytes"] / max(prof[sizes[0]]["bytes"], 1)
            bad = rows > SUPERLINEAR * n / sizes[0]
            ok = ok and not bad
            print(f"| {name} | {n:,} | {prof[n]['rows']:,} | {prof[n]['bytes'] / 1e6:.1f} | "
                  f"{prof[n]['top']} | {rows:.1f}x{' SUPERLINEAR' if bad else ''} | "
                  f"{growth:.1f}x |")  # fmt: skip
    return ok


def precision(wh: Path, n_runs: int) -> bool:
    """``changes`` over the whole history: each injection exactly one group within a night."""
    from tracewh.api import Warehouse

    w = Warehouse(wh)
    res = w.changes(since=dt.date(2000, 1, 1))
    ch = res.changes
    # the warehouse's own nights: a replicated one (bench/fleet_replicate.py) has more runs a
    # night, not more nights (nights_of(n_runs) is what bench/fleet_build.py builds)
    nights = int(w.sql("SELECT count(DISTINCT day) AS n FROM runs")["n"][0])
    found: list[tuple[int, dt.date, str, str]] = []
    for g in ch["group"].unique().sort().to_list():
        rows = ch.filter(ch["group"] == g)
        what = sorted({f"{m}:{k}" for m, k in zip(
            rows["metric"], rows["short_name"].fill_null(rows["key"]), strict=True)})
        # a group's night: that of its earliest primary change (kernel, module, memory), else
        # its earliest change (tracewh.history.changes)
        prim = rows.filter(~rows["metric"].is_in(["step", "idle", "category"]))
        found.append((g, min((prim if prim.height else rows)["day"].to_list()),
                      str(rows["workload"][0]),
                      f"{rows.height} change(s) {', '.join(what)}"[:160]))
    matched: dict[int, int] = {}
    for i, inj in enumerate(REGRESSIONS):
        day = inj.night(nights)
        hits = [g for g, d, w, _ in found if inj.model in w and abs((d - day).days) <= 1]
        matched[i] = len(hits)
    extra = [f for f in found if not any(
        inj.model in f[2] and abs((f[1] - inj.night(nights)).days) <= 1 for inj in REGRESSIONS)]
    ok = all(v == 1 for v in matched.values()) and not extra
    print(f"\nchanges at {n_runs:,} runs: {len(found)} group(s); per injection "
          f"{[matched[i] for i in range(len(REGRESSIONS))]} (want [1, 1, 1, 1]); "
          f"{len(extra)} other group(s){'' if ok else '  <-- PRECISION NOT MET'}")  # fmt: skip
    for g, d, w, what in found:
        print(f"  group {g}: {d} (night {(d - START).days}) {w}: {what}")
    return ok


def compacted(wh: Path) -> Path:
    """``wh`` copied to ``<wh>-compacted`` and compacted by ``tracewh compact`` (once; timed):
    each table's small files merged per day partition, superseded files removed, each log
    checkpointed."""
    import shutil

    out = wh.with_name(f"{wh.name}-compacted")
    done = out / "COMPACTED"
    if not done.exists():
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(wh, out)
        got = measure([TRACEWH, "compact", "--retain-hours", "0", "-w", str(out)])
        done.write_text(json.dumps(got) + "\n")
    got = json.loads(done.read_text())
    print(f"  {out.name}: tracewh compact took {got['seconds']:.1f} s, peak RSS "
          f"{got['rss_mb']:.0f} MB")  # fmt: skip
    return out


def migrated(root: Path, wh: Path) -> Path:
    """``wh`` copied to ``<wh>-migrated`` and migrated by this tracewh (once; timed)."""
    import shutil

    out = wh.with_name(f"{wh.name}-migrated")
    done = out / "MIGRATED"
    if not done.exists():
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(wh, out)
        got = measure([TRACEWH, "migrate", "-w", str(out)])
        done.write_text(json.dumps(got) + "\n")
    got = json.loads(done.read_text())
    print(f"  {out.name}: tracewh migrate took {got['seconds']:.1f} s, peak RSS "
          f"{got['rss_mb']:.0f} MB")  # fmt: skip
    return out


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench_fleet")
    ap.add_argument("--sizes", default="300,3000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--root")
    ap.add_argument("--no-process", action="store_true")
    ap.add_argument("--no-plans", action="store_true")
    ap.add_argument("--no-precision", action="store_true")
    ap.add_argument("--migrated", action="store_true")
    ap.add_argument("--compacted", action="store_true")
    ap.add_argument("--tracewh", default=TRACEWH)
    ap.add_argument("--baseline", default="")
    args = ap.parse_args(list(argv) if argv is not None else [])
    root = _root(args.root)
    root.mkdir(parents=True, exist_ok=True)
    _EXE["tracewh"] = args.tracewh
    _EXE["baseline"] = args.baseline
    whs = {n: build(root, n) for n in (int(s) for s in args.sizes.split(","))}
    if args.migrated:
        whs = {n: migrated(root, wh) for n, wh in whs.items()}
    if args.compacted:
        whs = {n: compacted(wh) for n, wh in whs.items()}
    print(f"warehouses: {', '.join(str(p) for p in whs.values())}; injected: "
          + "; ".join(f"{r.model} {r.pattern} +{r.factor:.0%} at {r.at:.0%}" for r in REGRESSIONS))
    ok = True
    if not args.no_plans:
        ok = plans(whs) and ok
    if not args.no_precision:
        for n, wh in sorted(whs.items()):
            ok = precision(wh, n) and ok
    if not args.no_process:
        processes(whs, args.rounds)
    print(f"(pid {os.getpid()})")
    if not ok:
        print("bench_fleet: FAILED (superlinear plan or precision not met)")
        raise SystemExit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
