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
--   One scan of gpu_ops serves the kernel, category and module rows and the kernel keys
--   (kernel_keys_of over every op name of the runs of day >= since, whatever the filters:
--   the keys of the kernel_keys view); step rows: run_steps (step_sd_ns); idle:
--   run_gpu_summary (its own pass, a window over each device's ops in time order).

CREATE OR REPLACE MACRO series_values(since := NULL, kernel_pattern := NULL, category_name := NULL, module_prefix := NULL) AS TABLE
WITH o AS (
    -- the one scan of gpu_ops: the kernel, category and module rows and the kernel keys
    -- (resolved over every op name of the runs, whatever the filters) all read it
    SELECT run_id, step, name, short_name, category, module_path, dur_ns,
           coalesce((kernel_pattern IS NULL OR CASE
                WHEN regexp_matches(kernel_pattern, '[*?\[]')
                    THEN lower(name) GLOB lower(kernel_pattern)
                        OR lower(short_name) GLOB lower(kernel_pattern)
                ELSE contains(lower(name), lower(kernel_pattern))
                    OR contains(lower(short_name), lower(kernel_pattern))
               END)
           AND (category_name IS NULL OR lower(category) = lower(category_name))
           AND (module_prefix IS NULL OR module_path = module_prefix
                OR starts_with(module_path, module_prefix || '/')), false) AS matched
    FROM gpu_ops
    WHERE CAST(since AS DATE) IS NULL OR day >= CAST(since AS DATE)
),
rs AS (
    SELECT s.run_id, s.n_steps, s.step_divisor, s.step_ns, s.step_sd_ns
    FROM run_steps s
    JOIN runs r ON r.run_id = s.run_id
    WHERE CAST(since AS DATE) IS NULL OR r.day >= CAST(since AS DATE)
),
by_name AS MATERIALIZED (
    SELECT run_id, step, name, short_name, category, matched, sum(dur_ns) AS total_ns
    FROM o
    GROUP BY ALL
),
keys AS (
    SELECT *
    FROM kernel_keys_of((
        SELECT coalesce(list({'run_id': run_id, 'name': name}), [])
        FROM (SELECT DISTINCT run_id, name FROM by_name WHERE name IS NOT NULL)
    ))
),
hit AS (
    SELECT run_id, step, name, short_name, category, total_ns
    FROM by_name
    WHERE matched AND total_ns IS NOT NULL
),
keyed AS (
    SELECT b.run_id, b.step, k.kernel_key, b.name, b.short_name, b.category, b.total_ns
    FROM hit b
    JOIN keys k USING (name)
),
grouped AS (
    SELECT run_id, step, 'kernel' AS metric, kernel_key AS key,
           arg_max(name, total_ns) AS name, arg_max(short_name, total_ns) AS short_name,
           arg_max(category, total_ns) AS category, sum(total_ns) AS s
    FROM keyed
    GROUP BY run_id, step, kernel_key
    UNION ALL
    SELECT run_id, step, 'category', category, category, NULL, category, sum(total_ns)
    FROM hit
    GROUP BY run_id, step, category
    UNION ALL
    SELECT run_id, step, 'module', m, m, NULL, NULL, sum(dur_ns)
    FROM (
        SELECT run_id, step, dur_ns,
               array_to_string(list_slice(string_split(module_path, '/'), 1,
                   coalesce(len(string_split(module_prefix, '/')), 1) + 1), '/') AS m
        FROM o
        WHERE matched AND module_path IS NOT NULL AND dur_ns IS NOT NULL
    )
    GROUP BY run_id, step, m
),
per_key AS (
    SELECT run_id, metric, key,
           arg_max(name, s) AS name, arg_max(short_name, s) AS short_name,
           arg_max(category, s) AS category,
           sum(s) AS total_ns,
           sum(s) FILTER (WHERE step IS NOT NULL) AS in_steps_ns,
           sum(s * s) FILTER (WHERE step IS NOT NULL) AS in_steps_sq
    FROM grouped
    GROUP BY run_id, metric, key
)
SELECT
    p.run_id, p.metric, p.key, p.name, p.short_name, p.category,
    p.total_ns / rs.step_divisor AS value,
    CASE WHEN rs.n_steps >= 2 THEN sqrt(greatest(
        (coalesce(p.in_steps_sq, 0) - coalesce(p.in_steps_ns, 0) ^ 2 / rs.n_steps)
        / (rs.n_steps - 1), 0)) END AS step_sd,
    rs.n_steps
FROM per_key p
JOIN rs ON rs.run_id = p.run_id
UNION ALL
SELECT rs.run_id, 'step', 'step_ns', 'step_ns', NULL, NULL, rs.step_ns, rs.step_sd_ns,
       rs.n_steps
FROM rs
WHERE kernel_pattern IS NULL AND category_name IS NULL AND module_prefix IS NULL
UNION ALL
SELECT g.run_id, 'idle', 'gpu_idle_fraction', 'gpu_idle_fraction', NULL, NULL,
       g.gpu_idle_fraction, NULL, rs.n_steps
FROM run_gpu_summary(since := since) g
JOIN rs ON rs.run_id = g.run_id
WHERE kernel_pattern IS NULL AND category_name IS NULL AND module_prefix IS NULL
  AND g.gpu_idle_fraction IS NOT NULL
UNION ALL
SELECT m.run_id, 'memory', 'peak_allocated_' || m.device_type, 'peak_allocated_' || m.device_type,
       NULL, NULL, CAST(m.peak_allocated_per_step_bytes AS DOUBLE), m.step_peak_sd_bytes,
       rs.n_steps
FROM (
    SELECT run_id, device_type,
           arg_max(peak_allocated_per_step_bytes, peak_allocated_per_step_bytes)
               AS peak_allocated_per_step_bytes,
           arg_max(step_peak_sd_bytes, peak_allocated_per_step_bytes) AS step_peak_sd_bytes
    FROM run_memory_in((SELECT list(run_id) FROM rs))
    GROUP BY run_id, device_type
) m
JOIN rs ON rs.run_id = m.run_id
WHERE kernel_pattern IS NULL AND category_name IS NULL AND module_prefix IS NULL;
