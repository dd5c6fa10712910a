-- 50_ops.sql: operator attribution (GPU time per CPU operator) and CPU-side operator time.
--
-- op_gpu_time(run)  (table macro)
--   grain: one row per (op_name, op_input_dims) of run `run`: the innermost CPU operator
--          enclosing each GPU op's launch and its "Input Dims" (NULL op_name: GPU ops with no
--          enclosing operator).
--          Kernels replayed by a CUDA/HIP graph get the operator that recorded them in the
--          graph's capture (gpu_ops_attributed, 45_graphs.sql).
--   columns: op_name, op_input_dims, op_calls (distinct operator calls: by op_external_id,
--            else op_ts_ns; a replayed op's call is its graph launch and capture operator),
--            kernels (GPU ops), gpu_ns (sum of their durations), mean_gpu_ns_per_call (gpu_ns /
--            op_calls), kernel_names (distinct short names of those GPU ops, sorted),
--            from_capture (GPU ops attributed through a graph capture)
--
-- cpu_op_nesting(run)  (table macro)
--   grain: one row per `events` row of cat cpu_op of run `run` with a duration.
--   columns: pid, tid, event_index, name, ts_ns, dur_ns, depth (number of enclosing cpu_ops
--            on the same thread), parent_event_index (the innermost enclosing cpu_op),
--            children_ns (sum of the durations of the direct cpu_op children), self_ns
--            (dur_ns - children_ns, at least 0)
--   Nesting is by time on each (pid, tid): events ordered by start, longer first; depth comes
--   from a sweep of starts (+1) and ends (-1); the parent is the latest earlier event one
--   level up (an ASOF join).
--
-- cpu_op_time(run)  (table macro)
--   grain: one row per cpu_op name of run `run`.
--   columns: name, calls, total_ns (sum of dur_ns: inclusive time), self_ns (sum of self_ns:
--            time not inside a child cpu_op), mean_ns, mean_self_ns, max_ns
--   Nested calls of one name count their time once per level (as the profiler's "CPU total").

CREATE OR REPLACE MACRO op_gpu_time(run) AS TABLE
SELECT
    op_name,
    op_input_dims,
    count(DISTINCT op_call) AS op_calls,
    count(*) AS kernels,
    CAST(coalesce(sum(dur_ns), 0) AS BIGINT) AS gpu_ns,
    coalesce(sum(dur_ns), 0) / nullif(count(DISTINCT op_call), 0) AS mean_gpu_ns_per_call,
    list(DISTINCT short_name ORDER BY short_name) FILTER (WHERE short_name IS NOT NULL)
        AS kernel_names,
    count(*) FILTER (WHERE attribution = 'capture') AS from_capture
FROM gpu_ops_attributed(run)
GROUP BY op_name, op_input_dims
ORDER BY gpu_ns DESC, op_name, op_input_dims;

CREATE OR REPLACE MACRO cpu_op_nesting(run) AS TABLE
WITH e AS (
    SELECT
        coalesce(pid, -1) AS pid_k, coalesce(tid, -1) AS tid_k,
        pid, tid, event_index, name, ts_ns, dur_ns,
        row_number() OVER (
            PARTITION BY coalesce(pid, -1), coalesce(tid, -1)
            ORDER BY ts_ns, dur_ns DESC, event_index
        ) AS seq
    FROM events
    WHERE run_id = run AND cat = 'cpu_op' AND dur_ns IS NOT NULL AND ts_ns IS NOT NULL
),
pts AS (
    SELECT pid_k, tid_k, ts_ns AS t, 1 AS k, seq, 0 AS sub, 1 AS d FROM e
    UNION ALL
    SELECT pid_k, tid_k, ts_ns + dur_ns AS t, CASE WHEN dur_ns > 0 THEN 0 ELSE 1 END AS k,
           seq, 1 AS sub, -1 AS d
    FROM e
),
depths AS (
    SELECT pid_k, tid_k, seq,
        coalesce(sum(d) OVER (
            PARTITION BY pid_k, tid_k ORDER BY t, k, seq, sub
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ), 0) AS depth,
        d
    FROM pts
),
ed AS (
    SELECT e.*, CAST(dp.depth AS BIGINT) AS depth
    FROM e JOIN depths dp USING (pid_k, tid_k, seq)
    WHERE dp.d = 1
),
par AS (
    SELECT c.*, p.event_index AS parent_event_index
    FROM ed c
    ASOF LEFT JOIN ed p
        ON p.pid_k = c.pid_k AND p.tid_k = c.tid_k AND p.depth = c.depth - 1 AND c.seq > p.seq
),
kids AS (
    SELECT pid_k, tid_k, parent_event_index AS event_index, sum(dur_ns) AS children_ns
    FROM par
    WHERE parent_event_index IS NOT NULL
    GROUP BY pid_k, tid_k, parent_event_index
)
SELECT
    par.pid, par.tid, par.event_index, par.name, par.ts_ns, par.dur_ns, par.depth,
    par.parent_event_index,
    CAST(coalesce(kids.children_ns, 0) AS BIGINT) AS children_ns,
    CAST(greatest(par.dur_ns - coalesce(kids.children_ns, 0), 0) AS BIGINT) AS self_ns
FROM par
LEFT JOIN kids USING (pid_k, tid_k, event_index);

CREATE OR REPLACE MACRO cpu_op_time(run) AS TABLE
SELECT
    name,
    count(*) AS calls,
    CAST(sum(dur_ns) AS BIGINT) AS total_ns,
    CAST(sum(self_ns) AS BIGINT) AS self_ns,
    avg(dur_ns) AS mean_ns,
    avg(self_ns) AS mean_self_ns,
    max(dur_ns) AS max_ns
FROM cpu_op_nesting(run)
GROUP BY name
ORDER BY total_ns DESC, name;
