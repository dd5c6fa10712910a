-- 93_changes.sql: the per-run values of every series that change-point detection looks at.
--
-- series_values(since := NULL, kernel_pattern := NULL, category_name := NULL, module_prefix := NULL)  (table macro)
--   grain: one row per (run, metric, key) of the visible runs of day >= since (a DATE; NULL:
--          all); a kernel, category or module absent from a run has no row (it ran 0 ms).
--   columns: run_id, metric ('step' | 'idle' | 'category' | 'kernel' | 'module' | 'memory'),
--            key (memory: 'peak_allocated_gpu' | 'peak_allocated_cpu'; step:
--            'step_ns'; idle: 'gpu_idle_fraction'; category: the category; kernel: its
--            kernel_key (07_kernel_keys.sql); module: the module path cut below the level of
--            module_prefix, by default the root module's direct children, 'Root/child'), name
--            (kernel: the GPU op name with the most time in the run under that key; else the
--            key), short_name (kernel: that op's short name), category (kernel: its
--            category), value (per step: step: mean ProfilerStep wall time in ns, as run_steps;
--            idle: gpu_idle_fraction of run_gpu_summary, 0..1; category, kernel, module: summed
--            GPU op time / step_divisor in ns, as run_group_metrics; memory: in BYTES, the
--            peak allocated per step of run_memory_in (65_memory.sql), the largest over the
--            run's devices of that type), step_sd (standard
--            deviation of the value across the run's steps, same unit: step wall times, or
--            per-step sums of the ops launched in each ProfilerStep with a step where the
--            group did not run counting 0; memory: of the steps' peaks; NULL with fewer than
--            2 steps and for idle), n_steps
--   Filters: kernel_pattern (op name or short name, case-insensitive, a glob with * ? [, else a
--   substring, as metric_history), category_name (exact, case-insensitive) and module_prefix
--   (module_path equal to it or under it, 'Root/child/...') restrict the kernel, category and
--   module rows to the matching ops; with any filter the step, idle and memory rows are
--   left out.
--   Where the values come from: the runs' `run_series` rows (written at ingest; one row per
--   (run, series), 92_run_series.sql) when no filter is given; the runs without them (stored
--   before the table; `tracewh migrate` stores theirs) and every run under a filter get
--   series_rows, the same definition computed from their tables. Kernel rows come per (run,
--   fine key) and take the kernel_key resolved over every op name of the runs of day >=
--   since (kernel_keys_of over the 'op' rows, whatever the filters: the keys of the
--   kernel_keys view).

CREATE OR REPLACE MACRO series_values(since := NULL, kernel_pattern := NULL, category_name := NULL, module_prefix := NULL) AS TABLE
WITH computed AS MATERIALIZED (
    SELECT run_id, metric, key, name, short_name, category, value, step_sd, n_steps
    FROM series_rows(since := since, kernel_pattern := kernel_pattern,
                     category_name := category_name, module_prefix := module_prefix,
                     skip_stored := kernel_pattern IS NULL AND category_name IS NULL
                                    AND module_prefix IS NULL)
),
stored AS (
    SELECT s.run_id, s.metric, s.key, s.name, s.short_name, s.category, s.value, s.step_sd,
           s.n_steps
    FROM run_series s
    JOIN runs r ON r.run_id = s.run_id
    WHERE kernel_pattern IS NULL AND category_name IS NULL AND module_prefix IS NULL
      AND (CAST(since AS DATE) IS NULL OR r.day >= CAST(since AS DATE))
),
v AS MATERIALIZED (
    SELECT * FROM computed
    UNION ALL
    SELECT * FROM stored
),
keys AS (
    SELECT *
    FROM kernel_keys_of((
        SELECT coalesce(list({'run_id': run_id, 'name': name}), [])
        FROM v WHERE metric = 'op'
    ))
)
SELECT v.run_id, 'kernel' AS metric, k.kernel_key AS key,
       arg_max(v.name, v.value) AS name, arg_max(v.short_name, v.value) AS short_name,
       arg_max(v.category, v.value) AS category, sum(v.value) AS value,
       sqrt(sum(v.step_sd * v.step_sd)) AS step_sd, max(v.n_steps) AS n_steps
FROM v
JOIN keys k USING (name)
WHERE v.metric = 'kernel'
GROUP BY v.run_id, k.kernel_key
UNION ALL
SELECT run_id, metric, key, name, short_name, category, value, step_sd, n_steps
FROM v
WHERE metric NOT IN ('kernel', 'op');
