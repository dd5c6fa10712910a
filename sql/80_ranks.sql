-- 80_ranks.sql: the ranks of one job (runs.job) side by side.
--
-- rank_kernels(job_name)  (table macro)
--   grain: one row per (GPU op name, run) over the runs whose runs.job = job_name.
--   columns: name, rank (runs.rank), run_id, calls, total_ns, mean_ns
--
-- rank_imbalance(job_name)  (table macro)
--   grain: one row per GPU op name seen in the job.
--   columns: name, ranks (runs with the name), total_ns (all ranks), mean_rank_total_ns,
--            median_rank_total_ns, max_rank_total_ns, min_rank_total_ns (per-rank totals),
--            imbalance (max_rank_total_ns / median_rank_total_ns), slowest_rank (rank with the
--            largest total)
--
-- rank_stragglers(job_name, slow_factor := 1.3)  (table macro)
--   grain: one row per (step N, run) of the job.
--   columns: step, rank, run_id, gpu_ns (summed duration of the run's GPU ops launched in step
--            N, gpu_ops.step), median_gpu_ns (median of gpu_ns over the job's runs for that
--            step), ratio (gpu_ns / median_gpu_ns), wall_ns (the run's ProfilerStep#N length),
--            straggler (ratio >= slow_factor: ops at least 30% slower than the median, by
--            default)

CREATE OR REPLACE MACRO rank_kernels(job_name) AS TABLE
SELECT
    g.name, r.rank, g.run_id,
    count(*) AS calls,
    CAST(sum(g.dur_ns) AS BIGINT) AS total_ns,
    avg(g.dur_ns) AS mean_ns
FROM gpu_ops g
JOIN runs r ON r.run_id = g.run_id AND r.ingest_id = g.ingest_id
WHERE r.job = job_name AND g.dur_ns IS NOT NULL
GROUP BY g.name, r.rank, g.run_id
ORDER BY g.name, r.rank, g.run_id;

CREATE OR REPLACE MACRO rank_imbalance(job_name) AS TABLE
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
FROM rank_kernels(job_name)
GROUP BY name
ORDER BY imbalance DESC NULLS LAST, name;

CREATE OR REPLACE MACRO rank_stragglers(job_name, slow_factor := 1.3) AS TABLE
WITH jr AS (
    SELECT run_id, ingest_id, rank FROM runs WHERE job = job_name
),
per AS (
    SELECT g.step, jr.rank, g.run_id, CAST(sum(g.dur_ns) AS BIGINT) AS gpu_ns
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
m AS (
    SELECT *, quantile_cont(gpu_ns, 0.5) OVER (PARTITION BY step) AS median_gpu_ns
    FROM per
)
SELECT
    m.step, m.rank, m.run_id, m.gpu_ns, m.median_gpu_ns,
    m.gpu_ns / nullif(m.median_gpu_ns, 0) AS ratio,
    wall.wall_ns,
    coalesce(m.gpu_ns / nullif(m.median_gpu_ns, 0) >= slow_factor, false) AS straggler
FROM m
LEFT JOIN wall ON wall.run_id = m.run_id AND wall.step = m.step
ORDER BY m.step, m.rank, m.run_id;
