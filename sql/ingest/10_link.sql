-- Ingest-time derivations over one run's staging tables (s_ev, s_gev, s_gpu, s_py,
-- s_inst, s_cnt, s_flow, s_thr; s_ev holds the GPU ops of s_gev too; timestamps
-- still relative to baseTimeNanoseconds).
-- Not an analysis view: run by tracewh.ingest for each trace, in one DuckDB
-- connection that spills to disk, so linkage stays within bounded memory.
--
-- t_steps  one row per ProfilerStep#N span (the longest span per N)
-- t_rt     one row per runtime / driver API call (launches, syncs, ...)
-- t_gpu0   one row per GPU op: the columns linkage needs
-- t_gpu    one row per GPU op with launch_index (event_index of its runtime call)
--          and link_method: correlation id, then ac2g flow, then External id
-- t_mod   one row per nn.Module span (python_function `nn.Module: X`)
-- t_launch one row per linked launch with its innermost enclosing CPU operator
--          (op_index) and the path id of its enclosing nn.Module spans (module_path_id)
-- t_mod_tree one row per nn.Module span: its path (outermost first), depth and parent
-- t_paths  one row per distinct module path: path_id, path
-- t_op     one row per CPU operator enclosing a launch: name, times, input dims
-- t_gpu_place one row per GPU op: launch_index, link_method, place_ts (launch start
--          where linked, else its own start)
-- t_gpu_step  one row per GPU op: the ProfilerStep its place falls in (NULL if none)
-- t_gpu_link0 one row per GPU op: place, step, launch call
-- t_gpu_link1 t_gpu_link0 with the event_index of the launch's enclosing operator and
--          its module path id
-- t_link_counts  the GPU op, runtime call, unlinked and HIP call counts
--
-- 11_link_out.sql and 12_op_out.sql order t_gpu_link1 and t_op by event_index;
-- tracewh.ingest writes them to Parquet files of the staging folder that the views
-- t_gpu_link and t_op read (21_out_gpu_ops.sql reads them in event_index slices,
-- with the typed args), so the output queries keep no linkage table in DuckDB's
-- memory, and no join here holds the operators' names against every GPU op.

CREATE OR REPLACE TEMP TABLE t_steps AS
SELECT DISTINCT ON (step) step, name, pid, tid, ts_ns, dur_ns
FROM (
    SELECT TRY_CAST(regexp_extract(name, '^ProfilerStep#(\d+)$', 1) AS BIGINT) AS step,
           name, pid, tid, ts_ns, dur_ns, event_index
    FROM s_ev
    WHERE name LIKE 'ProfilerStep#%'
      AND coalesce(cat, '') NOT IN ('gpu_user_annotation')
      AND ts_ns IS NOT NULL AND dur_ns IS NOT NULL
)
WHERE step IS NOT NULL
ORDER BY step, dur_ns DESC, event_index;

CREATE OR REPLACE TEMP TABLE t_rt AS
SELECT event_index, name, pid, tid, ts_ns, dur_ns, correlation, external_id
FROM s_ev
WHERE cat IN ('cuda_runtime', 'cuda_driver', 'Runtime', 'mtia_runtime', 'hip_runtime');

CREATE OR REPLACE TEMP TABLE t_gpu0 AS
SELECT event_index, cat, name, pid, tid, ts_ns, correlation, external_id
FROM s_gev
WHERE cat IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'Kernel', 'Memcpy', 'Memset', 'mtia_ccp_events');

-- 1. correlation id (one runtime call per id: the earliest)
CREATE OR REPLACE TEMP TABLE t_by_corr AS
SELECT g.event_index AS gpu_index, r.event_index AS launch_index
FROM t_gpu0 g
JOIN (
    SELECT DISTINCT ON (correlation) correlation, event_index
    FROM t_rt WHERE correlation IS NOT NULL
    ORDER BY correlation, ts_ns, event_index
) r ON g.correlation = r.correlation;

-- 2. flow arrows: 'f' bound to the GPU op (same track and start), 's' with the same id
--    bound to the runtime call (same track and start)
CREATE OR REPLACE TEMP TABLE t_by_flow AS
SELECT DISTINCT ON (g.event_index) g.event_index AS gpu_index, r.event_index AS launch_index
FROM t_gpu0 g
ANTI JOIN t_by_corr c ON c.gpu_index = g.event_index
JOIN s_flow f ON f.ph = 'f' AND f.pid = g.pid AND f.tid = g.tid AND f.ts_ns = g.ts_ns
             AND f.cat IN ('ac2g', 'async_gpu', 'async_cpu_to_gpu')
