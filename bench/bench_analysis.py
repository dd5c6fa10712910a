"""Per-run analysis cost: tracewh vs one bare DuckDB query, 10 runs vs 365 runs.

Builds (once, cached under ``data/bench/``) two warehouses of nightly runs from
one ingested synthetic trace: its ``gpu_ops`` rows are copied into 365 (and 10)
runs, one Delta commit per night in its own ``day`` partition, as nightly
ingests would leave them. Then, side by side in one process:

* ``Warehouse.kernels`` / ``Warehouse.gaps`` (end to end: Delta log, run
  resolution, DuckDB views) vs the same aggregation as one bare DuckDB query
  over the same Parquet files (``read_parquet(glob, hive_partitioning=true)``),
  which returns the same columns and values (asserted before timing), timed in
  interleaved rounds (:func:`bench.timing.time_pairs`);
* the same tracewh call on the 10-run and on the 365-run warehouse.

Targets (issue 4): tracewh ≤ 1.3x the bare query; 365 runs ≤ 2x 10 runs.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import duckdb
import pyarrow as pa
from polars.testing import assert_frame_equal

from bench.timing import median_time, time_pairs
from tracewh.api import Warehouse
from tracewh.schema.arrow import GPU_OPS, RUNS
from tracewh.synth import SynthConfig, write_trace

BENCH = Path("data/bench")
N_BIG = 365
N_SMALL = 10
REPEAT = 21  # interleaved rounds per query (odd: the medians are samples)

BARE_RANKING = """
SELECT name, count(*) AS calls, sum(dur_ns) AS total_ns, avg(dur_ns) AS mean_ns,
       min(dur_ns) AS min_ns, quantile_cont(dur_ns, 0.5) AS median_ns,
       quantile_cont(dur_ns, 0.95) AS p95_ns, max(dur_ns) AS max_ns, stddev_samp(dur_ns) AS std_ns,
       100.0 * sum(dur_ns) / sum(sum(dur_ns)) OVER () AS pct
