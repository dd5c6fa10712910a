-- 94_op_series.sql: achieved TFLOP/s per CPU operator as change-point series (changes/check
-- with --op).
--
-- op_series_values(run_list, op_pattern := NULL, min_ms := 0.1)  (table macro)
--   grain: one row per (run, key) of the runs in `run_list` (VARCHAR[]): the modelled
--          operators (roofline_runs rows with flops, sql/78_roofline.sql) whose name matches
--          `op_pattern` (tw_op_matches: glob with * ? [, else substring, any case; NULL: every
--          operator) and whose GPU time reaches `min_ms` ms per step (run_steps.step_divisor).
--   columns: run_id, metric ('op_tflops'), key (op_name, Input Dims, dtype and params joined
--            by ' ': one operator call shape), name (op_name), short_name (params), category
--            (the perf-model family), value (achieved TFLOP/s of those calls: sum of flops x
--            calls / sum of gpu_ns / 1e3 over the key's roofline rows), step_sd (NULL: the
--            per-step spread of a rate is not computed; the change-point test uses the
--            runs' spread), n_steps
--   The same columns as series_values (93_changes.sql), so tracewh.history.alerts/check treat the
--   rows as one more metric; unlike every other metric, higher is better: a drop is the
--   regression. Not part of series_values: computing it costs the roofline of every run
--   (the perf model's query planning, the attribution over every cpu_op), so `changes` and
--   `check` add it only when asked (--op).

CREATE OR REPLACE MACRO op_series_values(run_list, op_pattern := NULL, min_ms := 0.1) AS TABLE
WITH r AS (
    SELECT
        run_id, op_name, family,
        concat_ws(' ', op_name, coalesce(input_dims, '[]'), dtype, params) AS key,
        params, flops * calls AS work, gpu_ns
    FROM roofline_runs(CAST(run_list AS VARCHAR[]))
    WHERE flops IS NOT NULL AND gpu_ns > 0 AND tw_op_matches(op_name, op_pattern)
),
k AS (
    SELECT run_id, key, any_value(op_name) AS name, any_value(params) AS short_name,
           any_value(family) AS category, sum(work) AS work, sum(gpu_ns) AS gpu_ns
    FROM r
    GROUP BY run_id, key
)
SELECT
    k.run_id, 'op_tflops' AS metric, k.key, k.name, k.short_name, k.category,
    k.work / k.gpu_ns / 1e3 AS value,
    CAST(NULL AS DOUBLE) AS step_sd,
    s.n_steps
FROM k
JOIN run_steps s ON s.run_id = k.run_id
WHERE k.gpu_ns / s.step_divisor >= CAST(min_ms AS DOUBLE) * 1e6;
