-- Ingest-time derivations over one run's staging tables (s_ev, s_gev, s_gpu, s_py,
-- s_inst, s_cnt, s_flow, s_thr; s_ev holds the GPU ops of s_gev too; timestamps
-- still relative to baseTimeNanoseconds).
-- Not an analysis view: run by tracewh.ingest for each trace (or once for a group of
-- tiny traces), in one DuckDB connection that spills to disk, so linkage stays within
-- bounded memory.
--
-- file_no: the trace of a staged row (0 for a single trace; tiny traces ingested together
-- are staged side by side, their event indices offset so event_index is unique across
-- them). Every match on a trace's values (pid/tid, correlation, flow and External ids,
-- steps, captures) is within one file_no; event_index joins need no file key.
--
-- t_opts   one row: the ingest's options (step_marker: the --step-marker pattern or NULL)
-- t_steps  one row per step: ProfilerStep#N span (the longest per N), or step marker span
-- t_rt     one row per runtime / driver API call (launches, syncs, ...)
-- t_gpu0   one row per GPU op: the columns linkage needs
-- t_gpu    one row per GPU op with launch_index (event_index of its runtime call)
--          and link_method: correlation id, then ac2g flow, then External id
-- t_mod   one row per nn.Module span (python_function `nn.Module: X`)
-- t_ann   one row per user_annotation span but ProfilerStep#N
-- t_launch one row per linked launch with its innermost enclosing CPU operator
--          (op_index) and the path ids of its enclosing nn.Module spans (module_path_id)
--          and user annotations (annotation_path_id)
-- t_mod_tree one row per nn.Module span: its path (outermost first), depth and parent
-- t_ann_tree the same for each user annotation
-- t_paths  one row per distinct module or annotation path: path_id, path
-- t_op     one row per CPU operator enclosing a launch: name, times, input dims
-- t_gpu_place one row per GPU op: launch_index, link_method, place_ts (launch start
--          where linked, else its own start)
-- t_gpu_step  one row per GPU op: the step its place falls in (NULL if none)
-- t_gpu_link0 one row per GPU op: place, step, launch call
-- t_gpu_link1 t_gpu_link0 with the event_index of the launch's enclosing operator, its
--          module and annotation path ids, and the op's place in its graph launch
-- t_rt_names  one row per distinct runtime call name: launch_kind, begins/ends a capture
-- t_capture   one row per graph capture (BeginCapture to EndCapture on one thread)
-- t_captured  one row per launch recorded in a capture, with its position
-- t_graph_pos one row per GPU op replayed by a graph launch: graph_position
-- t_graph_nodes one row per captured launch with its operator, module, annotations
-- t_link_counts  the GPU op, runtime call, unlinked and HIP call counts
--
-- 11_link_out.sql and 12_op_out.sql order t_gpu_link1 and t_op by event_index;
-- tracewh.ingest writes them to Parquet files of the staging folder that the views
-- t_gpu_link and t_op read (21_out_gpu_ops.sql reads them in event_index slices,
-- with the typed args), so the output queries keep no linkage table in DuckDB's
-- memory, and no join here holds the operators' names against every GPU op.