FROM read_parquet(?, hive_partitioning = true)
WHERE run_id = ? AND dur_ns IS NOT NULL
GROUP BY name ORDER BY total_ns DESC, name
"""

#: stream_gaps(run) written by hand over the Parquet files (the same columns and values).
BARE_GAPS = """
WITH o AS (
    SELECT device, stream, ts_ns, ts_ns + dur_ns AS end_ns, launch_ts_ns,
           max(ts_ns + dur_ns) OVER (PARTITION BY device, stream ORDER BY ts_ns, event_index
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end_ns
    FROM read_parquet(?, hive_partitioning = true)
    WHERE run_id = ? AND dur_ns IS NOT NULL AND ts_ns IS NOT NULL
),
k AS (
    SELECT *, greatest(ts_ns - prev_end_ns, 0) AS gap,
           CASE WHEN greatest(ts_ns - prev_end_ns, 0) > 0 THEN
               CASE WHEN launch_ts_ns > prev_end_ns THEN 'h'
                    WHEN ts_ns - prev_end_ns < 30000 THEN 'k' ELSE 'o' END END AS kind
    FROM o
),
s AS (
    SELECT device, stream, count(*) AS ops, max(end_ns) - min(ts_ns) AS window_ns,
           CAST(coalesce(sum(gap), 0) AS BIGINT) AS gap_ns,
           quantile_cont(gap, 0.5) FILTER (WHERE kind IS NOT NULL) AS p50_gap_ns,
           quantile_cont(gap, 0.95) FILTER (WHERE kind IS NOT NULL) AS p95_gap_ns,
           max(gap) FILTER (WHERE kind IS NOT NULL) AS max_gap_ns,
           CAST(coalesce(sum(gap) FILTER (WHERE kind = 'h'), 0) AS BIGINT) AS host_wait_ns,
           CAST(coalesce(sum(gap) FILTER (WHERE kind = 'k'), 0) AS BIGINT) AS kernel_wait_ns,
           CAST(coalesce(sum(gap) FILTER (WHERE kind = 'o'), 0) AS BIGINT) AS other_wait_ns
    FROM k GROUP BY device, stream
)
SELECT device, stream, ops, window_ns - gap_ns AS busy_ns, window_ns, gap_ns,
       CASE WHEN window_ns > 0 THEN gap_ns / window_ns END AS idle_fraction,
       p50_gap_ns, p95_gap_ns, max_gap_ns, host_wait_ns, kernel_wait_ns, other_wait_ns
FROM s ORDER BY device, stream
"""


def _source_trace() -> Path:
    path = BENCH / "analysis_source.pt.trace.json.gz"
    if not path.exists():
        BENCH.mkdir(parents=True, exist_ok=True)
        write_trace(path, SynthConfig(steps=200, layers=8, seed=11))
    return path


def _build(root: Path, n_runs: int) -> list[str]:
    """A warehouse of ``n_runs`` nightly copies of one run; returns their run_ids."""
    wh = Warehouse(root)
    marker = root / "BUILT"
    if marker.exists():
        return marker.read_text().split()
    src = Warehouse(BENCH / "analysis_source_wh")
    if not (BENCH / "analysis_source_wh" / "tables").exists():
        report = src.ingest([_source_trace()])
        assert report.ok, report.to_dict()
    base = src.resolve_run("latest")
    gpu = src.scan("gpu_ops").collect().to_arrow()
    run_row = src.sql("SELECT * FROM runs").to_arrow()
    wh.store.create()
    con = duckdb.connect()
    con.register("gpu", gpu)
    run_ids: list[str] = []
    runs: list[pa.Table] = []
    start = dt.date(2024, 1, 1)
    for i in range(n_runs):
        run_id = f"b{i:015x}"
        ingest_id = uuid.uuid4().hex
        day = start + dt.timedelta(days=i)
        shift = (day - base.day).days * 86_400 * 10**9
        rel = con.sql(
            "SELECT * REPLACE ($run AS run_id, $ing AS ingest_id, $day AS day, "
            "ts_ns + $shift AS ts_ns, launch_ts_ns + $shift AS launch_ts_ns, "
            "op_ts_ns + $shift AS op_ts_ns, "
            "CAST(dur_ns * (1 + 0.02 * sin(event_index + $i)) AS BIGINT) AS dur_ns) FROM gpu",
            params={"run": run_id, "ing": ingest_id, "day": day, "shift": shift, "i": i},
        )
        table = rel.to_arrow_table()
        wh.store.append("gpu_ops", lambda t=table: t.cast(GPU_OPS))
        row = run_row.to_pylist()[0]
        row.update(run_id=run_id, ingest_id=ingest_id, day=day,
                   rows_json=json.dumps({"gpu_ops": table.num_rows}),
                   source_path=f"/bench/{run_id}", sha256=run_id)
        runs.append(pa.Table.from_pylist([row], schema=RUNS))
        run_ids.append(run_id)
    wh.store.append("runs", lambda: pa.concat_tables(runs))
    marker.write_text("\n".join(run_ids))
    return run_ids


def main() -> None:
    t0 = time.perf_counter()
    big_ids = _build(BENCH / f"analysis_wh_{N_BIG}", N_BIG)
    small_ids = _build(BENCH / f"analysis_wh_{N_SMALL}", N_SMALL)
    print(f"warehouses ready in {time.perf_counter() - t0:.1f} s", flush=True)
    big = Warehouse(BENCH / f"analysis_wh_{N_BIG}")
    small = Warehouse(BENCH / f"analysis_wh_{N_SMALL}")
    n_ops = big.sql("SELECT count(*) AS n FROM gpu_ops")["n"][0]
    print(f"{N_BIG}-run warehouse: {n_ops:,} GPU ops")
    glob = str(big.root / "tables" / "gpu_ops" / "day=*" / "*.parquet")
    target = big_ids[N_BIG // 2]
    small_target = small_ids[N_SMALL // 2]

    def bare(query: str) -> Callable[[], object]:
        def run() -> object:
            con = duckdb.connect()
            try:
                return con.sql(query, params=[glob, target]).fetchall()
            finally:
                con.close()
        return run

    # each bare query returns what tracewh returns (checked before timing)
    con = duckdb.connect()
    try:
        bare_ranking = con.sql(BARE_RANKING, params=[glob, target]).pl()
        bare_gaps = con.sql(BARE_GAPS, params=[glob, target]).pl()
    finally:
        con.close()
    assert_frame_equal(big.kernels(target), bare_ranking, check_dtypes=False)
    assert_frame_equal(big.gaps(target), bare_gaps, check_dtypes=False)

    rows = []
    for label, ours, theirs, ours_small in (
        ("kernel ranking", lambda: big.kernels(target), bare(BARE_RANKING),
         lambda: small.kernels(small_target)),
        ("stream gaps", lambda: big.gaps(target), bare(BARE_GAPS),
         lambda: small.gaps(small_target)),
    ):
        t_ours, t_bare, pair = time_pairs(ours, theirs, REPEAT)
        t_small = median_time(ours_small, REPEAT)
        rows.append((label, t_ours, t_bare, t_ours / t_bare, pair, t_small, t_ours / t_small))
    print(f"{REPEAT} interleaved rounds per query (alternating which runs first); ratio: median "
          "tracewh s / median bare s, pair ratio: median of the per-round ratios")
    print(f"{'query':16} {'tracewh s':>10} {'bare s':>8} {'ratio':>6} {'pair ratio':>10} "
          f"{'10-run s':>9} {'365/10':>7}")
    for label, t_ours, t_bare, ratio, pair, t_small, scale in rows:
        print(f"{label:16} {t_ours:10.3f} {t_bare:8.3f} {ratio:6.2f} {pair:10.2f} "
              f"{t_small:9.3f} {scale:7.2f}")
    print("targets: ratio <= 1.3 (tracewh vs bare DuckDB), 365/10 <= 2.0")


if __name__ == "__main__":
    main()
