-- 10_kernels.sql: kernel ranking.
--
-- kernel_ranking(run, cats := NULL, group_by := 'name', order_by := 'total')  (table macro)
--   grain: one row per group (name | short_name | category, as group_by says) of the GPU ops
--          of run `run` whose cat is in the list `cats` (NULL: all GPU ops) and that have a
--          duration.
--   columns: name (the group's value), calls, total_ns, mean_ns, min_ns, median_ns, p95_ns,
--            max_ns, std_ns, pct
--   Sorted by order_by (total | mean | max | calls) descending, then name. With
--   cats := ['kernel', 'gpu_memcpy'] this is the classic aggregation: durations of the events
--   of those categories summed and counted per name, sorted by total descending.
--
-- kernel_stats  (view, warehouse-wide)
--   grain: one row per (run_id, name) of GPU ops with a duration.
--   columns: run_id, name, short_name, category, op_kind, calls, total_ns, mean_ns, min_ns,
--            median_ns, p95_ns, max_ns, std_ns, pct (of the run's GPU op time)
--
-- Definitions: total_ns = sum of dur_ns; mean_ns = total_ns / calls; median_ns and p95_ns are
-- continuous quantiles (linear interpolation between the closest ranks); std_ns is the sample
-- standard deviation (NULL for one call); pct = 100 * total_ns / (sum of total_ns over all rows
-- of the result), i.e. the share of the GPU time listed.

CREATE OR REPLACE MACRO kernel_ranking(run, cats := NULL, group_by := 'name', order_by := 'total') AS TABLE
WITH ops AS (
    SELECT
        CASE group_by
            WHEN 'name' THEN name
            WHEN 'short_name' THEN short_name
            WHEN 'category' THEN category
            ELSE error('kernel_ranking: group_by must be name, short_name or category, not ' || group_by)
        END AS name,
        dur_ns
    FROM gpu_ops
    WHERE run_id = run
      AND dur_ns IS NOT NULL
      AND (cats IS NULL OR list_contains(CAST(cats AS VARCHAR[]), cat))
),
agg AS (
    SELECT
        name,
        count(*) AS calls,
        CAST(sum(dur_ns) AS BIGINT) AS total_ns,
        avg(dur_ns) AS mean_ns,
        min(dur_ns) AS min_ns,
        quantile_cont(dur_ns, 0.5) AS median_ns,
        quantile_cont(dur_ns, 0.95) AS p95_ns,
        max(dur_ns) AS max_ns,
        stddev_samp(dur_ns) AS std_ns
    FROM ops
    GROUP BY name
)
SELECT *, 100.0 * total_ns / sum(total_ns) OVER () AS pct
FROM agg
ORDER BY
    CASE order_by
        WHEN 'total' THEN CAST(total_ns AS DOUBLE)
        WHEN 'mean' THEN mean_ns
        WHEN 'max' THEN CAST(max_ns AS DOUBLE)
        WHEN 'calls' THEN CAST(calls AS DOUBLE)
        ELSE error('kernel_ranking: order_by must be total, mean, max or calls, not ' || order_by)
    END DESC,
    name;

CREATE OR REPLACE VIEW kernel_stats AS
WITH agg AS (
    SELECT
        run_id,
        name,
        any_value(short_name) AS short_name,
        any_value(category) AS category,
        any_value(op_kind) AS op_kind,
        count(*) AS calls,
        CAST(sum(dur_ns) AS BIGINT) AS total_ns,
        avg(dur_ns) AS mean_ns,
        min(dur_ns) AS min_ns,
        quantile_cont(dur_ns, 0.5) AS median_ns,
        quantile_cont(dur_ns, 0.95) AS p95_ns,
        max(dur_ns) AS max_ns,
        stddev_samp(dur_ns) AS std_ns
    FROM gpu_ops
    WHERE dur_ns IS NOT NULL
    GROUP BY run_id, name
)
SELECT *, 100.0 * total_ns / sum(total_ns) OVER (PARTITION BY run_id) AS pct
FROM agg;