-- Steps: without a step marker (t_opts.step_marker NULL), the ProfilerStep#N spans (the
-- longest per N); with one, the cpu_op / user_annotation spans whose name contains the
-- marker or matches it as a glob, but those inside another matching span of their thread
-- (an earlier-starting one, longer first, ending at or after their end), numbered from 0
-- in start order.
CREATE OR REPLACE TEMP TABLE t_steps AS
WITH profiler AS (
    SELECT DISTINCT ON (file_no, step) file_no, step, name, pid, tid, ts_ns, dur_ns
    FROM (
        SELECT TRY_CAST(regexp_extract(name, '^ProfilerStep#(\d+)$', 1) AS BIGINT) AS step,
               file_no, name, pid, tid, ts_ns, dur_ns, event_index
        FROM s_ev
        WHERE name LIKE 'ProfilerStep#%'
          AND coalesce(cat, '') NOT IN ('gpu_user_annotation')
          AND ts_ns IS NOT NULL AND dur_ns IS NOT NULL
          AND (SELECT step_marker FROM t_opts) IS NULL
    )
    WHERE step IS NOT NULL
    ORDER BY file_no, step, dur_ns DESC, event_index
),
marked AS (
    SELECT e.file_no, e.name, e.pid, e.tid, e.ts_ns, e.dur_ns, e.event_index,
           max(e.ts_ns + e.dur_ns) OVER (
               PARTITION BY e.file_no, e.pid, e.tid ORDER BY e.ts_ns, e.dur_ns DESC, e.event_index
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS outer_end
    FROM s_ev e, t_opts o
    WHERE o.step_marker IS NOT NULL AND e.cat IN ('cpu_op', 'user_annotation', 'Operator')
      AND (contains(e.name, o.step_marker) OR e.name GLOB o.step_marker)
      AND e.ts_ns IS NOT NULL AND e.dur_ns IS NOT NULL
)
SELECT * FROM profiler
UNION ALL
SELECT file_no, row_number() OVER (PARTITION BY file_no ORDER BY ts_ns, event_index) - 1,
       name, pid, tid, ts_ns, dur_ns
FROM marked
WHERE outer_end IS NULL OR outer_end < ts_ns + dur_ns;

CREATE OR REPLACE TEMP TABLE t_rt AS
SELECT file_no, event_index, name, pid, tid, ts_ns, dur_ns, correlation, external_id
FROM s_ev
WHERE cat IN ('cuda_runtime', 'cuda_driver', 'Runtime', 'mtia_runtime', 'hip_runtime');

CREATE OR REPLACE TEMP TABLE t_gpu0 AS
SELECT file_no, event_index, cat, name, pid, tid, ts_ns, correlation, external_id
FROM s_gev
WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'Kernel', 'Memcpy', 'Memset', 'mtia_ccp_events');

-- 1. correlation id (one runtime call per id: the earliest)
CREATE OR REPLACE TEMP TABLE t_by_corr AS
SELECT g.event_index AS gpu_index, r.event_index AS launch_index
FROM t_gpu0 g
JOIN (
    SELECT DISTINCT ON (file_no, correlation) file_no, correlation, event_index
    FROM t_rt WHERE correlation IS NOT NULL
    ORDER BY file_no, correlation, ts_ns, event_index
) r ON g.file_no = r.file_no AND g.correlation = r.correlation;

-- 2. flow arrows: 'f' bound to the GPU op (same track and start), 's' with the same id
--    bound to the runtime call (same track and start)
CREATE OR REPLACE TEMP TABLE t_by_flow AS
SELECT DISTINCT ON (g.event_index) g.event_index AS gpu_index, r.event_index AS launch_index
FROM t_gpu0 g
ANTI JOIN t_by_corr c ON c.gpu_index = g.event_index
JOIN s_flow f ON f.ph = 'f' AND f.file_no = g.file_no AND f.pid = g.pid AND f.tid = g.tid AND f.ts_ns = g.ts_ns
             AND f.cat IN ('ac2g', 'async_gpu', 'async_cpu_to_gpu')
JOIN s_flow s ON s.ph = 's' AND s.file_no = f.file_no AND s.flow_id = f.flow_id
             AND s.cat = f.cat
JOIN t_rt r ON r.file_no = s.file_no AND r.pid = s.pid AND r.tid = s.tid AND r.ts_ns = s.ts_ns
ORDER BY g.event_index, r.event_index;

-- 3. External id: the latest runtime call with the same External id starting before the op
CREATE OR REPLACE TEMP TABLE t_by_ext AS
SELECT g.event_index AS gpu_index, r.event_index AS launch_index
FROM (
    SELECT * FROM t_gpu0 g
    WHERE external_id IS NOT NULL AND external_id <> 0 AND ts_ns IS NOT NULL
      AND event_index NOT IN (SELECT gpu_index FROM t_by_corr)
      AND event_index NOT IN (SELECT gpu_index FROM t_by_flow)
) g
ASOF JOIN (SELECT * FROM t_rt WHERE external_id IS NOT NULL AND ts_ns IS NOT NULL) r
    ON g.file_no = r.file_no AND g.external_id = r.external_id AND g.ts_ns >= r.ts_ns;

CREATE OR REPLACE TEMP TABLE t_gpu AS
SELECT g.event_index,
       coalesce(c.launch_index, f.launch_index, x.launch_index) AS launch_index,
       CASE WHEN c.launch_index IS NOT NULL THEN 'correlation'
            WHEN f.launch_index IS NOT NULL THEN 'flow'
            WHEN x.launch_index IS NOT NULL THEN 'external_id' END AS link_method
