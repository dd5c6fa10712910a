-- 92_run_series.sql: the per-run values of every history series, computed from a run's
-- tables; what the ingest stores in the `run_series` table and what series_values
-- (93_changes.sql) and metric_history (90_history.sql) read back.
--
-- series_rows(since := NULL, kernel_pattern := NULL, category_name := NULL, module_prefix := NULL, skip_stored := false)  (table macro)
--   grain: one row per (run, metric, key) of the visible runs of day >= since (a DATE; NULL:
--          all); with skip_stored, the runs that already have `run_series` rows are left out.
--   columns: run_id, metric, key, name, short_name, category, value, step_sd, n_steps, calls,
--            total_ns
--   metric 'op': one row per GPU op name the run holds (NULL names: one row, key NULL),
--            whatever the filters: name,
--            short_name and category of its ops (the most-timed when several), calls (its ops
--            with a duration), total_ns (their summed duration, ns), value (total_ns /
--            step_divisor, ns per step); key = name. What metric_history matches patterns on
--            and what the kernel keys are resolved over (kernel_keys_of: every op name of the
--            runs, as the kernel_keys view).
--   metric 'kernel': one row per (run, fine kernel key, tw_kernel_key_fine of 06_kernel_key.sql)
--            of the matched ops: key = the fine key; name, short_name, category of the op name
--            with the most time in the run under it; value, step_sd, n_steps as series_values.
--            series_values maps the fine key to the kernel_key (07_kernel_keys.sql) resolved
--            over all runs: inside one run, op names with one fine key share every coarser
--            key, and two names that share a resolved key always share their fine key (else
--            the key would have been refined), so a run's fine-key groups are exactly its
--            resolved-key groups.
--   metric 'step', 'idle', 'category', 'module', 'memory': the rows of series_values, with
--            calls and total_ns NULL (category and module: total_ns, their summed GPU time).
--   Filters as series_values: with any, the step, idle and memory rows are left out and the
--   kernel, category and module rows hold the matched ops only.
--
-- run_series_rows  (view)
--   grain: one row per (visible run without `run_series` rows, metric, key): series_rows of
--          those runs with the run's ingest_id and day; the columns of the `run_series`
--          table. The ingest computes it over the runs of a commit before their `runs`
--          rows are committed; `tracewh migrate` over the runs stored before the table.

CREATE OR REPLACE MACRO series_rows(since := NULL, kernel_pattern := NULL, category_name := NULL, module_prefix := NULL, skip_stored := false) AS TABLE
WITH rs AS (
    SELECT s.run_id, s.n_steps, s.step_divisor, s.step_ns, s.step_sd_ns
    FROM run_steps s
    JOIN runs r ON r.run_id = s.run_id
    WHERE (CAST(since AS DATE) IS NULL OR r.day >= CAST(since AS DATE))
      AND NOT (skip_stored AND r.run_id IN (SELECT run_id FROM run_series))
),
o AS (
    -- the one scan of gpu_ops: op, kernel, category and module rows all read it
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
    WHERE (CAST(since AS DATE) IS NULL OR day >= CAST(since AS DATE))
      AND run_id IN (SELECT run_id FROM rs)
),
by_name AS MATERIALIZED (
    SELECT run_id, step, name, short_name, category, matched,
           sum(dur_ns) AS total_ns, count(dur_ns) AS calls
    FROM o
    GROUP BY ALL
),
fine AS (
    SELECT name, tw_kernel_key_fine(name) AS fine
    FROM (SELECT DISTINCT name FROM by_name WHERE name IS NOT NULL)
),
hit AS (
    SELECT run_id, step, name, short_name, category, total_ns
    FROM by_name
    WHERE matched AND total_ns IS NOT NULL
),
grouped AS (
    SELECT run_id, step, 'kernel' AS metric, f.fine AS key,
           arg_max(name, total_ns) AS name, arg_max(short_name, total_ns) AS short_name,
           arg_max(category, total_ns) AS category, sum(total_ns) AS s
    FROM hit JOIN fine f USING (name)
    GROUP BY run_id, step, f.fine
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
),
ops AS (
    SELECT run_id, name, arg_max(short_name, total_ns) AS short_name,
           arg_max(category, total_ns) AS category,
           sum(calls) AS calls, sum(total_ns) AS total_ns
    FROM by_name
    GROUP BY run_id, name
)
SELECT
    p.run_id, p.metric, p.key, p.name, p.short_name, p.category,
    p.total_ns / rs.step_divisor AS value,
    CASE WHEN rs.n_steps >= 2 THEN sqrt(greatest(
        (coalesce(p.in_steps_sq, 0) - coalesce(p.in_steps_ns, 0) ^ 2 / rs.n_steps)
        / (rs.n_steps - 1), 0)) END AS step_sd,
    rs.n_steps, CAST(NULL AS BIGINT) AS calls, CAST(p.total_ns AS DOUBLE) AS total_ns
FROM per_key p
JOIN rs ON rs.run_id = p.run_id
UNION ALL
SELECT p.run_id, 'op', p.name, p.name, p.short_name, p.category,
       p.total_ns / rs.step_divisor, NULL, rs.n_steps, p.calls, CAST(p.total_ns AS DOUBLE)
FROM ops p
JOIN rs ON rs.run_id = p.run_id
UNION ALL
SELECT rs.run_id, 'step', 'step_ns', 'step_ns', NULL, NULL, rs.step_ns, rs.step_sd_ns,
       rs.n_steps, NULL, NULL
FROM rs
WHERE kernel_pattern IS NULL AND category_name IS NULL AND module_prefix IS NULL
UNION ALL
SELECT g.run_id, 'idle', 'gpu_idle_fraction', 'gpu_idle_fraction', NULL, NULL,
       g.gpu_idle_fraction, NULL, rs.n_steps, NULL, NULL
FROM run_gpu_summary(since := since) g
JOIN rs ON rs.run_id = g.run_id
WHERE kernel_pattern IS NULL AND category_name IS NULL AND module_prefix IS NULL
  AND g.gpu_idle_fraction IS NOT NULL
UNION ALL
SELECT m.run_id, 'memory', 'peak_allocated_' || m.device_type, 'peak_allocated_' || m.device_type,
       NULL, NULL, CAST(m.peak_allocated_per_step_bytes AS DOUBLE), m.step_peak_sd_bytes,
       rs.n_steps, NULL, NULL
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

CREATE OR REPLACE VIEW run_series_rows AS
SELECT r.run_id, r.ingest_id, r.day, s.metric, s.key, s.name, s.short_name, s.category,
       s.value, s.step_sd, s.n_steps, s.calls, s.total_ns
FROM series_rows(skip_stored := true) s
JOIN runs r ON r.run_id = s.run_id;
