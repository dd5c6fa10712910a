-- 91_diff.sql: two runs side by side (per step, see 90_history.sql).
--
-- run_op_metrics  (view)
--   grain: one row per (run_id, CPU operator and input shapes) of the GPU ops with a duration:
--          the innermost CPU operator enclosing each op's launch (gpu_ops.op_name) and its
--          "Input Dims" (op_input_dims).
--   columns: run_id, group_name (op_name, a space and op_input_dims when the trace has them;
--            '(unlinked)' for unlinked GPU ops: no launch call found for them; '(no CPU
--            operator)' for linked GPU ops whose launch no operator encloses), calls (CPU operator calls: distinct
--            cpu_op events, by op_external_id and op_ts_ns, that launched GPU ops of the group;
--            0 for '(unlinked)' and '(no CPU operator)'), kernels (the GPU ops), total_ns, mean_ns (total_ns /
--            calls: GPU time per operator call; NULL without calls), calls_per_step,
--            kernels_per_step, time_per_step_ns (per step as run_group_metrics)
--   The same model on two GPUs runs the same operators on the same shapes but different
--   kernels (an H100 and an MI300 share no kernel name): comparing by operator and shapes
--   is what makes a cross-hardware diff meaningful.
--
-- run_diff(a, b, level := 'kernel', tolerance := 0.05, min_delta_ns := 1000)  (table macro)
--   grain: one row per group (kernel_key for level 'kernel', 07_kernel_keys.sql, so a kernel
--          renamed by a recompile is one group; else short_name, category, or 'op': CPU
--          operator and input shapes, run_op_metrics) present in run a or run b.
--   columns: name (kernel level: the op name with the most time, run b's where it ran
--            there; else the group), category (kernel level only), calls_a, calls_b (level
--            'op': CPU operator calls; else GPU ops), kernels_a, kernels_b (GPU ops; equal to
--            calls except at level 'op'), calls_per_step_a,
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

CREATE OR REPLACE VIEW run_op_metrics AS
WITH g AS (
    SELECT
        run_id,
        coalesce(op_name, CASE WHEN launch_ts_ns IS NULL THEN '(unlinked)' ELSE '(no CPU operator)' END)
            || CASE WHEN op_input_dims IS NOT NULL AND op_input_dims <> '' THEN ' ' || op_input_dims ELSE '' END
            AS group_name,
        count(DISTINCT CASE WHEN op_name IS NOT NULL THEN {'x': op_external_id, 't': op_ts_ns} END)
            AS calls,
        count(*) AS kernels,
        CAST(sum(dur_ns) AS BIGINT) AS total_ns
    FROM gpu_ops
    WHERE dur_ns IS NOT NULL
    GROUP BY ALL
)
SELECT
    g.run_id, g.group_name, g.calls, g.kernels, g.total_ns,
    g.total_ns / nullif(g.calls, 0) AS mean_ns,
    g.calls / s.step_divisor AS calls_per_step,
    g.kernels / s.step_divisor AS kernels_per_step,
    g.total_ns / s.step_divisor AS time_per_step_ns
FROM g
JOIN run_steps s ON s.run_id = g.run_id;

CREATE OR REPLACE MACRO run_diff(a, b, level := 'kernel', tolerance := 0.05, min_delta_ns := 1000) AS TABLE
WITH lv AS (
    SELECT CASE
        WHEN level IN ('kernel', 'short_name', 'category', 'op') THEN level
        ELSE error('run_diff: level must be kernel, short_name, category or op, not ' || level)
    END AS want
),
grouped AS (
    SELECT g.run_id, g.group_level, g.group_name, g.category, g.calls, g.calls AS kernels,
           g.total_ns, g.calls_per_step, g.time_per_step_ns
    FROM run_group_metrics g
    WHERE level <> 'op' AND (g.run_id = a OR g.run_id = b) AND g.group_level = level
    UNION ALL
    SELECT o.run_id, 'op', o.group_name, NULL, o.calls, o.kernels, o.total_ns, o.calls_per_step,
           o.time_per_step_ns
    FROM run_op_metrics o
    WHERE level = 'op' AND (o.run_id = a OR o.run_id = b)
),
g0 AS (
    -- at the kernel level a group is a kernel key (07_kernel_keys.sql): a kernel renamed by a
    -- recompile (triton_..._0 -> _3) is the same group in both runs
    SELECT g.*,
           CASE WHEN lv.want = 'kernel' THEN coalesce(k.kernel_key, g.group_name)
                ELSE g.group_name END AS gkey
    FROM grouped g
    CROSS JOIN lv
    LEFT JOIN kernel_keys k ON lv.want = 'kernel' AND k.name = g.group_name
),
g1 AS (
    SELECT run_id, gkey, arg_max(group_name, total_ns) AS group_name,
           arg_max(category, total_ns) AS category,
           -- sum() of BIGINT is a HUGEINT, which JSON output would write as a string
           CAST(sum(calls) AS BIGINT) AS calls, CAST(sum(kernels) AS BIGINT) AS kernels,
           sum(calls_per_step) AS calls_per_step, sum(time_per_step_ns) AS time_per_step_ns,
           sum(total_ns) / nullif(sum(calls), 0) AS mean_ns
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
        coalesce(ga.kernels, 0) AS kernels_a,
        coalesce(gb.kernels, 0) AS kernels_b,
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
    name, category, calls_a, calls_b, kernels_a, kernels_b, calls_per_step_a, calls_per_step_b,
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