FROM t_gpu0 g
LEFT JOIN t_by_corr c ON c.gpu_index = g.event_index
LEFT JOIN t_by_flow f ON f.gpu_index = g.event_index
LEFT JOIN t_by_ext x ON x.gpu_index = g.event_index;

-- Innermost enclosing CPU operator, and enclosing nn.Module spans, of each launch, without
-- a quadratic range join: on each thread, the nesting depth at time t is the running sum
-- of +1 (span starts) and -1 (span ends) up to t, one sum per kind of span; the span of a
-- kind enclosing t innermost is the last one of that kind that started at that depth
-- before t. Keys: 2*t for ends, 2*t+1 for starts, so a span that ends at t does not
-- enclose a call starting at t, and one starting at t does.
-- CPU operators: aten-level `cpu_op` (legacy `Operator`); annotations are apart (t_ann)
CREATE OR REPLACE TEMP TABLE t_cpu AS
SELECT file_no, event_index, pid, tid, ts_ns, ts_ns + dur_ns AS end_ns
FROM s_ev
WHERE cat IN ('cpu_op', 'Operator')
  AND dur_ns > 0 AND ts_ns IS NOT NULL AND pid IS NOT NULL AND tid IS NOT NULL
  AND name NOT LIKE 'ProfilerStep#%';

-- user annotations (record_function), but the ProfilerStep#N spans (steps have their column)
CREATE OR REPLACE TEMP TABLE t_ann AS
SELECT file_no, event_index, pid, tid, ts_ns, ts_ns + dur_ns AS end_ns, name
FROM s_ev
WHERE cat = 'user_annotation'
  AND dur_ns > 0 AND ts_ns IS NOT NULL AND pid IS NOT NULL AND tid IS NOT NULL
  AND name IS NOT NULL AND name NOT LIKE 'ProfilerStep#%';

-- the nn.Module spans (python_function `nn.Module: X`), names without the prefix
CREATE OR REPLACE TEMP TABLE t_mod AS
SELECT file_no, event_index, pid, tid, ts_ns, ts_ns + dur_ns AS end_ns,
       substr(name, 12) AS name
FROM s_py
WHERE starts_with(name, 'nn.Module: ')
  AND dur_ns > 0 AND ts_ns IS NOT NULL AND pid IS NOT NULL AND tid IS NOT NULL;

-- what each distinct runtime call name enqueues (tw_launch_kind, 05_names.sql) and whether
-- it begins or ends a graph capture: classified once per name, joined back
CREATE OR REPLACE TEMP TABLE t_rt_names AS
SELECT name, tw_launch_kind(name) AS launch_kind,
       regexp_matches(name, '^(?:cuda|hip)StreamBeginCapture') AS begins_capture,
       regexp_matches(name, '^(?:cuda|hip)StreamEndCapture') AS ends_capture
FROM (SELECT DISTINCT name FROM t_rt WHERE name IS NOT NULL);

-- CUDA/HIP graph captures: a (cuda|hip)StreamBeginCapture call and the next call on its
-- thread being an EndCapture; the launches between them on that thread are the graph's
-- nodes, in launch order (what a replay of the graph runs, in that order)
CREATE OR REPLACE TEMP TABLE t_capture AS
WITH b AS (
    SELECT r.file_no, r.event_index, r.pid, r.tid, r.ts_ns, n.begins_capture AS is_begin,
           lead(r.ts_ns) OVER w AS next_ts, lead(n.begins_capture) OVER w AS next_begin
    FROM t_rt r
    JOIN t_rt_names n ON n.name = r.name AND (n.begins_capture OR n.ends_capture)
    WHERE r.ts_ns IS NOT NULL AND r.pid IS NOT NULL AND r.tid IS NOT NULL
    WINDOW w AS (PARTITION BY r.file_no, r.pid, r.tid ORDER BY r.ts_ns, r.event_index)
)
SELECT file_no, row_number() OVER (PARTITION BY file_no ORDER BY ts_ns, event_index) AS capture,
       pid, tid,
       ts_ns AS begin_ns, next_ts AS end_ns
FROM b
WHERE is_begin AND NOT next_begin;

