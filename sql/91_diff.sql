-- 91_diff.sql: two runs side by side (per step, see 90_history.sql).
--
-- run_diff(a, b, level := 'kernel', tolerance := 0.05, min_delta_ns := 1000)  (table macro)
--   grain: one row per group (kernel_key for level 'kernel', 07_kernel_keys.sql, so a kernel
--          renamed by a recompile is one group; else short_name or category) present in run
--          a or run b.
--   columns: name (kernel level: the op name with the most time, run b's where it ran
--            there; else the group), category (kernel level only), calls_a, calls_b, calls_per_step_a,
--            calls_per_step_b, time_per_step_a_ns, time_per_step_b_ns, mean_a_ns, mean_b_ns,
--            delta_per_step_ns (time_per_step_b_ns - time_per_step_a_ns, a missing side
--            counting 0), ratio (time_per_step_b_ns / time_per_step_a_ns; NULL when a side is
--            missing or 0), status, kernel_key (kernel level; else NULL)
--   status: 'added' (absent from a), 'removed' (absent from b), 'slower' (ratio > 1 +
--           tolerance and delta_per_step_ns >= min_delta_ns), 'faster' (ratio < 1 - tolerance
--           and -delta_per_step_ns >= min_delta_ns), else 'unchanged' (within noise: a pair of
--           runs has no noise estimate of its own, tolerance is the relative run-to-run
--           noise assumed, 5% by default, and min_delta_ns an absolute floor per step).
--   Sorted by |delta_per_step_ns| descending (absolute impact on the step), then name.
--
-- run_compare(a, b)  (table macro)
--   grain: one row per run-level metric of run_metrics: n_steps, step_ns, gpu_op_per_step_ns,
--          gpu_busy_per_step_ns, gpu_idle_per_step_ns, host_wait_per_step_ns,
--          kernel_wait_per_step_ns, other_wait_per_step_ns, gpu_busy_fraction,
--          gpu_idle_fraction (the metric's name carries its unit).
--   columns: metric, value_a, value_b, delta (value_b - value_a), ratio (value_b / value_a;
--            NULL when value_a is 0)

CREATE OR REPLACE MACRO run_diff(a, b, level := 'kernel', tolerance := 0.05, min_delta_ns := 1000) AS TABLE
WITH lv AS (
    SELECT CASE
        WHEN level IN ('kernel', 'short_name', 'category') THEN level
        ELSE error('run_diff: level must be kernel, short_name or category, not ' || level)
    END AS want
),
g0 AS (
    -- at the kernel level a group is a kernel key (07_kernel_keys.sql): a kernel renamed by a
    -- recompile (triton_..._0 -> _3) is the same group in both runs
    SELECT g.*,
           CASE WHEN lv.want = 'kernel' THEN coalesce(k.kernel_key, g.group_name)
                ELSE g.group_name END AS gkey
    FROM run_group_metrics g
    CROSS JOIN lv
    LEFT JOIN kernel_keys k ON lv.want = 'kernel' AND k.name = g.group_name
    WHERE (g.run_id = a OR g.run_id = b) AND g.group_level = lv.want
),
g1 AS (
    SELECT run_id, gkey, arg_max(group_name, total_ns) AS group_name,
           arg_max(category, total_ns) AS category, sum(calls) AS calls,
           sum(calls_per_step) AS calls_per_step, sum(time_per_step_ns) AS time_per_step_ns,
           sum(total_ns) / sum(calls) AS mean_ns
    FROM g0
    GROUP BY run_id, gkey
),
ga AS (
    SELECT * FROM g1 WHERE run_id = a
),
gb AS (
    SELECT * FROM g1 WHERE run_id = b
),
j AS (
    SELECT
        coalesce(gb.group_name, ga.group_name) AS name,
        coalesce(ga.gkey, gb.gkey) AS gkey,
        coalesce(ga.category, gb.category) AS category,
        ga.run_id IS NOT NULL AS in_a,
        gb.run_id IS NOT NULL AS in_b,
        coalesce(ga.calls, 0) AS calls_a,
        coalesce(gb.calls, 0) AS calls_b,
        coalesce(ga.calls_per_step, 0) AS calls_per_step_a,
        coalesce(gb.calls_per_step, 0) AS calls_per_step_b,
        coalesce(ga.time_per_step_ns, 0) AS time_per_step_a_ns,
        coalesce(gb.time_per_step_ns, 0) AS time_per_step_b_ns,
        ga.mean_ns AS mean_a_ns,
        gb.mean_ns AS mean_b_ns
    FROM ga
    FULL JOIN gb ON ga.gkey IS NOT DISTINCT FROM gb.gkey
),
d AS (
    SELECT
        *,
        time_per_step_b_ns - time_per_step_a_ns AS delta_per_step_ns,
        CASE WHEN in_a AND in_b THEN time_per_step_b_ns / nullif(time_per_step_a_ns, 0) END
            AS ratio
    FROM j
)
SELECT
    name, category, calls_a, calls_b, calls_per_step_a, calls_per_step_b,
    time_per_step_a_ns, time_per_step_b_ns, mean_a_ns, mean_b_ns, delta_per_step_ns, ratio,
    CASE
        WHEN NOT in_a THEN 'added'
        WHEN NOT in_b THEN 'removed'
        WHEN ratio > 1 + tolerance AND delta_per_step_ns >= min_delta_ns THEN 'slower'
        WHEN ratio < 1 - tolerance AND -delta_per_step_ns >= min_delta_ns THEN 'faster'
        ELSE 'unchanged'
    END AS status,
    CASE WHEN (SELECT want FROM lv) = 'kernel' THEN gkey END AS kernel_key
FROM d
ORDER BY abs(delta_per_step_ns) DESC, name;

CREATE OR REPLACE MACRO run_compare(a, b) AS TABLE
WITH m AS (
    SELECT
        run_id,
        CAST(n_steps AS DOUBLE) AS n_steps,
        step_ns, gpu_op_per_step_ns, gpu_busy_per_step_ns, gpu_idle_per_step_ns,
        host_wait_per_step_ns, kernel_wait_per_step_ns, other_wait_per_step_ns,
        gpu_busy_fraction, gpu_idle_fraction
    FROM run_metrics
    WHERE run_id = a OR run_id = b
),
u AS (
    UNPIVOT m ON COLUMNS(* EXCLUDE (run_id)) INTO NAME metric VALUE v
),
o AS (
    SELECT * FROM (VALUES
        ('n_steps', 1), ('step_ns', 2), ('gpu_op_per_step_ns', 3), ('gpu_busy_per_step_ns', 4),
        ('gpu_idle_per_step_ns', 5), ('host_wait_per_step_ns', 6),
        ('kernel_wait_per_step_ns', 7), ('other_wait_per_step_ns', 8),
        ('gpu_busy_fraction', 9), ('gpu_idle_fraction', 10)
    ) t(metric, pos)
),
p AS (
    SELECT
        o.metric, o.pos,
        max(u.v) FILTER (WHERE u.run_id = a) AS value_a,
        max(u.v) FILTER (WHERE u.run_id = b) AS value_b
    FROM o
    LEFT JOIN u ON u.metric = o.metric
    GROUP BY o.metric, o.pos
)
SELECT
    metric, value_a, value_b, value_b - value_a AS delta,
    value_b / nullif(value_a, 0) AS ratio
FROM p
ORDER BY pos;
