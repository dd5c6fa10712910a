-- 92_check.sql: regression check of runs against a robust baseline of comparable runs.
--
-- run_window_values(run_list, keys := ['model', 'branch'], n := 7)  (table macro)
--   grain: one row per (target run of run_list, metric, run of its window) where the window is
--          the target (age 0) and its n most recent earlier comparable runs (run_baselines);
--          metrics are the step time and the time per step of every category and GPU op name
--          seen in any run of the window.
--   columns: target_run_id, metric_kind ('step' | 'category' | 'kernel'), metric ('step_ns'
--            for the step time, else the category or GPU op name), run_id, age, day, start_ns,
--            tied_by, value_ns (step_ns, or time_per_step_ns of run_group_metrics; 0 when the
--            group did not run)
--
-- run_check(run_list, keys := ['model', 'branch'], n := 7, threshold := 0.10, k_mad := 3.0,
--           min_ns := 100000, floor_ns := 10000, min_runs := 3)  (table macro)
--   grain: one row per (target run, metric) of run_window_values that is significant: the step
--          time always; a category or kernel when its baseline or its value is at least min_ns
--          per step (default 0.1 ms).
--   columns: target_run_id, metric_kind, metric, value_ns (the target's), baseline_ns (median of
--            the metric over the baseline runs, age 1..n), mad_ns (median absolute deviation
--            from baseline_ns), baseline_runs (how many), tied_by, change_ns (value_ns -
--            baseline_ns), change_fraction (change_ns / baseline_ns; NULL when baseline_ns is
--            0), bound_ns, status, since_run_id, since_day, since_start_ns
--   bound_ns = greatest(threshold * baseline_ns, k_mad * 1.4826 * mad_ns, floor_ns): a change
--   must exceed the relative threshold AND the baseline's own noise (k_mad scaled MADs, a
--   robust standard deviation) AND an absolute floor (default 10 µs per step).
--   status: 'insufficient' (fewer than min_runs baseline runs), 'new' (baseline 0, now > 0),
--           'gone' (now 0, baseline > 0), 'regression' (change_ns > bound_ns), 'improvement'
--           (-change_ns > bound_ns), else 'ok'.
--   since_*: for regressions and improvements, the first run of the window's trailing streak of
--            runs beyond the bound in the same direction (the run where the metric crossed);
--            NULL otherwise.

CREATE OR REPLACE MACRO run_window_values(run_list, keys := ['model', 'branch'], n := 7) AS TABLE
WITH w AS (
    SELECT * FROM run_baselines(run_list, keys := keys, n := n)
),
v AS (
    SELECT s.run_id, 'step' AS metric_kind, 'step_ns' AS metric, s.step_ns AS value_ns
    FROM run_steps s
    SEMI JOIN w ON w.run_id = s.run_id
    UNION ALL
    SELECT
        g.run_id,
        CASE WHEN g.group_level = 'kernel' THEN 'kernel' ELSE 'category' END,
        g.group_name,
        g.time_per_step_ns
    FROM run_group_metrics g
    SEMI JOIN w ON w.run_id = g.run_id
    WHERE g.group_level IN ('kernel', 'category')
),
metrics AS (
    SELECT DISTINCT w.target_run_id, v.metric_kind, v.metric
    FROM w
    JOIN v ON v.run_id = w.run_id
)
SELECT
    m.target_run_id, m.metric_kind, m.metric, w.run_id, w.age, w.day, w.start_ns, w.tied_by,
    coalesce(v.value_ns, 0) AS value_ns
FROM metrics m
JOIN w ON w.target_run_id = m.target_run_id
LEFT JOIN v
    ON v.run_id = w.run_id AND v.metric_kind = m.metric_kind
    AND v.metric IS NOT DISTINCT FROM m.metric;