JOIN s_flow s ON s.ph = 's' AND s.flow_id = f.flow_id AND s.cat = f.cat
JOIN t_rt r ON r.pid = s.pid AND r.tid = s.tid AND r.ts_ns = s.ts_ns
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
    ON g.external_id = r.external_id AND g.ts_ns >= r.ts_ns;

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
CREATE OR REPLACE TEMP TABLE t_cpu AS
SELECT event_index, pid, tid, ts_ns, ts_ns + dur_ns AS end_ns
FROM s_ev
WHERE cat IN ('cpu_op', 'user_annotation', 'Operator')
  AND dur_ns > 0 AND ts_ns IS NOT NULL AND pid IS NOT NULL AND tid IS NOT NULL
  AND name NOT LIKE 'ProfilerStep#%';

-- the nn.Module spans (python_function `nn.Module: X`), names without the prefix
CREATE OR REPLACE TEMP TABLE t_mod AS
SELECT event_index, pid, tid, ts_ns, ts_ns + dur_ns AS end_ns, substr(name, 12) AS name
FROM s_py
WHERE starts_with(name, 'nn.Module: ')
  AND dur_ns > 0 AND ts_ns IS NOT NULL AND pid IS NOT NULL AND tid IS NOT NULL;

CREATE OR REPLACE TEMP TABLE t_launch0 AS
SELECT r.event_index AS launch_index, r.pid, r.tid, r.ts_ns, 2 * r.ts_ns + 1 AS qk
FROM t_rt r
WHERE r.ts_ns IS NOT NULL AND r.pid IS NOT NULL AND r.tid IS NOT NULL
  AND r.event_index IN (SELECT launch_index FROM t_gpu WHERE launch_index IS NOT NULL);

-- One sweep per thread over span starts (+1), span ends (-1) and launches (0), ordered
-- by key; at the same key, starts come before launches (a span starting when a launch
-- does encloses it) and several starts longest (outermost) first. kind: o (CPU
-- operator), m (module span), l (launch). The running sum of a kind at a start of that
-- kind is its level; at a launch, the depth there. End rows are dropped.
CREATE OR REPLACE TEMP TABLE t_sweep AS
SELECT pid, tid, k, kind, event_index, end_ns, depth_o, depth_m
FROM (
    SELECT *,
           sum(CASE WHEN kind = 'o' THEN d ELSE 0 END) OVER w AS depth_o,
           sum(CASE WHEN kind = 'm' THEN d ELSE 0 END) OVER w AS depth_m
    FROM (
        SELECT pid, tid, 2 * ts_ns + 1 AS k, 'o' AS kind, false AS launch, 1 AS d,
               end_ns AS o, event_index, end_ns
        FROM t_cpu
        UNION ALL
        SELECT pid, tid, 2 * end_ns, 'o', false, -1, 0, NULL, NULL FROM t_cpu
        UNION ALL
        SELECT pid, tid, 2 * ts_ns + 1, 'm', false, 1, end_ns, event_index, end_ns FROM t_mod
        UNION ALL
        SELECT pid, tid, 2 * end_ns, 'm', false, -1, 0, NULL, NULL FROM t_mod
        UNION ALL
        SELECT pid, tid, qk, 'l', true, 0, 0, launch_index, NULL FROM t_launch0
    )
    WINDOW w AS (PARTITION BY pid, tid ORDER BY k, launch, o DESC, event_index
                 ROWS UNBOUNDED PRECEDING)
)
WHERE d >= 0;

CREATE OR REPLACE TEMP TABLE t_launch1 AS
SELECT l.event_index AS launch_index, l0.ts_ns,
       CASE WHEN o.end_ns > l0.ts_ns THEN o.event_index END AS op_index,
       CASE WHEN m.end_ns > l0.ts_ns THEN m.event_index END AS module_index
FROM (FROM t_sweep WHERE kind = 'l') l
JOIN t_launch0 l0 ON l0.launch_index = l.event_index
ASOF LEFT JOIN (FROM t_sweep WHERE kind = 'o') o
    ON o.pid = l.pid AND o.tid = l.tid AND o.depth_o = l.depth_o AND l.k >= o.k
ASOF LEFT JOIN (FROM t_sweep WHERE kind = 'm') m
    ON m.pid = l.pid AND m.tid = l.tid AND m.depth_m = l.depth_m AND l.k >= m.k;

-- each module span's enclosing module span (the last one started one level up)
CREATE OR REPLACE TEMP TABLE t_mod_parent AS
SELECT c.event_index, CASE WHEN p.end_ns > (c.k - 1) // 2 THEN p.event_index END AS parent_index
FROM (FROM t_sweep WHERE kind = 'm') c
ASOF LEFT JOIN (FROM t_sweep WHERE kind = 'm') p
    ON p.pid = c.pid AND p.tid = c.tid AND p.depth_m = c.depth_m - 1 AND c.k >= p.k;