CREATE OR REPLACE TEMP TABLE t_captured AS
SELECT c.file_no, c.capture, c.begin_ns, r.event_index AS launch_index, r.name, r.ts_ns,
       n.launch_kind,
       row_number() OVER (PARTITION BY c.file_no, c.capture ORDER BY r.ts_ns, r.event_index)
           AS position
FROM t_capture c
JOIN t_rt r ON r.file_no = c.file_no AND r.pid = c.pid AND r.tid = c.tid AND r.ts_ns > c.begin_ns AND r.ts_ns < c.end_ns
JOIN t_rt_names n ON n.name = r.name
WHERE n.launch_kind IN ('kernel', 'memcpy', 'memset');

-- the launches to attribute: those linked to GPU ops and those recorded in a capture
CREATE OR REPLACE TEMP TABLE t_launch0 AS
SELECT r.file_no, r.event_index AS launch_index, r.pid, r.tid, r.ts_ns, 2 * r.ts_ns + 1 AS qk
FROM t_rt r
WHERE r.ts_ns IS NOT NULL AND r.pid IS NOT NULL AND r.tid IS NOT NULL
  AND (r.event_index IN (SELECT launch_index FROM t_gpu WHERE launch_index IS NOT NULL)
       OR r.event_index IN (SELECT launch_index FROM t_captured));

-- One sweep per thread over span starts (+1), span ends (-1) and launches (0), ordered
-- by key; at the same key, starts come before launches (a span starting when a launch
-- does encloses it) and several starts longest (outermost) first. kind: o (CPU
-- operator), m (module span), a (user annotation), l (launch). The running sum of a kind
-- at a start of that kind is its level; at a launch, the depth there. End rows are dropped.
-- A thread's starts and ends cancel (each span adds +1 and -1 on its own thread), so a running
-- sum over every thread in (file_no, pid, tid, ...) order equals each thread's own. A linkage
-- group (variable tw_one_window true: tracewh.ingest.group) sums in one window partition
-- (its thousands of threads' partitions were most of this statement: ~3x less CPU on the
-- nightly folder, docs/performance.md, tenth pass); one trace keeps a partition per thread,
-- which DuckDB's threads share (one partition was 1.13x the time of a 72 MB trace's ingest).
CREATE OR REPLACE TEMP TABLE t_sweep AS
SELECT file_no, pid, tid, k, kind, event_index, end_ns, depth_o, depth_m, depth_a
FROM (
    SELECT *,  -- the levels as INTEGER (a sum's HUGEINT is 16 bytes a value, 3 a row)
           CAST(sum(CASE WHEN kind = 'o' THEN d ELSE 0 END) OVER w AS INTEGER) AS depth_o,
           CAST(sum(CASE WHEN kind = 'm' THEN d ELSE 0 END) OVER w AS INTEGER) AS depth_m,
           CAST(sum(CASE WHEN kind = 'a' THEN d ELSE 0 END) OVER w AS INTEGER) AS depth_a
    FROM (
        SELECT file_no, pid, tid, 2 * ts_ns + 1 AS k, 'o' AS kind, false AS launch, 1 AS d,
               end_ns AS o, event_index, end_ns
        FROM t_cpu
        UNION ALL
        SELECT file_no, pid, tid, 2 * end_ns, 'o', false, -1, 0, NULL, NULL FROM t_cpu
        UNION ALL
        SELECT file_no, pid, tid, 2 * ts_ns + 1, 'm', false, 1, end_ns, event_index, end_ns FROM t_mod
        UNION ALL
        SELECT file_no, pid, tid, 2 * end_ns, 'm', false, -1, 0, NULL, NULL FROM t_mod
        UNION ALL
        SELECT file_no, pid, tid, 2 * ts_ns + 1, 'a', false, 1, end_ns, event_index, end_ns FROM t_ann
        UNION ALL
        SELECT file_no, pid, tid, 2 * end_ns, 'a', false, -1, 0, NULL, NULL FROM t_ann
        UNION ALL
        SELECT file_no, pid, tid, qk, 'l', true, 0, 0, launch_index, NULL FROM t_launch0
    )
    WINDOW w AS (PARTITION BY CASE WHEN getvariable('tw_one_window') THEN 0 ELSE file_no END,
                              CASE WHEN getvariable('tw_one_window') THEN 0 ELSE pid END,
                              CASE WHEN getvariable('tw_one_window') THEN 0 ELSE tid END
                 ORDER BY file_no, pid, tid, k, launch, o DESC, event_index
                 ROWS UNBOUNDED PRECEDING)
)
WHERE d >= 0;

CREATE OR REPLACE TEMP TABLE t_launch1 AS
SELECT l.event_index AS launch_index, l0.ts_ns,
       CASE WHEN o.end_ns > l0.ts_ns THEN o.event_index END AS op_index,
       CASE WHEN m.end_ns > l0.ts_ns THEN m.event_index END AS module_index,
       CASE WHEN a.end_ns > l0.ts_ns THEN a.event_index END AS ann_index
FROM (FROM t_sweep WHERE kind = 'l') l
JOIN t_launch0 l0 ON l0.launch_index = l.event_index
ASOF LEFT JOIN (FROM t_sweep WHERE kind = 'o') o
    ON o.file_no = l.file_no AND o.pid = l.pid AND o.tid = l.tid
       AND o.depth_o = l.depth_o AND l.k >= o.k
ASOF LEFT JOIN (FROM t_sweep WHERE kind = 'm') m
    ON m.file_no = l.file_no AND m.pid = l.pid AND m.tid = l.tid
       AND m.depth_m = l.depth_m AND l.k >= m.k
ASOF LEFT JOIN (FROM t_sweep WHERE kind = 'a') a
    ON a.file_no = l.file_no AND a.pid = l.pid AND a.tid = l.tid
       AND a.depth_a = l.depth_a AND l.k >= a.k;

-- module spans (m) and annotations (a): each one's enclosing span of its kind (the last one
-- of that kind started one level up)
CREATE OR REPLACE TEMP TABLE t_span_parent AS
WITH s AS (
    SELECT kind, file_no, pid, tid, k, event_index, end_ns,
           CASE kind WHEN 'm' THEN depth_m ELSE depth_a END AS lvl
    FROM t_sweep WHERE kind IN ('m', 'a')
)
SELECT c.kind, c.event_index,
       CASE WHEN p.end_ns > (c.k - 1) // 2 THEN p.event_index END AS parent_index
