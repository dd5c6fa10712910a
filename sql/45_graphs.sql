-- 45_graphs.sql: CUDA/HIP graph launches, and replayed kernels mapped to their capture.
--
-- A graph launch (gpu_ops.launch_kind = 'graph': cudaGraphLaunch, hipGraphLaunch) replays
-- many GPU ops under one correlation id; gpu_ops.graph_position numbers them by GPU start.
-- A capture (graph_nodes, from a trace that recorded the graph: *StreamBeginCapture ..
-- *StreamEndCapture) lists the launches recorded into the graph in order, each with the CPU
-- operator, module and annotations that recorded it. As TraceLens does, a replay is mapped
-- to a capture by the order of launches: the replayed op at position p is the node at
-- position p.
--
-- graph_replay_map(run)  (table macro)
--   grain: one row per graph launch of run `run` (a launch call, by pid, tid and start)
--          that some capture of the same job (runs.job, run `run` included) matches.
--   columns: launch_pid, launch_tid, launch_ts_ns, ops (GPU ops it replayed), capture_run_id,
--            capture, nodes (= ops), name_matches (positions whose node kernel_name equals
--            the replayed op's name), named_nodes (nodes with a kernel_name)
--   match: a capture matches a launch when it has as many nodes as the launch replayed
--          ops; of several, the one with the most name_matches, then the latest capture
--          that began before the launch, then the lowest run_id and capture.
--
-- graph_replay(run)  (table macro)
--   grain: one row per GPU op of run `run` replayed by a mapped graph launch.
--   columns: event_index, graph_position, launch_ts_ns, capture_run_id, capture,
--            kernel_name (of the node), name_match (kernel_name = the op's name; NULL
--            without a kernel_name), op_name, op_ts_ns, op_external_id, op_input_dims,
--            module_path, annotation_path (of the node: what recorded it in the capture)
--
-- graph_launches(run)  (table macro)
--   grain: one row per graph launch of run `run`.
--   columns: launch_name, launch_pid, launch_tid, launch_ts_ns, launch_dur_ns, ops, first_ns
--            (first replayed op start), end_ns (last replayed op end), launch_to_first_ns
--            (first_ns - launch_ts_ns: the launch latency of a graph), gpu_span_ns (end_ns -
--            first_ns), gpu_ns (sum of the replayed ops' durations), capture_run_id, capture,
--            name_matches, named_nodes (NULL when no capture matches)
--
-- gpu_ops_attributed(run)  (table macro)
--   grain: one row per GPU op of run `run`: its attribution, from its own launch, or for an
--          op replayed by a mapped graph launch from the capture (what recorded it).
--   columns: event_index, name, short_name, category, device, stream, ts_ns, dur_ns, step,
--            op_name, op_input_dims, op_call (one operator call: op_external_id, else
--            op_ts_ns; for a replayed op, its graph launch and capture operator together),
--            module_path, annotation_path (always the op's own: the annotations around the
--            graph launch say which stage replayed it; graph_replay has the capture's),
--            attribution ('capture': operator and module from the capture; 'launch' when
--            the op's own linkage gives an operator, module or annotation; else NULL)

CREATE OR REPLACE MACRO graph_replay_map(run) AS TABLE
WITH rl AS (
    SELECT event_index, name, graph_position, launch_pid, launch_tid, launch_ts_ns
    FROM gpu_ops
    WHERE run_id = run AND graph_position IS NOT NULL
),
launches AS (
    SELECT launch_pid, launch_tid, launch_ts_ns, count(*) AS ops
    FROM rl GROUP BY launch_pid, launch_tid, launch_ts_ns
),
caps AS (
    SELECT n.run_id, n.capture, any_value(n.capture_ts_ns) AS capture_ts_ns, count(*) AS nodes,
           count(n.kernel_name) AS named_nodes
    FROM graph_nodes n
    JOIN runs r ON r.run_id = n.run_id
    WHERE r.job = (SELECT job FROM runs WHERE run_id = run)
    GROUP BY n.run_id, n.capture
),
cand AS (
    SELECT l.*, c.run_id AS capture_run_id, c.capture, c.capture_ts_ns, c.nodes, c.named_nodes
    FROM launches l JOIN caps c ON c.nodes = l.ops
),
score AS (
    SELECT c.launch_pid, c.launch_tid, c.launch_ts_ns, any_value(c.ops) AS ops,
           c.capture_run_id, c.capture, any_value(c.capture_ts_ns) AS capture_ts_ns,
           any_value(c.nodes) AS nodes, any_value(c.named_nodes) AS named_nodes,
           count(*) FILTER (WHERE n.kernel_name = rl.name) AS name_matches
    FROM cand c
    JOIN rl ON rl.launch_pid IS NOT DISTINCT FROM c.launch_pid
           AND rl.launch_tid IS NOT DISTINCT FROM c.launch_tid
           AND rl.launch_ts_ns = c.launch_ts_ns
    JOIN graph_nodes n ON n.run_id = c.capture_run_id AND n.capture = c.capture
                      AND n.position = rl.graph_position
    GROUP BY c.launch_pid, c.launch_tid, c.launch_ts_ns, c.capture_run_id, c.capture
)
SELECT launch_pid, launch_tid, launch_ts_ns, ops, capture_run_id, capture, nodes,
       name_matches, named_nodes
FROM score
QUALIFY row_number() OVER (
    PARTITION BY launch_pid, launch_tid, launch_ts_ns
    ORDER BY name_matches DESC, coalesce(capture_ts_ns <= launch_ts_ns, false) DESC,
             capture_ts_ns DESC, capture_run_id, capture) = 1;

CREATE OR REPLACE MACRO graph_replay(run) AS TABLE
SELECT g.event_index, g.graph_position, g.launch_ts_ns, m.capture_run_id, m.capture,
       n.kernel_name, n.kernel_name = g.name AS name_match, n.op_name, n.op_ts_ns,
       n.op_external_id, n.op_input_dims, n.module_path, n.annotation_path
FROM gpu_ops g
JOIN graph_replay_map(run) m
    ON m.launch_pid IS NOT DISTINCT FROM g.launch_pid
   AND m.launch_tid IS NOT DISTINCT FROM g.launch_tid AND m.launch_ts_ns = g.launch_ts_ns
JOIN graph_nodes n
    ON n.run_id = m.capture_run_id AND n.capture = m.capture AND n.position = g.graph_position
WHERE g.run_id = run AND g.graph_position IS NOT NULL;

CREATE OR REPLACE MACRO graph_launches(run) AS TABLE
WITH l AS (
    SELECT any_value(launch_name) AS launch_name, launch_pid, launch_tid, launch_ts_ns,
           any_value(launch_dur_ns) AS launch_dur_ns, count(*) AS ops, min(ts_ns) AS first_ns,
           max(ts_ns + dur_ns) AS end_ns, CAST(sum(dur_ns) AS BIGINT) AS gpu_ns
    FROM gpu_ops
    WHERE run_id = run AND graph_position IS NOT NULL
    GROUP BY launch_pid, launch_tid, launch_ts_ns
)
SELECT l.launch_name, l.launch_pid, l.launch_tid, l.launch_ts_ns, l.launch_dur_ns, l.ops,
       l.first_ns, l.end_ns, l.first_ns - l.launch_ts_ns AS launch_to_first_ns,
       l.end_ns - l.first_ns AS gpu_span_ns, l.gpu_ns, m.capture_run_id, m.capture,
       m.name_matches, m.named_nodes
FROM l
LEFT JOIN graph_replay_map(run) m
    ON m.launch_pid IS NOT DISTINCT FROM l.launch_pid
   AND m.launch_tid IS NOT DISTINCT FROM l.launch_tid AND m.launch_ts_ns = l.launch_ts_ns
ORDER BY l.launch_ts_ns;

CREATE OR REPLACE MACRO gpu_ops_attributed(run) AS TABLE
SELECT g.event_index, g.name, g.short_name, g.category, g.device, g.stream, g.ts_ns, g.dur_ns,
       g.step,
       CASE WHEN r.event_index IS NOT NULL THEN r.op_name ELSE g.op_name END AS op_name,
       CASE WHEN r.event_index IS NOT NULL THEN r.op_input_dims ELSE g.op_input_dims END
           AS op_input_dims,
       CASE WHEN r.event_index IS NOT NULL
            THEN CASE WHEN r.op_name IS NOT NULL
                      THEN CAST(g.launch_ts_ns AS VARCHAR) || '/'
                           || CAST(coalesce(r.op_external_id, r.op_ts_ns) AS VARCHAR) END
            ELSE CAST(coalesce(g.op_external_id, g.op_ts_ns) AS VARCHAR) END AS op_call,
       CASE WHEN r.event_index IS NOT NULL THEN r.module_path ELSE g.module_path END
           AS module_path,
       g.annotation_path,
       CASE WHEN r.event_index IS NOT NULL THEN 'capture'
            WHEN coalesce(g.op_name, g.module_path, g.annotation_path) IS NOT NULL
            THEN 'launch' END AS attribution
FROM gpu_ops g
LEFT JOIN graph_replay(run) r ON r.event_index = g.event_index
WHERE g.run_id = run;