CREATE OR REPLACE MACRO run_check(
    run_list, keys := ['model', 'branch'], n := 7, threshold := 0.10, k_mad := 3.0,
    min_ns := 100000, floor_ns := 10000, min_runs := 3
) AS TABLE
WITH wv AS (
    SELECT * FROM run_window_values(run_list, keys := keys, n := n)
),
med AS (
    SELECT
        target_run_id, metric_kind, metric,
        quantile_cont(value_ns, 0.5) FILTER (WHERE age >= 1) AS baseline_ns,
        count(*) FILTER (WHERE age >= 1) AS baseline_runs,
        max(value_ns) FILTER (WHERE age = 0) AS value_ns,
        any_value(tied_by) AS tied_by
    FROM wv
    GROUP BY target_run_id, metric_kind, metric
),
mad AS (
    SELECT
        wv.target_run_id, wv.metric_kind, wv.metric,
        quantile_cont(abs(wv.value_ns - med.baseline_ns), 0.5) AS mad_ns
    FROM wv
    JOIN med USING (target_run_id, metric_kind, metric)
    WHERE wv.age >= 1
    GROUP BY wv.target_run_id, wv.metric_kind, wv.metric
),
st AS (
    SELECT
        med.*,
        mad.mad_ns,
        greatest(
            threshold * coalesce(med.baseline_ns, 0),
            k_mad * 1.4826 * coalesce(mad.mad_ns, 0),
            floor_ns
        ) AS bound_ns
    FROM med
    LEFT JOIN mad USING (target_run_id, metric_kind, metric)
    WHERE med.metric_kind = 'step'
       OR greatest(coalesce(med.baseline_ns, 0), med.value_ns) >= min_ns
),
cls AS (
    SELECT
        *,
        value_ns - baseline_ns AS change_ns,
        (value_ns - baseline_ns) / nullif(baseline_ns, 0) AS change_fraction,
        CASE
            WHEN baseline_runs < min_runs THEN 'insufficient'
            WHEN baseline_ns = 0 AND value_ns > 0 THEN 'new'
            WHEN value_ns = 0 AND baseline_ns > 0 THEN 'gone'
            WHEN value_ns - baseline_ns > bound_ns THEN 'regression'
            WHEN baseline_ns - value_ns > bound_ns THEN 'improvement'
            ELSE 'ok'
        END AS status
    FROM st
),
streak AS (
    SELECT
        c.target_run_id, c.metric_kind, c.metric, wv.run_id, wv.day, wv.start_ns,
        CASE c.status
            WHEN 'regression' THEN wv.value_ns - c.baseline_ns > c.bound_ns
            ELSE c.baseline_ns - wv.value_ns > c.bound_ns
        END AS beyond
    FROM cls c
    JOIN wv USING (target_run_id, metric_kind, metric)
    WHERE c.status IN ('regression', 'improvement')
),
last_ok AS (
    SELECT
        target_run_id, metric_kind, metric,
        max(start_ns) FILTER (WHERE NOT beyond) AS last_ok_ns
    FROM streak
    GROUP BY target_run_id, metric_kind, metric
),
since AS (
    SELECT
        s.target_run_id, s.metric_kind, s.metric,
        arg_min(s.run_id, s.start_ns) AS since_run_id,
        arg_min(s.day, s.start_ns) AS since_day,
        min(s.start_ns) AS since_start_ns
    FROM streak s
    JOIN last_ok l USING (target_run_id, metric_kind, metric)
    WHERE s.beyond AND (l.last_ok_ns IS NULL OR s.start_ns > l.last_ok_ns)
    GROUP BY s.target_run_id, s.metric_kind, s.metric
)
SELECT
    c.target_run_id, c.metric_kind, c.metric, c.value_ns, c.baseline_ns, c.mad_ns,
    c.baseline_runs, c.tied_by, c.change_ns, c.change_fraction, c.bound_ns, c.status,
    since.since_run_id, since.since_day, since.since_start_ns
FROM cls c
LEFT JOIN since USING (target_run_id, metric_kind, metric)
ORDER BY
    c.target_run_id,
    CASE c.status WHEN 'regression' THEN 0 WHEN 'improvement' THEN 2 ELSE 1 END,
    CASE c.metric_kind WHEN 'step' THEN 0 WHEN 'category' THEN 1 ELSE 2 END,
    abs(c.change_ns) DESC NULLS LAST,
    c.metric;