FROM s c
ASOF LEFT JOIN s p
    ON p.kind = c.kind AND p.file_no = c.file_no AND p.pid = c.pid AND p.tid = c.tid AND p.lvl = c.lvl - 1 AND c.k >= p.k;

CREATE OR REPLACE TEMP TABLE t_span AS
SELECT 'm' AS kind, * FROM t_mod UNION ALL SELECT 'a', * FROM t_ann;

-- each module span and annotation with its path (outermost first, names by "/") and
-- depth (1: outermost); t_mod_tree: the module spans (the module_spans table)
CREATE OR REPLACE TEMP TABLE t_span_tree AS
WITH RECURSIVE tree(event_index, parent_index, depth, path) AS (
    SELECT p.event_index, p.parent_index, 1, m.name
    FROM t_span_parent p JOIN t_span m USING (event_index)
    WHERE p.parent_index IS NULL
    UNION ALL
    SELECT c.event_index, c.parent_index, tree.depth + 1, tree.path || '/' || m.name
    FROM t_span_parent c
    JOIN tree ON c.parent_index = tree.event_index
    JOIN t_span m ON m.event_index = c.event_index
)
SELECT m.kind, m.file_no, m.event_index, m.pid, m.tid, m.ts_ns, m.end_ns - m.ts_ns AS dur_ns, m.name,
       t.path, CAST(t.depth AS BIGINT) AS depth, t.parent_index AS parent_event_index
FROM tree t JOIN t_span m USING (event_index);

CREATE OR REPLACE TEMP TABLE t_mod_tree AS
SELECT file_no, event_index, pid, tid, ts_ns, dur_ns, name, path AS module_path, depth,
       parent_event_index
FROM t_span_tree WHERE kind = 'm';

CREATE OR REPLACE TEMP TABLE t_ann_tree AS
SELECT file_no, event_index, pid, tid, ts_ns, dur_ns, name, path AS annotation_path, depth,
       parent_event_index
FROM t_span_tree WHERE kind = 'a';