-- each module span with its path (outermost first, by "/") and depth (1: outermost)
CREATE OR REPLACE TEMP TABLE t_mod_tree AS
WITH RECURSIVE tree(event_index, parent_index, depth, path) AS (
    SELECT p.event_index, p.parent_index, 1, m.name
    FROM t_mod_parent p JOIN t_mod m USING (event_index)
    WHERE p.parent_index IS NULL
    UNION ALL
    SELECT c.event_index, c.parent_index, tree.depth + 1, tree.path || '/' || m.name
    FROM t_mod_parent c
    JOIN tree ON c.parent_index = tree.event_index
    JOIN t_mod m ON m.event_index = c.event_index
)
SELECT m.event_index, m.pid, m.tid, m.ts_ns, m.end_ns - m.ts_ns AS dur_ns, m.name,
       t.path AS module_path, CAST(t.depth AS BIGINT) AS depth,
       t.parent_index AS parent_event_index
FROM tree t JOIN t_mod m USING (event_index);

-- the distinct paths (module paths), each with an id: gpu_ops rows carry the id through
-- the linkage and get the text from this small table when they are written
CREATE OR REPLACE TEMP TABLE t_paths AS
SELECT row_number() OVER (ORDER BY path) AS path_id, path
FROM (SELECT DISTINCT module_path AS path FROM t_mod_tree);

CREATE OR REPLACE TEMP TABLE t_launch AS
SELECT l.launch_index, l.ts_ns, l.op_index, mp.path_id AS module_path_id
FROM t_launch1 l
LEFT JOIN t_mod_tree mt ON mt.event_index = l.module_index
LEFT JOIN t_paths mp ON mp.path = mt.module_path;
DROP TABLE IF EXISTS t_launch1;
DROP TABLE IF EXISTS t_mod_parent;
DROP TABLE IF EXISTS t_mod;

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
SELECT e.event_index, e.name, e.ts_ns, e.dur_ns, e.external_id,
       CAST(json_extract(e.args_json, '$."Input Dims"') AS VARCHAR) AS input_dims
FROM s_ev e
SEMI JOIN t_launch l ON l.op_index = e.event_index;

-- the place of each GPU op (its launch's start where linked) and its ProfilerStep,
-- computed on narrow rows so the output query only needs small hash joins
CREATE OR REPLACE TEMP TABLE t_gpu_place AS
SELECT g.event_index, g.launch_index, g.link_method, coalesce(r.ts_ns, g0.ts_ns) AS place_ts
FROM t_gpu g
JOIN t_gpu0 g0 USING (event_index)
LEFT JOIN t_rt r ON r.event_index = g.launch_index;

CREATE OR REPLACE TEMP TABLE t_gpu_step AS
SELECT p.event_index, CASE WHEN p.place_ts < s.ts_ns + s.dur_ns THEN s.step END AS step
FROM t_gpu_place p
ASOF LEFT JOIN t_steps s ON p.place_ts >= s.ts_ns;

-- everything gpu_ops adds to an event, one narrow join at a time (each spills alone)
CREATE OR REPLACE TEMP TABLE t_gpu_link0 AS
SELECT p.event_index, p.link_method, p.place_ts, st.step, p.launch_index,
       r.name AS launch_name, r.ts_ns AS launch_ts_ns, r.dur_ns AS launch_dur_ns,
       r.pid AS launch_pid, r.tid AS launch_tid
FROM t_gpu_place p
LEFT JOIN t_gpu_step st USING (event_index)
LEFT JOIN t_rt r ON r.event_index = p.launch_index;

CREATE OR REPLACE TEMP TABLE t_gpu_link1 AS
SELECT k.*, l.op_index, l.module_path_id
FROM t_gpu_link0 k
LEFT JOIN t_launch l ON l.launch_index = k.launch_index;
DROP TABLE IF EXISTS t_gpu_link0;
DROP TABLE IF EXISTS t_launch;

-- counts for the runs row (30_summary.sql), kept once the tables they come from are dropped
CREATE OR REPLACE TEMP TABLE t_link_counts AS
SELECT (SELECT count(*) FROM t_gpu0) AS n_gpu_ops,
       (SELECT count(*) FROM t_rt) AS n_runtime,
       (SELECT count(*) FROM t_gpu WHERE launch_index IS NULL) AS n_unlinked_gpu_ops,
       (SELECT count(*) FILTER (WHERE starts_with(name, 'hip')) FROM t_rt) AS n_hip_calls;

-- free everything but t_gpu_link1 and t_op (11_link_out.sql and 12_op_out.sql read
-- them), t_mod_tree (module_spans) and the small t_steps, t_names, t_paths, t_link_counts
DROP TABLE IF EXISTS t_by_corr;
DROP TABLE IF EXISTS t_by_flow;
DROP TABLE IF EXISTS t_by_ext;
DROP TABLE IF EXISTS t_cpu;
DROP TABLE IF EXISTS t_sweep;
DROP TABLE IF EXISTS t_launch0;
DROP TABLE IF EXISTS t_gpu_place;
DROP TABLE IF EXISTS t_gpu_step;
DROP TABLE IF EXISTS t_gpu;
DROP TABLE IF EXISTS t_gpu0;
DROP TABLE IF EXISTS t_rt;
