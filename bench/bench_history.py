"""History and regression check over a year of nightly runs: tracewh vs bare DuckDB.

Builds (once, cached under ``data/bench/history_wh_365``) a warehouse of 365 nightly runs
from one ingested synthetic trace: its ``gpu_ops`` and ``steps`` rows are copied into 365
runs (one ``day`` partition each, so one Parquet file per table and night as nightly ingests
leave them; written in one Delta commit per table to build fast), with a per-night,
per-kernel noise of a few percent, ``flash_fwd`` 30% slower over the last 3 nights, and
``model``/``branch`` labels that tie the nights together. Then, side by side:

* ``Warehouse.history(kernel="flash_fwd")`` (end to end: Delta log, partition pruning,
  DuckDB views) vs one bare DuckDB query over the same Parquet files computing the same
  series (step time, GPU idle fraction, calls and time per step of the matched kernels:
  the same columns and values, checked before timing);
* ``Warehouse.check()`` of the latest run (change points of every series of its history:
  it must name flash_fwd and its category, since the first slowed night, and nothing else)
  and ``Warehouse.changes()`` over every series of the 365 nights, each timed against the
  bare history query as a reference (no single bare query detects change points).

The same three are timed again on a copy of that warehouse whose runs have their
``run_series`` rows stored (``Warehouse.migrate``, built once beside it), as an ingest by
this version leaves a warehouse: the history then reads the stored series instead of
computing them from ``gpu_ops`` and ``steps`` (the same rows, checked), against the same
bare query.

Each pair is timed in ``REPEAT`` interleaved rounds (tracewh and the bare query back to
back, alternating which goes first) so that load changes on a shared machine hit both alike;
the table prints the median time of each, their ratio, and the median of the per-round ratios.

Targets (issue 5): history overhead <= 1.5x the bare query, well under a second; issue 17:
``changes`` over all series <= 2 s.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
from polars.testing import assert_frame_equal

from bench.timing import median_time, time_pairs
from tracewh.api import Warehouse
from tracewh.schema.arrow import GPU_OPS, RUNS, STEPS
from tracewh.synth import SynthConfig, write_trace

BENCH = Path("data/bench")
N_RUNS = 365
REG_NIGHTS = 3
REPEAT = 21  # interleaved pairs per query (an odd count: the medians are samples)
START = dt.date(2024, 1, 1)

_COPY_OPS = """
SELECT * REPLACE (
    $run AS run_id, $ing AS ingest_id, $day AS day,
    ts_ns + $shift AS ts_ns, launch_ts_ns + $shift AS launch_ts_ns, op_ts_ns + $shift AS op_ts_ns,
    CAST(dur_ns * (1 + 0.03 * ((hash(name || $night) % 2001) / 1000.0 - 1))
         * CASE WHEN $reg AND name LIKE '%flash_fwd%' THEN 1.3 ELSE 1 END AS BIGINT) AS dur_ns)