-- the distinct paths (module and annotation paths), each with an id: gpu_ops rows carry
-- the ids through the linkage and get the text from this small table when written
CREATE OR REPLACE TEMP TABLE t_paths AS
SELECT row_number() OVER (ORDER BY path) AS path_id, path
FROM (SELECT DISTINCT path FROM t_span_tree);

CREATE OR REPLACE TEMP TABLE t_launch AS
SELECT l.launch_index, l.ts_ns, l.op_index, mp.path_id AS module_path_id,
       ap.path_id AS annotation_path_id
FROM t_launch1 l
LEFT JOIN t_span_tree mt ON mt.event_index = l.module_index
LEFT JOIN t_paths mp ON mp.path = mt.path
LEFT JOIN t_span_tree an ON an.event_index = l.ann_index
LEFT JOIN t_paths ap ON ap.path = an.path;
DROP TABLE IF EXISTS t_launch1;
DROP TABLE IF EXISTS t_span_parent;
DROP TABLE IF EXISTS t_span_tree;
DROP TABLE IF EXISTS t_span;
DROP TABLE IF EXISTS t_mod;
DROP TABLE IF EXISTS t_ann;

-- the run window kept by `--steps N` ($lo_ns, $hi_ns relative; NULL: keep everything)
CREATE OR REPLACE TEMP MACRO tw_keep(t, lo, hi) AS
    t IS NULL OR ((lo IS NULL OR t >= lo) AND (hi IS NULL OR t < hi));

-- classification of each distinct GPU op name (sql/05_names.sql rules)
CREATE OR REPLACE TEMP TABLE t_names AS
SELECT cat, name,
       tw_op_kind(cat, name) AS op_kind,
       tw_short_name(name) AS short_name,
       tw_category(name, cat) AS category,
       tw_memcpy_kind(name) AS memcpy_kind
FROM (SELECT DISTINCT cat, name FROM t_gpu0);

-- the CPU operators that enclose a launch (a small build side for 21_out_gpu_ops.sql)
CREATE OR REPLACE TEMP TABLE t_op AS
SELECT e.file_no, e.event_index, e.name, e.ts_ns, e.dur_ns, e.external_id,
       CAST(json_extract(e.args_json, '$."Input Dims"') AS VARCHAR) AS input_dims
FROM s_ev e
SEMI JOIN t_launch l ON l.op_index = e.event_index;

-- the nodes of each captured graph (the graph_nodes table), with what recorded them; the
-- launch's own args (its "kernel" name) are read for the captured launches only
CREATE OR REPLACE TEMP TABLE t_graph_nodes AS
SELECT c.file_no, c.capture, c.begin_ns AS capture_ts_ns, c.position, c.launch_index AS launch_event_index,
       c.name AS launch_name, c.launch_kind, c.ts_ns AS launch_ts_ns, k.kernel_name,
       o.name AS op_name, o.ts_ns AS op_ts_ns, o.external_id AS op_external_id,
       o.input_dims AS op_input_dims, mp.path AS module_path,
       ap.path AS annotation_path
FROM t_captured c
LEFT JOIN (
    SELECT e.event_index, json_extract_string(e.args_json, '$.kernel') AS kernel_name
    FROM s_ev e SEMI JOIN t_captured n ON n.launch_index = e.event_index
) k ON k.event_index = c.launch_index
LEFT JOIN t_launch l ON l.launch_index = c.launch_index
LEFT JOIN t_op o ON o.event_index = l.op_index
LEFT JOIN t_paths mp ON mp.path_id = l.module_path_id
LEFT JOIN t_paths ap ON ap.path_id = l.annotation_path_id;

