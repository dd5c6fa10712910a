-- 45_graphs.sql: CUDA/HIP graph launches, and replayed kernels mapped to their capture.
--
-- A graph launch (gpu_ops.launch_kind = 'graph': cudaGraphLaunch, hipGraphLaunch) replays
-- many GPU ops under one correlation id; gpu_ops.graph_position numbers them by GPU start.
-- A capture (graph_nodes, from a trace that recorded the graph: *StreamBeginCapture ..
-- *StreamEndCapture) lists the launches recorded into the graph in order, each with the CPU
-- operator, module and annotations that recorded it. A replay is aligned with a capture by
-- kernel name in order (graph_align, tracewh/query/graphalign.py: a longest common subsequence of
-- the replayed ops' names and the nodes' kernel_names), so a node inserted or deleted
-- anywhere on either side leaves the others paired. A capture without kernel names (CUDA:
-- the launch call's args carry only ids) is paired by position when it has exactly as many
-- nodes as the launch replayed ops, and not at all otherwise: nothing is guessed.
--
-- graph_replay_map(run)  (table macro)
--   grain: one row per graph launch of run `run` (a launch call, by pid, tid and start)
--          that some capture of the same job (runs.job, run `run` included) matches.
--   columns: launch_pid, launch_tid, launch_ts_ns, ops (GPU ops it replayed), capture_run_id,
--            capture, nodes (the capture's nodes), named_nodes (nodes with a kernel_name),
--            node_of (INTEGER[]: entry p is the node position the op at graph_position p
--            is paired with, NULL where none), paired_ops (ops paired with a node),
--            name_matches (paired ops whose node's kernel_name equals the op's name: the
--            matched ops), match_quality (name_matches / greatest(ops, nodes), 0..1: 1 is
--            an exact one-to-one match), align_method ('name': aligned by kernel name;
--            'position': the capture has no kernel names and as many nodes as ops)
--   candidates: captures whose node count is within max(16, 10% of ops) of the launch's
--          ops (or equal, for captures without names); a named capture is kept when at
--          least half of greatest(ops, nodes) are matched.
--   match: of several captures, the one with the most name_matches, then the most
--          paired_ops, then the latest capture that began before the launch, then the
--          lowest run_id and capture.
--
-- graph_replay(run)  (table macro)
--   grain: one row per GPU op of run `run` replayed by a mapped graph launch and paired
--          with a node (graph_replay_map.node_of); unpaired ops have no row.
--   columns: event_index, graph_position, launch_ts_ns, capture_run_id, capture,
--            kernel_name (of the node), name_match (kernel_name = the op's name; NULL
--            without a kernel_name), op_name, op_ts_ns, op_external_id, op_input_dims,
--            module_path, annotation_path (of the node: what recorded it in the capture)
--
-- graph_launches(run)  (table macro)
--   grain: one row per graph launch of run `run`.
--   columns: launch_name, launch_pid, launch_tid, launch_ts_ns, launch_dur_ns, ops,
--            first_ts_ns (first replayed op start: an instant), end_ns (last replayed op end:
--            an instant), launch_to_first_ns (first_ts_ns - launch_ts_ns: the launch latency
--            of a graph), gpu_span_ns (end_ns - first_ts_ns), gpu_ns (sum of the replayed ops' durations), capture_run_id, capture,
--            nodes, name_matches, named_nodes, paired_ops, match_quality, align_method (as in
--            graph_replay_map; NULL when no capture matches)
--
-- graph_match(run)  (table macro)
--   grain: one row for run `run`: how well its graph launches map to captures (what every
--          screen showing capture-derived attribution reports beside it).
--   columns: graph_launches, replayed_ops (GPU ops replayed by graph launches),
--            mapped_launches (launches some capture matches), paired_ops (replayed ops
--            paired with a capture node), name_matches (paired by equal kernel name),
--            position_ops (paired by position, the capture having no kernel names: not
--            checked), unpaired_ops (replayed_ops - paired_ops: they keep their own launch's
--            attribution), match_quality (sum of name_matches / sum of greatest(ops, nodes)
--            over mapped launches, 0..1; NULL when none is mapped), min_match_quality (the
--            worst launch's match_quality)
--
-- gpu_ops_attributed(run)  (table macro)
--   grain: one row per GPU op of run `run`: its attribution, from its own launch, or for an
--          op replayed by a mapped graph launch from the capture (what recorded it).
--   columns: event_index, name, short_name, category, device, stream, ts_ns, dur_ns, step,
--            op_name, op_input_dims, op_call (one operator call: op_external_id, else
--            op_ts_ns; for a replayed op, its graph launch and capture operator together),
--            module_path, annotation_path (always the op's own: the annotations around the
--            graph launch say which stage replayed it; graph_replay has the capture's),
--            attribution ('capture': operator and module from the capture, for ops paired
--            with a node; 'launch' when the op's own linkage gives an operator, module or
--            annotation, which is also the fallback for replayed ops left unpaired; else NULL)

CREATE OR REPLACE MACRO graph_replay_map(run) AS TABLE
WITH launches AS (
    SELECT launch_pid, launch_tid, launch_ts_ns, count(*) AS ops,
           list(name ORDER BY graph_position) AS names
    FROM gpu_ops
    WHERE run_id = run AND graph_position IS NOT NULL
    GROUP BY launch_pid, launch_tid, launch_ts_ns
),
caps AS (
    SELECT n.run_id, n.capture, any_value(n.capture_ts_ns) AS capture_ts_ns, count(*) AS nodes,
           count(n.kernel_name) AS named_nodes, list(n.kernel_name ORDER BY n.position) AS kernels
    FROM graph_nodes n
    JOIN runs r ON r.run_id = n.run_id
    WHERE r.job = (SELECT job FROM runs WHERE run_id = run)
    GROUP BY n.run_id, n.capture
),
seqs AS (
    SELECT DISTINCT names, ops FROM launches
),
pairs AS (
    SELECT s.names, c.run_id AS capture_run_id, c.capture, c.capture_ts_ns, c.nodes,
           c.named_nodes, graph_align(s.names, c.kernels) AS node_of
    FROM seqs s
    JOIN caps c ON c.nodes = s.ops
               OR (c.named_nodes > 0 AND abs(c.nodes - s.ops) <= greatest(16, s.ops // 10))
),
scored AS (
    SELECT p.*,
           len(list_filter(node_of, lambda x: x IS NOT NULL)) AS paired_ops,
           CASE WHEN named_nodes = 0 THEN 0
                ELSE len(list_filter(node_of, lambda x: x IS NOT NULL)) END AS name_matches
    FROM pairs p
)
SELECT l.launch_pid, l.launch_tid, l.launch_ts_ns, l.ops, s.capture_run_id, s.capture, s.nodes,
       s.named_nodes, s.node_of, s.paired_ops, s.name_matches,
       s.name_matches / greatest(l.ops, s.nodes) AS match_quality,
       CASE WHEN s.named_nodes = 0 THEN 'position' ELSE 'name' END AS align_method
FROM launches l
JOIN scored s ON s.names = l.names
WHERE s.paired_ops > 0
  AND (s.named_nodes = 0 OR 2 * s.name_matches >= greatest(l.ops, s.nodes))
QUALIFY row_number() OVER (
    PARTITION BY l.launch_pid, l.launch_tid, l.launch_ts_ns
    ORDER BY s.name_matches DESC, s.paired_ops DESC,
             coalesce(s.capture_ts_ns <= l.launch_ts_ns, false) DESC,
             s.capture_ts_ns DESC, s.capture_run_id, s.capture) = 1;

CREATE OR REPLACE MACRO graph_replay(run) AS TABLE
SELECT g.event_index, g.graph_position, g.launch_ts_ns, m.capture_run_id, m.capture,
       n.kernel_name, n.kernel_name = g.name AS name_match, n.op_name, n.op_ts_ns,
       n.op_external_id, n.op_input_dims, n.module_path, n.annotation_path
FROM gpu_ops g
JOIN graph_replay_map(run) m
    ON m.launch_pid IS NOT DISTINCT FROM g.launch_pid
   AND m.launch_tid IS NOT DISTINCT FROM g.launch_tid AND m.launch_ts_ns = g.launch_ts_ns
JOIN graph_nodes n
    ON n.run_id = m.capture_run_id AND n.capture = m.capture
   AND n.position = m.node_of[g.graph_position]
WHERE g.run_id = run AND g.graph_position IS NOT NULL;

CREATE OR REPLACE MACRO graph_launches(run) AS TABLE
WITH l AS (
    SELECT any_value(launch_name) AS launch_name, launch_pid, launch_tid, launch_ts_ns,
           any_value(launch_dur_ns) AS launch_dur_ns, count(*) AS ops, min(ts_ns) AS first_ts_ns,
           max(ts_ns + dur_ns) AS end_ns, CAST(sum(dur_ns) AS BIGINT) AS gpu_ns
    FROM gpu_ops
    WHERE run_id = run AND graph_position IS NOT NULL
    GROUP BY launch_pid, launch_tid, launch_ts_ns
)
SELECT l.launch_name, l.launch_pid, l.launch_tid, l.launch_ts_ns, l.launch_dur_ns, l.ops,
       l.first_ts_ns, l.end_ns, l.first_ts_ns - l.launch_ts_ns AS launch_to_first_ns,
       l.end_ns - l.first_ts_ns AS gpu_span_ns, l.gpu_ns, m.capture_run_id, m.capture,
       m.nodes, m.name_matches, m.named_nodes, m.paired_ops, m.match_quality, m.align_method
FROM l
LEFT JOIN graph_replay_map(run) m
    ON m.launch_pid IS NOT DISTINCT FROM l.launch_pid
   AND m.launch_tid IS NOT DISTINCT FROM l.launch_tid AND m.launch_ts_ns = l.launch_ts_ns
ORDER BY l.launch_ts_ns;

CREATE OR REPLACE MACRO graph_match(run) AS TABLE
WITH l AS (
    SELECT launch_pid, launch_tid, launch_ts_ns, count(*) AS ops
    FROM gpu_ops
    WHERE run_id = run AND graph_position IS NOT NULL
    GROUP BY launch_pid, launch_tid, launch_ts_ns
)
SELECT count(*) AS graph_launches, coalesce(sum(l.ops), 0)::BIGINT AS replayed_ops,
       count(m.capture) AS mapped_launches,
       coalesce(sum(m.paired_ops), 0)::BIGINT AS paired_ops,
       coalesce(sum(m.name_matches), 0)::BIGINT AS name_matches,
       coalesce(sum(m.paired_ops) FILTER (WHERE m.align_method = 'position'), 0)::BIGINT
           AS position_ops,
       (coalesce(sum(l.ops), 0) - coalesce(sum(m.paired_ops), 0))::BIGINT AS unpaired_ops,
       sum(m.name_matches) / sum(greatest(l.ops, m.nodes)) AS match_quality,
       min(m.match_quality) AS min_match_quality
FROM l
LEFT JOIN graph_replay_map(run) m
    ON m.launch_pid IS NOT DISTINCT FROM l.launch_pid
   AND m.launch_tid IS NOT DISTINCT FROM l.launch_tid AND m.launch_ts_ns = l.launch_ts_ns;

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
