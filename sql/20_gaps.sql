-- 20_gaps.sql: stream gaps and the idle breakdown.
--
-- gpu_op_gaps  (view, warehouse-wide)
--   grain: one row per GPU op with a duration.
--   columns: run_id, device, stream, event_index, name, short_name, ts_ns, end_ns,
--            launch_ts_ns, prev_end_ns (latest end among the earlier ops of the same run,
--            device and stream; ops ordered by ts_ns then event_index), gap_ns
--            (ts_ns - prev_end_ns when positive, else 0; NULL for the stream's first op)
--
-- gap_kinds(run, kernel_wait_threshold_ns := 30000)  (table macro)
--   grain: one row per positive gap of run `run` (an op starting after every earlier op on
--          its stream has ended).
--   columns: device, stream, gap_ns, gap_start_ns (= prev_end_ns), gap_end_ns (= start of the
--            next op), kind, next_event_index, next_name, next_launch_ts_ns
--   kind: 'host_wait' when the next op's launch call began after the previous op ended
--         (launch_ts_ns > prev_end_ns: the CPU was not feeding the GPU); else 'kernel_wait'
--         when gap_ns < kernel_wait_threshold_ns (in ns; default 30000 ns = 30 µs: launch
--         overhead); else 'other' (waiting on a sync, an event or communication). Unlinked
--         ops (no launch call) are never host waits.
--
-- stream_gaps(run, kernel_wait_threshold_ns := 30000)  (table macro)
--   grain: one row per (device, stream) of run `run`.
--   columns: device, stream, ops, busy_ns (union of the stream's op intervals = window_ns -
--            gap_ns), window_ns (first start to last end), gap_ns (sum of gaps),
--            idle_fraction (gap_ns / window_ns), p50_gap_ns, p95_gap_ns, max_gap_ns
--            (continuous quantiles and max over the positive gaps; NULL without gaps),
--            host_wait_ns, kernel_wait_ns, other_wait_ns (gap_ns split by kind)
--
-- idle_breakdown(run, kernel_wait_threshold_ns := 30000)  (table macro)
--   grain: one row per (device, stream) plus one row per device with stream NULL (totals).
--   columns: level ('stream' | 'device'), device, stream, gaps (number of positive gaps), gap_ns, host_wait_ns,
--            kernel_wait_ns, other_wait_ns, host_wait_ratio, kernel_wait_ratio,
--            other_wait_ratio (each *_ns / gap_ns)
--
-- largest_gaps(run, n := 20, kernel_wait_threshold_ns := 30000)  (table macro)
--   grain: one row per gap, the n largest of run `run` (gap_ns descending).
--   columns: device, stream, gap_ns, gap_start_ns, gap_end_ns, kind, prev_event_index,
--            prev_name (the earlier op whose end is prev_end_ns), next_event_index, next_name,
--            next_launch_ts_ns

CREATE OR REPLACE VIEW gpu_op_gaps AS
WITH o AS (
    SELECT
        run_id, device, stream, event_index, name, short_name, ts_ns,
        ts_ns + dur_ns AS end_ns, launch_ts_ns,
        max(ts_ns + dur_ns) OVER (
            PARTITION BY run_id, device, stream ORDER BY ts_ns, event_index
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS prev_end_ns
    FROM gpu_ops
    WHERE dur_ns IS NOT NULL AND ts_ns IS NOT NULL
)
SELECT *, greatest(ts_ns - prev_end_ns, 0) AS gap_ns
FROM o;

CREATE OR REPLACE MACRO gap_kinds(run, kernel_wait_threshold_ns := 30000) AS TABLE
SELECT
    device,
    stream,
    gap_ns,
    prev_end_ns AS gap_start_ns,
    ts_ns AS gap_end_ns,
    CASE
        WHEN launch_ts_ns > prev_end_ns THEN 'host_wait'
        WHEN gap_ns < kernel_wait_threshold_ns THEN 'kernel_wait'
        ELSE 'other'
    END AS kind,
    event_index AS next_event_index,
    name AS next_name,
    launch_ts_ns AS next_launch_ts_ns
FROM gpu_op_gaps
WHERE run_id = run AND gap_ns > 0;

CREATE OR REPLACE MACRO stream_gaps(run, kernel_wait_threshold_ns := 30000) AS TABLE
-- one pass over the run's ops: every figure is an aggregate of the same rows
-- (the kinds are those of gap_kinds, given here only to positive gaps)
WITH k AS (
    SELECT
        device, stream, ts_ns, end_ns, gap_ns,
        CASE
            WHEN gap_ns <= 0 OR gap_ns IS NULL THEN NULL
            WHEN launch_ts_ns > prev_end_ns THEN 'host_wait'
            WHEN gap_ns < kernel_wait_threshold_ns THEN 'kernel_wait'
            ELSE 'other'
        END AS kind
    FROM gpu_op_gaps
    WHERE run_id = run
),
s AS (
    SELECT
        device, stream,
        count(*) AS ops,
        max(end_ns) - min(ts_ns) AS window_ns,
        CAST(coalesce(sum(gap_ns), 0) AS BIGINT) AS gap_ns,
        quantile_cont(gap_ns, 0.5) FILTER (WHERE kind IS NOT NULL) AS p50_gap_ns,
        quantile_cont(gap_ns, 0.95) FILTER (WHERE kind IS NOT NULL) AS p95_gap_ns,
        max(gap_ns) FILTER (WHERE kind IS NOT NULL) AS max_gap_ns,
        CAST(coalesce(sum(gap_ns) FILTER (WHERE kind = 'host_wait'), 0) AS BIGINT) AS host_wait_ns,
        CAST(coalesce(sum(gap_ns) FILTER (WHERE kind = 'kernel_wait'), 0) AS BIGINT) AS kernel_wait_ns,
        CAST(coalesce(sum(gap_ns) FILTER (WHERE kind = 'other'), 0) AS BIGINT) AS other_wait_ns
    FROM k
    GROUP BY device, stream
)
SELECT
    device, stream, ops,
    window_ns - gap_ns AS busy_ns,
    window_ns,
    gap_ns,
    CASE WHEN window_ns > 0 THEN gap_ns / window_ns END AS idle_fraction,
    p50_gap_ns, p95_gap_ns, max_gap_ns,
    host_wait_ns, kernel_wait_ns, other_wait_ns
FROM s
ORDER BY device, stream;

CREATE OR REPLACE MACRO idle_breakdown(run, kernel_wait_threshold_ns := 30000) AS TABLE
WITH t AS (
    SELECT
        device, stream,
        count(*) AS gaps,
        CAST(sum(gap_ns) AS BIGINT) AS gap_ns,
        CAST(coalesce(sum(gap_ns) FILTER (WHERE kind = 'host_wait'), 0) AS BIGINT) AS host_wait_ns,
        CAST(coalesce(sum(gap_ns) FILTER (WHERE kind = 'kernel_wait'), 0) AS BIGINT) AS kernel_wait_ns,
        CAST(coalesce(sum(gap_ns) FILTER (WHERE kind = 'other'), 0) AS BIGINT) AS other_wait_ns,
        grouping(stream) AS is_total
    FROM gap_kinds(run, kernel_wait_threshold_ns := kernel_wait_threshold_ns)
    GROUP BY GROUPING SETS ((device, stream), (device))
)
SELECT
    CASE WHEN is_total = 1 THEN 'device' ELSE 'stream' END AS level,
    * EXCLUDE (is_total),
    host_wait_ns / gap_ns AS host_wait_ratio,
    kernel_wait_ns / gap_ns AS kernel_wait_ratio,
    other_wait_ns / gap_ns AS other_wait_ratio
FROM t
ORDER BY device, is_total, stream;

CREATE OR REPLACE MACRO largest_gaps(run, n := 20, kernel_wait_threshold_ns := 30000) AS TABLE
WITH o AS (
    SELECT
        device, stream, event_index, name, ts_ns, launch_ts_ns, prev_end_ns, gap_ns,
        arg_max(event_index, end_ns) OVER w AS prev_event_index,
        arg_max(name, end_ns) OVER w AS prev_name
    FROM gpu_op_gaps
    WHERE run_id = run
    WINDOW w AS (
        PARTITION BY device, stream ORDER BY ts_ns, event_index
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    )
)
SELECT
    device, stream, gap_ns,
    prev_end_ns AS gap_start_ns,
    ts_ns AS gap_end_ns,
    CASE
        WHEN launch_ts_ns > prev_end_ns THEN 'host_wait'
        WHEN gap_ns < kernel_wait_threshold_ns THEN 'kernel_wait'
        ELSE 'other'
    END AS kind,
    prev_event_index, prev_name,
    event_index AS next_event_index,
    name AS next_name,
    launch_ts_ns AS next_launch_ts_ns
FROM o
WHERE gap_ns > 0
ORDER BY gap_ns DESC, device, stream, gap_end_ns
LIMIT n;
