"""The analysis half of ``changes`` at 10x the runs of a fleet warehouse, in process: a proxy.

Building a 30,000-run fleet warehouse by ingest takes about 11 hours on the shared 2-core
machine (``bench/fleet_build.py``: 68 minutes for 3,000), so 30,000 runs are measured here
on a *stretched* copy of the 3,000-run warehouse's history instead, clearly not the same
thing as a warehouse of 30,000 ingested runs:

* each night of the warehouse becomes ``factor`` consecutive nights (night ``i`` ->
  nights ``i * factor ... i * factor + factor - 1``), each of its runs ``factor`` runs with
  the same series, rank and workload; the injected regressions keep their place (the same
  fraction of the history, night ``i * factor``);
* the first copy keeps its run's stored values (``series_values``: what ``changes``
  reads); each other copy takes, for its series, the stored values of a night drawn at
  random (seeded) from the same regime of its workload (the nights between the same
  injected regressions): real night-to-night noise, resampled, with the regressions where
  they were. (Repeating a night's values would make every block of ``factor`` copies a
  level of its own, and drawing from nearby nights makes neighbouring copies correlated:
  both are changes to the detector.)

Then, timed (after a warm-up pass) and, in a third pass, with the peak of Python's
allocations (``tracemalloc``: numpy and Polars buffers are not all counted; the whole
processes of ``bench_fleet`` measure RSS), the steps
``tracewh.history.alerts.changes`` runs after its queries: the workload assignment
(``assign_workloads``, on the stretched runs' stored fingerprints), the change points of
every series (``find_changes``) and the alert groups (``group_changes``); and the precision
score of ``bench_fleet`` (each injection one group within a night, no other group).

``python -m bench.fleet_scale [--size 3000] [--factor 10] [--root DIR]``; ``--factor 1``
runs the same steps on the warehouse itself (the reference the proxy is compared with).
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from bench.fleet_build import REGRESSIONS, START, build
from tracewh.api import Warehouse
from tracewh.history.alerts import run_set, series_values
from tracewh.history.changes import DERIVED, DetectOptions, find_changes, group_changes
from tracewh.history.options import ChangesOptions
from tracewh.history.workload import assign_workloads

DAY_NS = 86_400 * 10**9


def stretch(runs: pl.DataFrame, values: pl.DataFrame, factor: int, *, seed: int = 0
            ) -> tuple[pl.DataFrame, pl.DataFrame]:  # fmt: skip
    """``runs`` and ``values`` with each night ``factor`` nights (see the module docstring)."""
    if factor == 1:
        return runs, values
    start0 = int(runs["start_ns"].min())
    r = runs.with_columns(((pl.col("start_ns") - start0) // DAY_NS).alias("_night"))
    nights = int(r["_night"].max()) + 1
    # each workload's regimes: the nights between its injections
    cuts = {inj.model: [] for inj in REGRESSIONS}  # type: dict[str, list[int]]
    for inj in REGRESSIONS:
        cuts[inj.model].append((inj.night(nights) - START).days)
    def regime(workload: str, night: int) -> int:
        return sum(night >= c for m, cs in cuts.items() if m in workload for c in cs)
    rng = np.random.default_rng(seed)
    same: dict[tuple[str, int], list[int]] = {}
    rows = []
    for rid, series, wl, night in r.select("run_id", "series", "workload", "_night").iter_rows():
        mine = regime(wl, night)
        near = same.setdefault((wl, mine), [j for j in range(nights) if regime(wl, j) == mine])
        for k in range(factor):
            src = night if k == 0 else int(rng.choice(near))
            rows.append((f"{rid}#{k}", rid, series, src, night * factor + k))
    new = pl.DataFrame(rows, schema=["run_id", "_orig", "series", "_src", "_new"], orient="row")
    by_night = r.select(pl.col("run_id").alias("_from"), "series", pl.col("_night").alias("_src"))
    new = new.join(by_night, on=["series", "_src"], how="left")
    out_runs = (
        new.join(r.drop("series").rename({"run_id": "_orig"}), on="_orig")
        .with_columns((start0 + pl.col("_new") * DAY_NS + (pl.col("start_ns") - start0) % DAY_NS)
                      .alias("start_ns"))
        .with_columns(pl.from_epoch("start_ns", time_unit="ns").dt.date().alias("day"))
    )  # fmt: skip
    out_values = new.select("run_id", "_from").join(
        values.rename({"run_id": "_from"}), on="_from").drop("_from")  # fmt: skip
    keep = [c for c in runs.columns if c != "day"] + ["day"]
    return out_runs.select(keep), out_values.select(values.columns)


def analyse(runs: pl.DataFrame, values: pl.DataFrame, minhash: pl.DataFrame) -> dict[str, object]:
    """The steps of ``changes`` after its queries, timed; the grouped changes."""
    opt = ChangesOptions()
    t0 = time.perf_counter()
    table = runs.drop("workload", "series", strict=False).join(minhash, on="run_id", how="left")
    wl = assign_workloads(table, keys=opt.keys)
    t1 = time.perf_counter()
    found = find_changes(runs, values, options=DetectOptions(
        alpha=opt.alpha, min_change=opt.min_change, min_value=opt.min_ms * 1e6,
        floor=opt.floor_ms * 1e6))  # fmt: skip
    t2 = time.perf_counter()
    tested = (
        values.filter(pl.col("metric").is_in(list(DERIVED)))
        .join(runs.select("run_id", "series", "workload"), on="run_id")
        .group_by("workload").agg(pl.struct("series", "metric", "key").n_unique().alias("n"))
    )  # fmt: skip
    grouped = group_changes(found, runs, alpha=opt.alpha,
                            derived_tests={str(w): int(n) for w, n in tested.iter_rows()})
    t3 = time.perf_counter()
    return {"workloads_s": t1 - t0, "change_points_s": t2 - t1, "groups_s": t3 - t2,
            "workloads": wl["workload"].n_unique(), "grouped": grouped}  # fmt: skip


def score(grouped: pl.DataFrame, runs: pl.DataFrame, nights: int, factor: int = 1
          ) -> tuple[bool, list[str]]:  # fmt: skip
    """``bench_fleet``'s precision rule on ``grouped`` (its ``day``: from the runs' start); an
    injection's night is its night in the unstretched history times ``factor``."""
    at = [START + dt.timedelta(days=(inj.night(nights // factor) - START).days * factor)
          for inj in REGRESSIONS]  # fmt: skip
    ch = grouped.join(runs.select("run_id", "day", "workload"), on="run_id", how="left")
    found = []
    for g in ch["group"].unique().sort().to_list():
        rows = ch.filter(pl.col("group") == g)
        prim = rows.filter(~pl.col("metric").is_in(["step", "idle", "category"]))
        day = min((prim if prim.height else rows)["day"].to_list())
        found.append((g, day, str(rows["workload"][0]), rows.height))
    matched = [sum(1 for _, d, w, _ in found if inj.model in w and abs((d - day).days) <= 1)
               for inj, day in zip(REGRESSIONS, at, strict=True)]  # fmt: skip
    extra = [f for f in found if not any(inj.model in f[2] and abs((f[1] - day).days) <= 1
                                         for inj, day in zip(REGRESSIONS, at, strict=True))]
    lines = [f"  group {g}: {d} (night {(d - START).days}) {w}: {n} change(s)" for g, d, w, n in found]
    ok = matched == [1] * len(REGRESSIONS) and not extra
    lines.insert(0, f"{len(found)} group(s); per injection {matched} (want [1, 1, 1, 1]); "
                 f"{len(extra)} other group(s){'' if ok else '  <-- PRECISION NOT MET'}")
    return ok, lines


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="fleet_scale")
    ap.add_argument("--size", type=int, default=3000)
    ap.add_argument("--factor", type=int, default=10)
    ap.add_argument("--root", default="/work/data-fleet")
    args = ap.parse_args(list(argv) if argv is not None else [])
    wh = Warehouse(build(Path(args.root), args.size))
    rs = run_set(wh)
    runs0 = rs.runs.select("run_id", "series", "workload", "start_ns", "day", "labels_json", "job",
                           "device_name", "backend", "rank", "world_size")  # fmt: skip
    values0 = series_values(wh, since=None)
    minhash0 = wh.run_table().select("run_id", "minhash")
    runs, values = stretch(runs0, values0, args.factor)
    minhash = runs.select("run_id").with_columns(
        pl.col("run_id").str.replace(r"#\d+$", "").alias("_orig")
    ).join(minhash0.rename({"run_id": "_orig"}), on="_orig", how="left").drop("_orig")
    n_runs = runs.height
    nights = int((runs["day"].max() - runs["day"].min()).days) + 1
    print(f"{n_runs:,} runs ({args.size:,}-run warehouse x {args.factor}), {nights} nights, "
          f"{values.height:,} series values")  # fmt: skip
    analyse(runs, values, minhash)  # warm-up: imports, first calls
    got = analyse(runs, values, minhash)  # timed
    tracemalloc.start()  # slows allocations: a separate pass for the peak
    analyse(runs, values, minhash)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    ok, lines = score(got["grouped"], runs, nights, args.factor)  # type: ignore[arg-type]
    print(f"workload assignment {got['workloads_s']:.2f} s ({got['workloads']} workloads), "
          f"change points {got['change_points_s']:.2f} s, groups {got['groups_s']:.2f} s; "
          f"peak Python allocations {peak / 1e6:.0f} MB")  # fmt: skip
    print("\n".join(lines))
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
