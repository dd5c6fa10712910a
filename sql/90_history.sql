-- 90_history.sql: per-run metrics normalised per step, history series. (Which runs are
-- comparable is tracewh.history.workload: labels, else the trace's fingerprint.)
--
-- Normalisation: a run's *step divisor* is its number of ProfilerStep#N (distinct N in
-- `steps`), or 1 when the trace has no steps; every "per step" value below is a run total
-- divided by it, so runs with different step counts compare fairly (a trace without steps
-- compares per run).
--
-- run_steps  (view)
--   grain: one row per visible run.
--   columns: run_id, n_steps (distinct ProfilerStep#N; 0 without steps), step_divisor
--            (greatest(n_steps, 1)), step_ns (mean step wall time: a step's window is [first
--            start, last end] of its ProfilerStep#N spans, as in step_summary; without steps
--            the run's end_ns - start_ns), step_sd_ns (sample standard deviation of the step
--            wall times; NULL with fewer than 2 steps)
--
-- run_group_metrics  (view)
--   grain: one row per (run_id, group_level, group_name) where group_level is 'kernel' (GPU op
--          name), 'short_name' or 'category'; GPU ops with a duration.
--   columns: run_id, group_level, group_name, category (kernel level only), calls, total_ns,
--            mean_ns (total_ns / calls), calls_per_step (calls / step_divisor),
--            time_per_step_ns (total_ns / step_divisor)
--
-- run_gpu_summary(kernel_pattern := NULL, category_name := NULL, since := NULL, key_name := NULL)  (table macro)
--   grain: one row per run with GPU ops with a duration (day >= since, a DATE; NULL: all).
--   columns: run_id, gpu_op_ns (summed durations of its GPU ops), devices (devices with an op
--            of positive duration; 0 when none has one, and then the GPU time columns are
--            NULL), gpu_window_ns, gpu_busy_ns, gpu_idle_ns, host_wait_ns, kernel_wait_ns,
--            other_wait_ns (as run_gpu_time), gpu_busy_fraction, gpu_idle_fraction
--            (gpu_busy_ns, gpu_idle_ns / gpu_window_ns), kernels (distinct names of the
--            matched ops; with key_name, the keys matched: 1 when the key ran), calls, total_ns (count and summed durations of the matched ops; 0
--            and NULL when none matched)
--   Matched ops as in metric_history (all ops with a duration when both patterns are NULL).
--   The one definition of a run's GPU time: run_gpu_time, run_metrics and metric_history
--   read it. Every column comes from one scan of gpu_ops, and the pattern is applied before
--   the per-device window, so a history costs one pass over the ops, not one per metric.
--
-- run_gpu_time  (view)
--   grain: one row per run with GPU ops of positive duration (run_gpu_summary, devices > 0).
--   columns: run_id, devices, gpu_window_ns (sum over devices of first op start to last op
--            end), gpu_busy_ns (sum over devices of the union of op intervals; ops with a
--            positive duration, as gpu_time_breakdown), gpu_idle_ns (gpu_window_ns -
--            gpu_busy_ns), host_wait_ns, kernel_wait_ns, other_wait_ns (gpu_idle_ns split by
--            kind: each idle stretch of a device, between the latest end so far and the next
--            op's start, classified by the rule of gap_kinds (kernel_wait_threshold_ns 30000)
--            applied to that next op; they sum to gpu_idle_ns)
--
-- run_metrics  (view)
--   grain: one row per visible run.
--   columns: run_id, day, start_ns, job, rank, device_name, backend, labels_json, n_steps,
--            step_divisor, step_ns, gpu_op_per_step_ns (summed GPU op durations / step_divisor),
--            gpu_busy_per_step_ns, gpu_idle_per_step_ns, host_wait_per_step_ns,
--            kernel_wait_per_step_ns, other_wait_per_step_ns (run_gpu_time / step_divisor),
--            gpu_busy_fraction, gpu_idle_fraction (gpu_busy_ns, gpu_idle_ns / gpu_window_ns;
--            all from run_gpu_summary)
--
-- metric_history(kernel_pattern := NULL, category_name := NULL, since := NULL, key_name := NULL)  (table macro)
--   grain: one row per visible run whose day >= since (a DATE; NULL: all), oldest first.
--   columns: day, start_ns, run_id, job, rank, labels_json, n_steps, step_ns,
--            gpu_idle_fraction, kernels (distinct GPU op names matched; with key_name the
--            kernel keys matched, 1 or 0: one key is one kernel), calls, calls_per_step,
--            time_per_step_ns, mean_ns (of the matched GPU ops; 0 calls when none ran)
--   Matched ops: key_name (a kernel_key of 07_kernel_keys.sql: every op name under that key, so
--   a kernel renamed by recompiles is one series) and kernel_pattern, a pattern on the op name or short_name, case-insensitive, a
--   glob when it holds any of * ? [ and a substring otherwise; category_name an exact category
--   (case-insensitive); both NULL: every GPU op; both set: ops matching both. run_steps for
--   the steps, run_gpu_summary for the idle fraction and the matched ops; for a run with
--   stored series (`run_series`, 92_run_series.sql) the same values from its 'step', 'idle'
--   and 'op' rows (the op rows match as the ops: name or short_name, category, key).
--
-- series_key_names(key_name, since := NULL)  (table macro)
--   grain: one row per GPU op name whose kernel_key (kernel_keys_of, 07_kernel_keys.sql) is
--          key_name, resolved over every op name of the runs of day >= since: the 'op' rows
--          of `run_series` and the gpu_ops names of the runs without them (empty when
--          key_name is NULL). What metric_history and run_gpu_summary match key_name with.
--   columns: name

CREATE OR REPLACE VIEW run_steps AS
WITH w AS (
    SELECT run_id, step, max(ts_ns + dur_ns) - min(ts_ns) AS wall_ns
    FROM steps
    GROUP BY run_id, step
),
s AS (
    SELECT run_id, count(*) AS n_steps, avg(wall_ns) AS mean_wall_ns,
           stddev_samp(wall_ns) AS sd_wall_ns
    FROM w
    GROUP BY run_id
)
SELECT
    r.run_id,
    CAST(coalesce(s.n_steps, 0) AS BIGINT) AS n_steps,
    CAST(greatest(coalesce(s.n_steps, 0), 1) AS BIGINT) AS step_divisor,
    CAST(coalesce(s.mean_wall_ns, r.end_ns - r.start_ns) AS DOUBLE) AS step_ns,
    CAST(s.sd_wall_ns AS DOUBLE) AS step_sd_ns
FROM runs r
LEFT JOIN s ON s.run_id = r.run_id;

CREATE OR REPLACE VIEW run_group_metrics AS
WITH g AS (
    SELECT
        run_id,
        CASE
            WHEN grouping(name) = 0 THEN 'kernel'
            WHEN grouping(short_name) = 0 THEN 'short_name'
            ELSE 'category'
        END AS group_level,
        CASE
            WHEN grouping(name) = 0 THEN name
            WHEN grouping(short_name) = 0 THEN short_name
            ELSE category
        END AS group_name,
        CASE WHEN grouping(name) = 0 THEN any_value(category) END AS category,
        count(*) AS calls,
        CAST(sum(dur_ns) AS BIGINT) AS total_ns
    FROM gpu_ops
    WHERE dur_ns IS NOT NULL
    GROUP BY GROUPING SETS ((run_id, name), (run_id, short_name), (run_id, category))
)
SELECT
    g.run_id, g.group_level, g.group_name, g.category, g.calls, g.total_ns,
    g.total_ns / g.calls AS mean_ns,
    g.calls / s.step_divisor AS calls_per_step,
    g.total_ns / s.step_divisor AS time_per_step_ns
FROM g
JOIN run_steps s ON s.run_id = g.run_id;

CREATE OR REPLACE MACRO series_key_names(key_name, since := NULL) AS TABLE
SELECT k.name
FROM kernel_keys_of((
    SELECT coalesce(list({'run_id': run_id, 'name': name}), [])
    FROM (
        SELECT s.run_id, s.name
        FROM run_series s
        WHERE key_name IS NOT NULL AND s.metric = 'op' AND s.name IS NOT NULL
          AND (CAST(since AS DATE) IS NULL OR s.day >= CAST(since AS DATE))
        UNION
        SELECT DISTINCT run_id, name
        FROM gpu_ops
        WHERE key_name IS NOT NULL AND name IS NOT NULL
          AND (CAST(since AS DATE) IS NULL OR day >= CAST(since AS DATE))
          AND run_id NOT IN (SELECT run_id FROM run_series WHERE metric = 'step')
    )
)) k
WHERE k.kernel_key = key_name;

CREATE OR REPLACE MACRO run_gpu_summary(kernel_pattern := NULL, category_name := NULL, since := NULL, key_name := NULL) AS TABLE
WITH o AS (
    -- one scan of gpu_ops serves every column; the match is evaluated here, on the scanned
    -- (dictionary-encoded) names, before the sort of the window below
    SELECT
        run_id, device, event_index, ts_ns, dur_ns, launch_ts_ns,
        dur_ns > 0 AND ts_ns IS NOT NULL AS timed,
        (kernel_pattern IS NULL OR CASE
            WHEN regexp_matches(kernel_pattern, '[*?\[]')
                THEN lower(name) GLOB lower(kernel_pattern)
                    OR lower(short_name) GLOB lower(kernel_pattern)
            ELSE contains(lower(name), lower(kernel_pattern))
                OR contains(lower(short_name), lower(kernel_pattern))
         END)
        AND (category_name IS NULL OR lower(category) = lower(category_name))
        AND (key_name IS NULL OR name IN (
            SELECT name FROM series_key_names(key_name, since := since))) AS matched,
        name
    FROM gpu_ops
    WHERE dur_ns IS NOT NULL
      AND (CAST(since AS DATE) IS NULL OR day >= CAST(since AS DATE))
),
g AS MATERIALIZED (
    SELECT
        run_id, device, ts_ns, dur_ns, launch_ts_ns, timed, matched,
        CASE WHEN matched THEN name END AS matched_name,
        -- latest end among the earlier ops of the device with a positive duration (the
        -- others end nowhere: their end is NULL here and max() skips it)
        max(CASE WHEN timed THEN ts_ns + dur_ns END) OVER (
            PARTITION BY run_id, device ORDER BY ts_ns, event_index
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS prev_end_ns
    FROM o
),
gaps AS (
    SELECT
        run_id, device, ts_ns, ts_ns + dur_ns AS end_ns,
        greatest(ts_ns - prev_end_ns, 0) AS gap_ns,
        CASE  -- the rule of gap_kinds, kernel_wait_threshold_ns = 30000
            WHEN launch_ts_ns > prev_end_ns THEN 'host_wait'
            WHEN ts_ns - prev_end_ns < 30000 THEN 'kernel_wait'
            ELSE 'other'
        END AS kind
    FROM g
    WHERE timed
),
dev AS (
    SELECT
        run_id, device,
        max(end_ns) - min(ts_ns) AS window_ns,
        coalesce(sum(gap_ns), 0) AS idle_ns,
        coalesce(sum(gap_ns) FILTER (WHERE kind = 'host_wait'), 0) AS host_wait_ns,
        coalesce(sum(gap_ns) FILTER (WHERE kind = 'kernel_wait'), 0) AS kernel_wait_ns,
        coalesce(sum(gap_ns) FILTER (WHERE kind = 'other'), 0) AS other_wait_ns
    FROM gaps
    GROUP BY run_id, device
),
t AS (
    SELECT
        run_id,
        count(*) AS devices,
        CAST(sum(window_ns) AS BIGINT) AS gpu_window_ns,
        CAST(sum(window_ns - idle_ns) AS BIGINT) AS gpu_busy_ns,
        CAST(sum(idle_ns) AS BIGINT) AS gpu_idle_ns,
        CAST(sum(host_wait_ns) AS BIGINT) AS host_wait_ns,
        CAST(sum(kernel_wait_ns) AS BIGINT) AS kernel_wait_ns,
        CAST(sum(other_wait_ns) AS BIGINT) AS other_wait_ns
    FROM dev
    GROUP BY run_id
),
m AS (
    SELECT
        run_id,
        CAST(sum(dur_ns) AS BIGINT) AS gpu_op_ns,
        -- by kernel key the series is one kernel whatever its raw names: the key counts once
        CASE WHEN key_name IS NOT NULL THEN CAST(bool_or(matched) AS BIGINT)
             ELSE count(DISTINCT matched_name) END AS kernels,
        count(*) FILTER (WHERE matched) AS calls,
        CAST(sum(dur_ns) FILTER (WHERE matched) AS BIGINT) AS total_ns
    FROM g
    GROUP BY run_id
)
SELECT
    m.run_id, m.gpu_op_ns,
    coalesce(t.devices, 0) AS devices,
    t.gpu_window_ns, t.gpu_busy_ns, t.gpu_idle_ns,
    t.host_wait_ns, t.kernel_wait_ns, t.other_wait_ns,
    t.gpu_busy_ns / nullif(t.gpu_window_ns, 0) AS gpu_busy_fraction,
    t.gpu_idle_ns / nullif(t.gpu_window_ns, 0) AS gpu_idle_fraction,
    m.kernels, m.calls, m.total_ns
FROM m
LEFT JOIN t ON t.run_id = m.run_id;

CREATE OR REPLACE VIEW run_gpu_time AS
SELECT
    run_id, devices, gpu_window_ns, gpu_busy_ns, gpu_idle_ns,
    host_wait_ns, kernel_wait_ns, other_wait_ns
FROM run_gpu_summary()
WHERE devices > 0;

CREATE OR REPLACE VIEW run_metrics AS
SELECT
    r.run_id, r.day, r.start_ns, r.job, r.rank, r.device_name, r.backend, r.labels_json,
    s.n_steps, s.step_divisor, s.step_ns,
    coalesce(g.gpu_op_ns, 0) / s.step_divisor AS gpu_op_per_step_ns,
    g.gpu_busy_ns / s.step_divisor AS gpu_busy_per_step_ns,
    g.gpu_idle_ns / s.step_divisor AS gpu_idle_per_step_ns,
    g.host_wait_ns / s.step_divisor AS host_wait_per_step_ns,
    g.kernel_wait_ns / s.step_divisor AS kernel_wait_per_step_ns,
    g.other_wait_ns / s.step_divisor AS other_wait_per_step_ns,
    g.gpu_busy_fraction,
    g.gpu_idle_fraction
FROM runs r
JOIN run_steps s ON s.run_id = r.run_id
LEFT JOIN run_gpu_summary() g ON g.run_id = r.run_id;

CREATE OR REPLACE MACRO metric_history(kernel_pattern := NULL, category_name := NULL, since := NULL, key_name := NULL) AS TABLE
WITH st AS (
    SELECT s.run_id, s.metric, s.name, s.value, s.n_steps, s.calls, s.total_ns,
           s.metric = 'op'
           AND (kernel_pattern IS NULL OR CASE
                WHEN regexp_matches(kernel_pattern, '[*?\[]')
                    THEN lower(s.name) GLOB lower(kernel_pattern)
                        OR lower(s.short_name) GLOB lower(kernel_pattern)
                ELSE contains(lower(s.name), lower(kernel_pattern))
                    OR contains(lower(s.short_name), lower(kernel_pattern))
               END)
           AND (category_name IS NULL OR lower(s.category) = lower(category_name))
           AND (key_name IS NULL OR s.name IN (
               SELECT name FROM series_key_names(key_name, since := since))) AS matched
    FROM run_series s
    WHERE s.metric IN ('op', 'step', 'idle')
      AND (CAST(since AS DATE) IS NULL OR s.day >= CAST(since AS DATE))
),
stored AS (
    SELECT run_id,
           any_value(n_steps) FILTER (WHERE metric = 'step') AS n_steps,
           any_value(value) FILTER (WHERE metric = 'step') AS step_ns,
           any_value(value) FILTER (WHERE metric = 'idle') AS gpu_idle_fraction,
           CASE WHEN key_name IS NOT NULL
                THEN CAST(bool_or(matched) FILTER (WHERE metric = 'op') AS BIGINT)
                ELSE count(DISTINCT name) FILTER (WHERE matched) END AS kernels,
           CAST(sum(calls) FILTER (WHERE matched) AS BIGINT) AS calls,
           CAST(sum(total_ns) FILTER (WHERE matched) AS BIGINT) AS total_ns
    FROM st
    GROUP BY run_id
    HAVING count(*) FILTER (WHERE metric = 'step') > 0
),
computed AS (
    SELECT r.run_id, s.n_steps, s.step_ns, g.gpu_idle_fraction, g.kernels, g.calls, g.total_ns
    FROM runs r
    JOIN run_steps s ON s.run_id = r.run_id
    LEFT JOIN run_gpu_summary(
        kernel_pattern := kernel_pattern, category_name := category_name, since := since,
        key_name := key_name
    ) g ON g.run_id = r.run_id
    WHERE (CAST(since AS DATE) IS NULL OR r.day >= CAST(since AS DATE))
      AND r.run_id NOT IN (SELECT run_id FROM stored)
),
v AS (
    SELECT * FROM stored
    UNION ALL
    SELECT * FROM computed
)
SELECT
    r.day, r.start_ns, r.run_id, r.job, r.rank, r.labels_json, v.n_steps, v.step_ns,
    v.gpu_idle_fraction,
    coalesce(v.kernels, 0) AS kernels,
    coalesce(v.calls, 0) AS calls,
    coalesce(v.calls, 0) / greatest(v.n_steps, 1) AS calls_per_step,
    coalesce(v.total_ns, 0) / greatest(v.n_steps, 1) AS time_per_step_ns,
    v.total_ns / nullif(v.calls, 0) AS mean_ns
FROM runs r
JOIN v ON v.run_id = r.run_id
WHERE CAST(since AS DATE) IS NULL OR r.day >= CAST(since AS DATE)
ORDER BY r.start_ns, r.rank, r.run_id;
