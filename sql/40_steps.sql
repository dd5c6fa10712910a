-- 40_steps.sql: per-step summary, by launch.
--
-- step_summary(run, kernel_wait_threshold_ns := 30000)  (table macro)
--   grain: one row per (step N, device) of run `run` (device NULL when the run has no GPU
--          ops); a step's window is [first start, last end] of its spans in `steps`
--          (ProfilerStep#N, or the --step-marker spans).
--   A step's GPU ops are those it launched: gpu_ops.step = N (the step whose window holds
--   the op's launch call; its own start when unlinked), whenever they run. Their intervals
--   are clipped to start no earlier than the step.
--   columns: step, device, start_ns, wall_ns (window length), gpu_busy_ns (length of the
--            union of the step's GPU op intervals on the device), gpu_idle_ns (the step's
--            GPU span minus gpu_busy_ns, where the GPU span is [start_ns, max(window end,
--            end of its last GPU op)]: wall_ns + gpu_tail_ns - gpu_busy_ns), gpu_tail_ns
--            (GPU work of the step running past its CPU end: last op end - window end, at
--            least 0), ops (GPU ops of the step on the device), top_kernel (name with the
--            largest summed duration among them; ties: first name), top_kernel_ns (that sum),
--            lead_ns (step start to its first GPU op start: the whole step without ops),
--            host_wait_ns, kernel_wait_ns, other_wait_ns (the gaps between the step's ops,
--            by kind as in gap_kinds: host_wait when the op after the gap was launched after
--            the gap began, else kernel_wait under the threshold, else other), trail_ns (end
--            of the last GPU op to the window end, 0 with a GPU tail), bound
--   gpu_idle_ns = lead_ns + host_wait_ns + kernel_wait_ns + other_wait_ns + trail_ns.
--   The device may run another step's ops in this step's idle time (the previous step's
--   tail: its gpu_tail_ns).
--   bound: 'cpu' when the step ran no GPU op or host waits make up more than half of the
--          classified gap time (host_wait_ns > kernel_wait_ns + other_wait_ns: the GPU
--          idles because the CPU does not feed it), else 'gpu'.
--
-- gpu_timeline(run, steps := 2, max_ops := 4000)  (table macro)
--   grain: one row per GPU op (with a start) of run `run` launched in its first `steps`
--          steps (gpu_ops.step, as step_summary), or of the whole run when it has no step;
--          the first `max_ops` by start (ties: device, stream, event_index).
--   columns: device, stream, short_name (its name when it has none), category ('other' when
--            none), step, start_ns, dur_ns (0 when the op has none), end_ns (start_ns +
--            dur_ns), lane ('GPU <device> · stream <stream>'; NULL without either), stepped (whether the run has
--            steps: false means the rows are the run's first ops)

CREATE OR REPLACE MACRO step_summary(run, kernel_wait_threshold_ns := 30000) AS TABLE
WITH w AS (
    SELECT step, min(ts_ns) AS s, max(ts_ns + dur_ns) AS e
    FROM steps
    WHERE run_id = run
    GROUP BY step
),
devs AS (
    SELECT DISTINCT device FROM gpu_ops WHERE run_id = run
),
grid AS (
    SELECT w.step, w.s, w.e, d.device FROM w LEFT JOIN devs d ON true
),
o AS (
    SELECT g.step, g.device, g.event_index, g.name, g.dur_ns, g.launch_ts_ns,
           greatest(g.ts_ns, w.s) AS t0, greatest(g.ts_ns + g.dur_ns, w.s) AS t1
    FROM gpu_ops g
    JOIN w ON w.step = g.step
    WHERE g.run_id = run AND g.ts_ns IS NOT NULL AND g.dur_ns IS NOT NULL
),
seq AS (
    SELECT *, max(t1) OVER (PARTITION BY step, device ORDER BY t0, event_index
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
    FROM o
),
gaps AS (
    SELECT step, device,
           sum(t0 - prev_end) AS gap_ns,
           sum(t0 - prev_end) FILTER (WHERE launch_ts_ns > prev_end) AS host_wait_ns,
           sum(t0 - prev_end) FILTER (WHERE NOT coalesce(launch_ts_ns > prev_end, false)
                                      AND t0 - prev_end < kernel_wait_threshold_ns)
               AS kernel_wait_ns,
           sum(t0 - prev_end) FILTER (WHERE NOT coalesce(launch_ts_ns > prev_end, false)
                                      AND t0 - prev_end >= kernel_wait_threshold_ns)
               AS other_wait_ns
    FROM seq
    WHERE t0 > prev_end
    GROUP BY step, device
),
span AS (
    SELECT step, device, count(*) AS ops, min(t0) AS first_ns, max(t1) AS last_ns
    FROM o
    GROUP BY step, device
),
per_name AS (
    SELECT step, device, name, sum(dur_ns) AS total_ns
    FROM o
    GROUP BY step, device, name
),
top AS (
    SELECT step, device, first(name ORDER BY total_ns DESC, name) AS top_kernel,
           max(total_ns) AS top_kernel_ns
    FROM per_name
    GROUP BY step, device
),
j AS (
    SELECT
        grid.step, grid.device, grid.s AS start_ns, grid.e - grid.s AS wall_ns,
        CAST(coalesce(span.ops, 0) AS BIGINT) AS ops,
        CAST(CASE WHEN span.ops IS NULL THEN 0
                  ELSE span.last_ns - span.first_ns - coalesce(gaps.gap_ns, 0) END AS BIGINT)
            AS gpu_busy_ns,
        CAST(greatest(coalesce(span.last_ns, grid.e) - grid.e, 0) AS BIGINT) AS gpu_tail_ns,
        CAST(coalesce(span.first_ns, grid.e) - grid.s AS BIGINT) AS lead_ns,
        CAST(coalesce(gaps.host_wait_ns, 0) AS BIGINT) AS host_wait_ns,
        CAST(coalesce(gaps.kernel_wait_ns, 0) AS BIGINT) AS kernel_wait_ns,
        CAST(coalesce(gaps.other_wait_ns, 0) AS BIGINT) AS other_wait_ns,
        CAST(greatest(grid.e - coalesce(span.last_ns, grid.e), 0) AS BIGINT) AS trail_ns,
        top.top_kernel,
        CAST(top.top_kernel_ns AS BIGINT) AS top_kernel_ns
    FROM grid
    LEFT JOIN span ON span.step = grid.step AND span.device IS NOT DISTINCT FROM grid.device
    LEFT JOIN gaps ON gaps.step = grid.step AND gaps.device IS NOT DISTINCT FROM grid.device
    LEFT JOIN top ON top.step = grid.step AND top.device IS NOT DISTINCT FROM grid.device
)
SELECT
    step, device, start_ns, wall_ns, gpu_busy_ns,
    wall_ns + gpu_tail_ns - gpu_busy_ns AS gpu_idle_ns, gpu_tail_ns, ops, top_kernel,
    top_kernel_ns, lead_ns, host_wait_ns, kernel_wait_ns, other_wait_ns, trail_ns,
    CASE WHEN ops = 0 OR host_wait_ns > kernel_wait_ns + other_wait_ns THEN 'cpu'
         ELSE 'gpu' END AS bound
FROM j
ORDER BY step, device;

CREATE OR REPLACE MACRO gpu_timeline(run, steps := 2, max_ops := 4000) AS TABLE
WITH ops AS (
    SELECT g.event_index, g.device, g.stream, g.short_name, g.name, g.category, g.step, g.ts_ns,
           coalesce(g.dur_ns, 0) AS dur_ns
    FROM gpu_ops g
    JOIN runs r ON r.run_id = g.run_id AND r.ingest_id = g.ingest_id
    WHERE g.run_id = run AND g.ts_ns IS NOT NULL
),
first_steps AS (
    SELECT DISTINCT step FROM ops WHERE step IS NOT NULL ORDER BY step LIMIT steps
),
stepped AS (SELECT count(*) > 0 AS stepped FROM first_steps)
SELECT o.device, o.stream, coalesce(o.short_name, o.name) AS short_name,
       coalesce(o.category, 'other') AS category, o.step, o.ts_ns AS start_ns, o.dur_ns,
       o.ts_ns + o.dur_ns AS end_ns,
       'GPU ' || CAST(o.device AS VARCHAR) || ' · stream ' || CAST(o.stream AS VARCHAR) AS lane,
       s.stepped
FROM ops o, stepped s
WHERE NOT s.stepped OR o.step IN (SELECT step FROM first_steps)
ORDER BY o.ts_ns, o.device, o.stream, o.event_index
LIMIT max_ops;