FROM gpu
"""
_COPY_STEPS = """
SELECT * REPLACE ($run AS run_id, $ing AS ingest_id, $day AS day, ts_ns + $shift AS ts_ns)
FROM st
"""

#: metric_history(kernel_pattern := 'flash_fwd') written by hand over the Parquet files.
BARE_HISTORY = """
WITH r AS (SELECT * FROM read_parquet($runs, hive_partitioning = true)),
g AS (SELECT * FROM read_parquet($gpu, hive_partitioning = true)),
s AS (SELECT * FROM read_parquet($steps, hive_partitioning = true)),
sw AS (SELECT run_id, step, max(ts_ns + dur_ns) - min(ts_ns) AS wall FROM s GROUP BY ALL),
sr AS (SELECT run_id, count(*) AS n, avg(wall) AS step_ns FROM sw GROUP BY run_id),
d AS (
    SELECT run_id, device, ts_ns, ts_ns + dur_ns AS e,
           max(ts_ns + dur_ns) OVER (PARTITION BY run_id, device ORDER BY ts_ns, event_index
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev
    FROM g WHERE dur_ns > 0
),
idle AS (
    SELECT run_id, sum(w) AS w, sum(i) AS i FROM (
        SELECT run_id, device, max(e) - min(ts_ns) AS w, coalesce(sum(greatest(ts_ns - prev, 0)), 0) AS i
        FROM d GROUP BY run_id, device) GROUP BY run_id
),
m AS (
    SELECT run_id, count(DISTINCT name) AS kernels, count(*) AS calls, sum(dur_ns) AS total
    FROM g WHERE dur_ns IS NOT NULL
      AND (contains(lower(name), 'flash_fwd') OR contains(lower(short_name), 'flash_fwd'))
    GROUP BY run_id
)
SELECT r.day, r.start_ns, r.run_id, r.job, r.rank, r.labels_json, coalesce(sr.n, 0) AS n_steps,
       coalesce(sr.step_ns, r.end_ns - r.start_ns) AS step_ns,
       idle.i / nullif(idle.w, 0) AS gpu_idle_fraction,
       coalesce(m.kernels, 0) AS kernels, coalesce(m.calls, 0) AS calls,
       coalesce(m.calls, 0) / greatest(coalesce(sr.n, 0), 1) AS calls_per_step,
       coalesce(m.total, 0) / greatest(coalesce(sr.n, 0), 1) AS time_per_step_ns,
       m.total / m.calls AS mean_ns
FROM r LEFT JOIN sr USING (run_id) LEFT JOIN idle USING (run_id) LEFT JOIN m USING (run_id)
ORDER BY r.start_ns, r.rank, r.run_id
"""

def _build(root: Path) -> None:
    """The 365-night warehouse (cached: ``root/BUILT`` marks it done)."""
    if (root / "BUILT").exists():
        return
    src_root = BENCH / "history_source_wh"
    src = Warehouse(src_root)
    if not (src_root / "tables").exists():
        trace = BENCH / "history_source.pt.trace.json.gz"
        BENCH.mkdir(parents=True, exist_ok=True)
        write_trace(trace, SynthConfig(steps=4, layers=4, seed=21))
        report = src.ingest([trace])
        assert report.ok, report.to_dict()
    base = src.resolve_run("latest")
    con = duckdb.connect()
    con.register("gpu", src.scan("gpu_ops").collect().to_arrow())
    con.register("st", src.scan("steps").collect().to_arrow())
    run_row = src.sql("SELECT * FROM runs").to_dicts()[0]
    wh = Warehouse(root)
    wh.store.create()
    ops: list[pa.Table] = []
    steps: list[pa.Table] = []
    runs: list[dict[str, object]] = []
    for i in range(N_RUNS):
        day = START + dt.timedelta(days=i)
        run_id, ingest_id = f"h{i:015x}", uuid.uuid4().hex
        shift = (day - base.day).days * 86_400 * 10**9
        params = {"run": run_id, "ing": ingest_id, "day": day, "shift": shift}
        ops.append(con.sql(_COPY_OPS, params={
            **params, "night": str(i), "reg": i >= N_RUNS - REG_NIGHTS}).to_arrow_table())  # fmt: skip
        steps.append(con.sql(_COPY_STEPS, params=params).to_arrow_table())
        labels = {"model": "bench", "branch": "main", "night": day.isoformat()}
        runs.append({**run_row, "run_id": run_id, "ingest_id": ingest_id, "day": day,
                     "start_ns": run_row["start_ns"] + shift, "end_ns": run_row["end_ns"] + shift,
                     "job": f"/bench/{day}", "labels_json": json.dumps(labels),
                     "source_path": f"/bench/{day}/rank-0.json.gz", "sha256": run_id,
                     "rows_json": json.dumps({"gpu_ops": ops[-1].num_rows,
                                              "steps": steps[-1].num_rows})})  # fmt: skip
    wh.store.append("gpu_ops", lambda: pa.concat_tables(ops).cast(GPU_OPS))
    wh.store.append("steps", lambda: pa.concat_tables(steps).cast(STEPS))
    wh.store.append("runs", lambda: pa.Table.from_pylist(runs, schema=RUNS))
    (root / "BUILT").write_text("ok\n")


def _stored(root: Path) -> Path:
    """A copy of ``root`` with every run's ``run_series`` rows stored (``Warehouse.migrate``),
    as an ingest by this version leaves a warehouse (cached: ``BUILT`` marks it done)."""
    out = root.with_name(root.name + "_series")
    if (out / "BUILT").exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(root, out, ignore=shutil.ignore_patterns("BUILT", "_locks", "_staging"))
    report = Warehouse(out).migrate()
    assert report.series_runs == N_RUNS, report.to_dict()
    (out / "BUILT").write_text("ok\n")
    return out


def _time(fn: Callable[[], object]) -> float:
    """Median seconds of ``REPEAT`` calls of ``fn``."""
    return median_time(fn, REPEAT)


def _time_pairs(
    ours: Callable[[], object], theirs: Callable[[], object]
) -> tuple[float, float, float]:
    """``REPEAT`` interleaved pairs (see :func:`bench.timing.time_pairs`)."""
    return time_pairs(ours, theirs, REPEAT)


def main() -> None:
    root = BENCH / f"history_wh_{N_RUNS}"
    t0 = time.perf_counter()
    _build(root)
    print(f"{N_RUNS}-night warehouse ready in {time.perf_counter() - t0:.1f} s", flush=True)
    wh = Warehouse(root)
    n_ops = wh.sql("SELECT count(*) AS n FROM gpu_ops")["n"][0]
    print(f"{N_RUNS} runs, {n_ops:,} GPU ops")
    globs = {t: str(root / "tables" / t / "day=*" / "*.parquet") for t in ("gpu_ops", "steps")}
    globs["runs"] = str(root / "tables" / "runs" / "**" / "*.parquet")

    def bare(query: str) -> Callable[[], object]:
        def run() -> object:
            con = duckdb.connect()
            try:
                return con.sql(query, params={"runs": globs["runs"], "gpu": globs["gpu_ops"],
                                              "steps": globs["steps"]}).fetchall()  # fmt: skip
            finally:
                con.close()

        return run

    h = wh.history(kernel="flash_fwd")
    bare_h = pl.DataFrame(bare(BARE_HISTORY)(), schema=h.columns, orient="row")
    assert h.height == N_RUNS
    assert_frame_equal(h, bare_h, check_dtypes=False)  # the same rows, columns and values
    report = wh.check()
    first_reg = START + dt.timedelta(days=N_RUNS - REG_NIGHTS)
    found = sorted((f.metric_kind, f.short_name or f.metric, f.since_day) for f in report.regressions)
    # the build injected flash_fwd +30% over the last REG_NIGHTS nights, nothing else
    assert found == [("category", "attention", first_reg),
                     ("kernel", "flash_fwd_kernel", first_reg)], found  # fmt: skip
    print(f"check of the latest night finds {found}")
    ch = wh.changes(since=None)
    print(f"changes over all {ch.series} series find {len(ch.changes)} change(s): "
          f"{sorted({(d['metric'], d['day']) for d in ch.to_dicts()})}")

    def connect_only() -> object:
        return wh.sql("SELECT 1", days=set())

    stored = Warehouse(_stored(root))
    assert_frame_equal(stored.history(kernel="flash_fwd"), h)  # the stored series: same rows
    rows = []
    # check and changes run change-point detection, which no single bare query does: they
    # are timed against the bare history query (the same scan of gpu_ops), as a reference.
    # "stored": the same warehouse with its runs' series stored (as this version's ingest
    # leaves them), read instead of computed from gpu_ops and steps
    for label, ours, theirs in (
        ("history(kernel)", lambda: wh.history(kernel="flash_fwd"), bare(BARE_HISTORY)),
        ("check(latest)", lambda: wh.check(), bare(BARE_HISTORY)),
        ("changes(all)", lambda: wh.changes(since=None), bare(BARE_HISTORY)),
        ("  stored history", lambda: stored.history(kernel="flash_fwd"), bare(BARE_HISTORY)),
        ("  stored check", lambda: stored.check(), bare(BARE_HISTORY)),
        ("  stored changes", lambda: stored.changes(since=None), bare(BARE_HISTORY)),
    ):
        t_ours, t_bare, pair_ratio = _time_pairs(ours, theirs)
        rows.append((label, t_ours, t_bare, t_ours / t_bare, pair_ratio))
    t_conn = _time(connect_only)
    print(f"{REPEAT} interleaved pairs per query (alternating which runs first); ratio: median "
          "tracewh s / median bare s, pair ratio: median of the per-pair ratios")  # fmt: skip
    print(f"{'query':16} {'tracewh s':>10} {'bare s':>8} {'ratio':>6} {'pair ratio':>10}")
    for label, t_ours, t_bare, ratio, pair_ratio in rows:
        print(f"{label:16} {t_ours:10.3f} {t_bare:8.3f} {ratio:6.2f} {pair_ratio:10.2f}")
    print(f"fixed cost of one tracewh connection (runs only, every sql/ view): {t_conn:.3f} s")
    print("targets: history ratio <= 1.5 (tracewh vs bare DuckDB), well under 1 s; check well "
          "under 1 s; changes over all series <= 2 s")


if __name__ == "__main__":
    main()
