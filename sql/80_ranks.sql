-- 80_ranks.sql: the ranks of one job instance side by side.
--
-- A job instance is a list of runs (run_list): the traces of one distributed job, distinct
-- ranks of one workload (tracewh.history.workload picks them; unrelated traces that share a
-- folder are not ranks of one job).
--
-- rank_kernels(run_list)  (table macro)
--   grain: one row per (GPU op name, run) over the runs of run_list.
--   columns: name, rank (runs.rank), run_id, calls, total_ns, mean_ns
--
-- rank_imbalance(run_list)  (table macro)
--   grain: one row per GPU op name seen in the runs.
--   columns: name, ranks (runs with the name), total_ns (all ranks), mean_rank_total_ns,
--            median_rank_total_ns, max_rank_total_ns, min_rank_total_ns (per-rank totals),
--            imbalance (max_rank_total_ns / median_rank_total_ns), slowest_rank (rank with the
--            largest total)
--
-- rank_stragglers(run_list, k_mad := 3.0, floor_fraction := 0.02)  (table macro)
--   grain: one row per (step N, run) of the runs.
--   columns: step, rank, run_id, gpu_ns (summed duration of the run's GPU ops launched in step
--            N, gpu_ops.step), median_gpu_ns (median of gpu_ns over the runs for that step),
--            compute_ns (gpu_ns without communication kernels: the fast ranks' wait for a
--            straggler lands in their collectives, so their summed GPU time matches its),
--            peers (the other runs with step N), peer_median_ns, peer_mad_ns (median and median
--            absolute deviation of the other runs' compute_ns for that step), ratio
--            (compute_ns / peer_median_ns), bound_ns, wall_ns (the run's ProfilerStep#N
--            length), straggler, collectives, late, late_share, wait_ns, caused_wait_ns,
--            late_straggler
--   straggler: compute_ns - peer_median_ns > bound_ns = greatest(k_mad * 1.4826 * peer_mad_ns,
--   floor_fraction * peer_median_ns): the rank stands above its peers by more than their own
--   spread (1.4826 x MAD estimates a standard deviation robustly; 3 of them by default) and
--   by more than a small floor (2% by default); false without peers.
--   The arrival view (collective_arrival of 79_collectives.sql, collectives matched across the
--   ranks by process group and sequence; NULL/0 in a step without matched collectives):
--   collectives (matched collectives of the step the rank took part in), late (those it
--   arrived at last, with skew), late_share (late / collectives), wait_ns (its own waiting
--   for the last rank), caused_wait_ns (the others' waiting in the collectives it was late
--   to), late_straggler (late in most collectives of the step: late > collectives / 2, the
--   step having at least 2 collectives with skew).

CREATE OR REPLACE MACRO rank_kernels(run_list) AS TABLE
SELECT
    g.name, r.rank, g.run_id,
    count(*) AS calls,
    CAST(sum(g.dur_ns) AS BIGINT) AS total_ns,
    avg(g.dur_ns) AS mean_ns
FROM gpu_ops g
JOIN runs r ON r.run_id = g.run_id AND r.ingest_id = g.ingest_id
WHERE list_contains(CAST(run_list AS VARCHAR[]), r.run_id) AND g.dur_ns IS NOT NULL
GROUP BY g.name, r.rank, g.run_id
ORDER BY g.name, r.rank, g.run_id;

CREATE OR REPLACE MACRO rank_imbalance(run_list) AS TABLE
SELECT
    name,
    count(*) AS ranks,
    CAST(sum(total_ns) AS BIGINT) AS total_ns,
    avg(total_ns) AS mean_rank_total_ns,
    quantile_cont(total_ns, 0.5) AS median_rank_total_ns,
    max(total_ns) AS max_rank_total_ns,
    min(total_ns) AS min_rank_total_ns,
    max(total_ns) / nullif(quantile_cont(total_ns, 0.5), 0) AS imbalance,
    arg_max(rank, total_ns) AS slowest_rank
FROM rank_kernels(run_list)
GROUP BY name
ORDER BY imbalance DESC NULLS LAST, name;

CREATE OR REPLACE MACRO rank_stragglers(run_list, k_mad := 3.0, floor_fraction := 0.02) AS TABLE
WITH jr AS (
    SELECT run_id, ingest_id, rank FROM runs
    WHERE list_contains(CAST(run_list AS VARCHAR[]), run_id)
),
per AS (
    SELECT g.step, jr.rank, g.run_id, CAST(sum(g.dur_ns) AS BIGINT) AS gpu_ns,
           CAST(coalesce(sum(g.dur_ns) FILTER (
               WHERE g.category IS DISTINCT FROM 'communication'), 0) AS BIGINT) AS compute_ns
    FROM gpu_ops g
    JOIN jr ON jr.run_id = g.run_id AND jr.ingest_id = g.ingest_id
    WHERE g.step IS NOT NULL AND g.dur_ns IS NOT NULL
    GROUP BY g.step, jr.rank, g.run_id
),
wall AS (
    SELECT s.run_id, s.step, max(s.ts_ns + s.dur_ns) - min(s.ts_ns) AS wall_ns
    FROM steps s
    JOIN jr ON jr.run_id = s.run_id AND jr.ingest_id = s.ingest_id
    GROUP BY s.run_id, s.step
),
pm AS (  -- each run's peers: the other runs of the same step
    SELECT a.step, a.run_id, count(b.run_id) AS peers,
           quantile_cont(b.compute_ns, 0.5) AS peer_median_ns
    FROM per a
    LEFT JOIN per b ON b.step = a.step AND b.run_id <> a.run_id
    GROUP BY a.step, a.run_id
),
pmad AS (
    SELECT a.step, a.run_id, quantile_cont(abs(b.compute_ns - pm.peer_median_ns), 0.5) AS peer_mad_ns
    FROM per a
    JOIN pm ON pm.step = a.step AND pm.run_id = a.run_id
    JOIN per b ON b.step = a.step AND b.run_id <> a.run_id
    GROUP BY a.step, a.run_id
),
m AS (
    SELECT per.*, quantile_cont(per.gpu_ns, 0.5) OVER (PARTITION BY per.step) AS median_gpu_ns,
           pm.peers, pm.peer_median_ns, pmad.peer_mad_ns,
           greatest(k_mad * 1.4826 * coalesce(pmad.peer_mad_ns, 0),
                    floor_fraction * pm.peer_median_ns) AS bound_ns
    FROM per
    JOIN pm ON pm.step = per.step AND pm.run_id = per.run_id
    LEFT JOIN pmad ON pmad.step = per.step AND pmad.run_id = per.run_id
)
SELECT
    m.step, m.rank, m.run_id, m.gpu_ns, m.median_gpu_ns, m.compute_ns, m.peers,
    m.peer_median_ns, m.peer_mad_ns, m.compute_ns / nullif(m.peer_median_ns, 0) AS ratio,
    m.bound_ns, wall.wall_ns,
    coalesce(m.peers > 0 AND m.compute_ns - m.peer_median_ns > m.bound_ns, false) AS straggler,
    coalesce(a.collectives, 0) AS collectives, coalesce(a.late, 0) AS late, a.late_share,
    coalesce(a.wait_ns, 0) AS wait_ns, coalesce(a.caused_wait_ns, 0) AS caused_wait_ns,
    coalesce(a.late_straggler, false) AS late_straggler
FROM m
LEFT JOIN wall ON wall.run_id = m.run_id AND wall.step = m.step
LEFT JOIN collective_arrival(run_list) a ON a.run_id = m.run_id AND a.step = m.step
ORDER BY m.step, m.rank, m.run_id;