-- the place of each GPU op (its launch's start where linked) and its ProfilerStep,
-- computed on narrow rows so the output query only needs small hash joins
CREATE OR REPLACE TEMP TABLE t_gpu_place AS
SELECT g0.file_no, g.event_index, g.launch_index, g.link_method,
       coalesce(r.ts_ns, g0.ts_ns) AS place_ts
FROM t_gpu g
JOIN t_gpu0 g0 USING (event_index)
LEFT JOIN t_rt r ON r.event_index = g.launch_index;

CREATE OR REPLACE TEMP TABLE t_gpu_step AS
SELECT p.event_index, CASE WHEN p.place_ts < s.ts_ns + s.dur_ns THEN s.step END AS step
FROM t_gpu_place p
ASOF LEFT JOIN t_steps s ON s.file_no = p.file_no AND p.place_ts >= s.ts_ns;

-- everything gpu_ops adds to an event, one narrow join at a time (each spills alone)
-- each GPU op replayed by a graph launch: its 1-based place among that launch's ops
CREATE OR REPLACE TEMP TABLE t_graph_pos AS
SELECT g.event_index,
       row_number() OVER (PARTITION BY g.launch_index ORDER BY g0.ts_ns, g.event_index)
           AS graph_position
FROM t_gpu g
JOIN t_gpu0 g0 USING (event_index)
JOIN t_rt r ON r.event_index = g.launch_index
JOIN t_rt_names n ON n.name = r.name
WHERE n.launch_kind = 'graph';

CREATE OR REPLACE TEMP TABLE t_gpu_link0 AS
SELECT p.event_index, p.link_method, p.place_ts, st.step, p.launch_index,
       r.name AS launch_name, r.ts_ns AS launch_ts_ns, r.dur_ns AS launch_dur_ns,
       r.pid AS launch_pid, r.tid AS launch_tid, n.launch_kind
FROM t_gpu_place p
LEFT JOIN t_gpu_step st USING (event_index)
LEFT JOIN t_rt r ON r.event_index = p.launch_index
LEFT JOIN t_rt_names n ON n.name = r.name;

CREATE OR REPLACE TEMP TABLE t_gpu_link1 AS
SELECT k.*, l.op_index, l.module_path_id, l.annotation_path_id, gp.graph_position
FROM t_gpu_link0 k
LEFT JOIN t_launch l ON l.launch_index = k.launch_index
LEFT JOIN t_graph_pos gp ON gp.event_index = k.event_index;
DROP TABLE IF EXISTS t_gpu_link0;
DROP TABLE IF EXISTS t_launch;

-- counts for the runs row (30_summary.sql), one row per file_no that has GPU ops, runtime
-- calls or captures (absent: all zero), kept once the tables they come from are dropped
CREATE OR REPLACE TEMP TABLE t_link_counts AS
SELECT file_no,
       count(*) FILTER (WHERE x = 'gpu') AS n_gpu_ops,
       count(*) FILTER (WHERE x = 'rt') AS n_runtime,
       count(*) FILTER (WHERE x = 'gpu' AND unlinked) AS n_unlinked_gpu_ops,
       count(*) FILTER (WHERE x = 'rt' AND hip) AS n_hip_calls,
       count(*) FILTER (WHERE x = 'graph') AS n_graph_ops,
       count(*) FILTER (WHERE x = 'capture') AS n_captures
FROM (
    SELECT g0.file_no, 'gpu' AS x, g.launch_index IS NULL AS unlinked, false AS hip
    FROM t_gpu0 g0 JOIN t_gpu g USING (event_index)
    UNION ALL
    SELECT file_no, 'rt', false, coalesce(starts_with(name, 'hip'), false) FROM t_rt
    UNION ALL
    SELECT g0.file_no, 'graph', false, false FROM t_graph_pos JOIN t_gpu0 g0 USING (event_index)
    UNION ALL
    SELECT file_no, 'capture', false, false FROM t_capture
)
GROUP BY file_no;


-- free everything but t_gpu_link1 and t_op (11_link_out.sql and 12_op_out.sql read
-- them), t_mod_tree, t_ann_tree and t_graph_nodes (module_spans, annotation_spans,
-- graph_nodes) and the small t_steps, t_names, t_paths, t_link_counts
DROP TABLE IF EXISTS t_by_corr;
DROP TABLE IF EXISTS t_by_flow;
DROP TABLE IF EXISTS t_by_ext;
DROP TABLE IF EXISTS t_cpu;
DROP TABLE IF EXISTS t_sweep;
DROP TABLE IF EXISTS t_launch0;
DROP TABLE IF EXISTS t_graph_pos;
DROP TABLE IF EXISTS t_captured;
DROP TABLE IF EXISTS t_capture;
DROP TABLE IF EXISTS t_rt_names;
DROP TABLE IF EXISTS t_gpu_place;
DROP TABLE IF EXISTS t_gpu_step;
DROP TABLE IF EXISTS t_gpu;
DROP TABLE IF EXISTS t_gpu0;
DROP TABLE IF EXISTS t_rt;
