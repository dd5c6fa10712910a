-- 40_steps.sql: per-step summary.
--
-- step_summary(run, kernel_wait_threshold_ns := 30000)  (table macro)
--   grain: one row per (step N, device) of run `run` (device NULL when the run has no GPU
--          ops); a step's window is [first start, last end] of its ProfilerStep#N spans.
--   columns: step, device, start_ns, wall_ns (window length), gpu_busy_ns (length of the union
--            of the device's GPU op intervals inside the window), gpu_idle_ns (wall_ns -
--            gpu_busy_ns), ops (GPU ops of the device starting inside the window),
--            top_kernel (name with the largest summed duration among those ops),
--            top_kernel_ns (that sum), host_wait_ns, kernel_wait_ns, other_wait_ns (stream
--            gaps of the device that end inside the window, by kind, see gap_kinds), bound
--   bound: 'cpu' when no GPU op ran in the step (a CPU-only step) or when host waits make up
--          more than half of the classified gap time (host_wait_ns > kernel_wait_ns +
--          other_wait_ns: the GPU idles because the CPU does not feed it), else 'gpu'.

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
busy AS (
    SELECT w.step, g.device, sum(least(g.end_ns, w.e) - greatest(g.start_ns, w.s)) AS busy_ns
    FROM w
    JOIN gpu_segments(run) g ON g.start_ns < w.e AND g.end_ns > w.s
    WHERE g.compute_ops + g.comm_ops + g.memcpy_ops > 0
    GROUP BY w.step, g.device
),
per_name AS (
    SELECT w.step, o.device, o.name, count(*) AS ops, sum(o.dur_ns) AS total_ns
    FROM w
    JOIN gpu_ops o ON o.ts_ns >= w.s AND o.ts_ns < w.e
    WHERE o.run_id = run
    GROUP BY w.step, o.device, o.name
),
ops AS (
    SELECT
        step, device,
        sum(ops) AS ops,
        first(name ORDER BY total_ns DESC, name) AS top_kernel,
        max(total_ns) AS top_kernel_ns
    FROM per_name
    GROUP BY step, device
),
gaps AS (
    SELECT
        w.step, k.device,
        sum(k.gap_ns) FILTER (WHERE k.kind = 'host_wait') AS host_wait_ns,
        sum(k.gap_ns) FILTER (WHERE k.kind = 'kernel_wait') AS kernel_wait_ns,
        sum(k.gap_ns) FILTER (WHERE k.kind = 'other') AS other_wait_ns
    FROM w
    JOIN gap_kinds(run, kernel_wait_threshold_ns := kernel_wait_threshold_ns) k
        ON k.gap_end_ns >= w.s AND k.gap_end_ns < w.e
    GROUP BY w.step, k.device
),
j AS (
    SELECT
        grid.step, grid.device, grid.s AS start_ns, grid.e - grid.s AS wall_ns,
        CAST(coalesce(busy.busy_ns, 0) AS BIGINT) AS gpu_busy_ns,
        CAST(coalesce(ops.ops, 0) AS BIGINT) AS ops,
        ops.top_kernel,
        CAST(ops.top_kernel_ns AS BIGINT) AS top_kernel_ns,
        CAST(coalesce(gaps.host_wait_ns, 0) AS BIGINT) AS host_wait_ns,
        CAST(coalesce(gaps.kernel_wait_ns, 0) AS BIGINT) AS kernel_wait_ns,
        CAST(coalesce(gaps.other_wait_ns, 0) AS BIGINT) AS other_wait_ns
    FROM grid
    LEFT JOIN busy ON busy.step = grid.step AND busy.device IS NOT DISTINCT FROM grid.device
    LEFT JOIN ops ON ops.step = grid.step AND ops.device IS NOT DISTINCT FROM grid.device
    LEFT JOIN gaps ON gaps.step = grid.step AND gaps.device IS NOT DISTINCT FROM grid.device
)
SELECT
    step, device, start_ns, wall_ns, gpu_busy_ns, wall_ns - gpu_busy_ns AS gpu_idle_ns, ops,
    top_kernel, top_kernel_ns, host_wait_ns, kernel_wait_ns, other_wait_ns,
    CASE WHEN gpu_busy_ns = 0 OR host_wait_ns > kernel_wait_ns + other_wait_ns THEN 'cpu'
         ELSE 'gpu' END AS bound
FROM j
ORDER BY step, device;
