-- 54_attribution.sql: GPU time per path of enclosing spans (modules, annotations), as a tree.
--
-- A kind of attribution gives each GPU op of a run a path (names of nested spans,
-- outermost first, joined by '/'), or NULL (kernels replayed by a CUDA/HIP graph get the
-- paths recorded in the graph's capture, gpu_ops_attributed in 45_graphs.sql):
--   'module'              gpu_ops.module_path: the nn.Module spans enclosing the op's launch
--   'user_annotation'     gpu_ops.annotation_path: the user_annotation spans (record_function,
--                         but ProfilerStep#N) enclosing the op's launch on its thread
--   'gpu_user_annotation' the gpu_user_annotation spans enclosing the op's start on its own
--                         GPU track (pid, tid), see gpu_annotation_ops
-- A path cut at max_depth keeps its first max_depth names; calls of a path are the spans
-- with exactly that path (module_spans, annotation_spans, gpu_annotation_spans).
--
-- gpu_annotation_spans(run)  (table macro)
--   grain: one row per gpu_user_annotation span of run `run` with a positive duration.
--   columns: event_index, pid, tid (its GPU track), ts_ns, dur_ns, name, annotation_path
--            (the names of the spans of the same track enclosing it, outermost first, and its
--            own), depth (1: outermost), parent_event_index
--   Nesting by time on the track, as for module spans: a running sum of starts and ends
--   gives each span's level, its parent is the last span started one level up.
--
-- gpu_annotation_ops(run)  (table macro)
--   grain: one row per GPU op of run `run`.
--   columns: event_index, dur_ns, annotation_path (of the innermost gpu_user_annotation span
--            of the op's track (pid, tid) open at the op's start: ts_ns in [start, end);
--            NULL when none)
--
-- attribution_time(run, kind, max_depth := NULL)  (table macro)
--   grain: one row per path of kind `kind` cut at max_depth names (NULL: full paths), plus
--          one row with path NULL for the GPU ops without one; the rows partition the run's
--          GPU ops.
--   columns: path, depth (names in path; 0 for the NULL row), calls, kernels (GPU ops),
--            gpu_ns (sum of their durations), pct (100 * gpu_ns / the run's GPU time)
--
-- attribution_tree(run, kind, max_depth := NULL, top := NULL)  (table macro)
--   grain: one row per node of the tree of paths of kind `kind` (every prefix, down to
--          max_depth names, of a GPU op's path), plus the NULL row; ordered depth first, the
--          heaviest child first. With top: the `top` nodes of largest gpu_ns (ties:
--          shallower first), which keeps every kept node's ancestors.
--   columns: path, name (its last name), depth, calls, kernels, gpu_ns (inclusive: the GPU
--            ops whose path is this node or below), self_gpu_ns (the GPU ops whose cut path is
--            exactly this node), pct (100 * gpu_ns / the run's GPU time)

CREATE OR REPLACE MACRO gpu_annotation_spans(run) AS TABLE
WITH RECURSIVE s AS (
    SELECT event_index, pid, tid, ts_ns, ts_ns + dur_ns AS end_ns, name
    FROM events
    WHERE run_id = run AND cat = 'gpu_user_annotation' AND dur_ns > 0 AND ts_ns IS NOT NULL
      AND name IS NOT NULL
),
sweep AS (
    SELECT *, sum(d) OVER (PARTITION BY pid, tid ORDER BY k, o DESC, event_index
                           ROWS UNBOUNDED PRECEDING) AS lvl
    FROM (
        SELECT pid, tid, 2 * ts_ns + 1 AS k, 1 AS d, end_ns AS o, event_index, end_ns FROM s
        UNION ALL
        SELECT pid, tid, 2 * end_ns, -1, 0, NULL, NULL FROM s
    )
),
starts AS (FROM sweep WHERE d = 1),
parent AS (
    SELECT c.event_index,
           CASE WHEN p.end_ns > (c.k - 1) // 2 THEN p.event_index END AS parent_index
    FROM starts c
    ASOF LEFT JOIN starts p
        ON p.pid = c.pid AND p.tid = c.tid AND p.lvl = c.lvl - 1 AND c.k >= p.k
),
tree(event_index, parent_index, depth, path) AS (
    SELECT p.event_index, p.parent_index, 1, s.name
    FROM parent p JOIN s USING (event_index)
    WHERE p.parent_index IS NULL
    UNION ALL
    SELECT c.event_index, c.parent_index, tree.depth + 1, tree.path || '/' || s.name
    FROM parent c
    JOIN tree ON c.parent_index = tree.event_index
    JOIN s ON s.event_index = c.event_index
)
SELECT s.event_index, s.pid, s.tid, s.ts_ns, s.end_ns - s.ts_ns AS dur_ns, s.name,
       t.path AS annotation_path, CAST(t.depth AS BIGINT) AS depth,
       t.parent_index AS parent_event_index
FROM tree t JOIN s USING (event_index);

CREATE OR REPLACE MACRO gpu_annotation_ops(run) AS TABLE
WITH a AS (FROM gpu_annotation_spans(run)),
-- GPU ops on the tracks with annotations, placed after the span starts at their start
pts AS (
    SELECT pid, tid, 2 * ts_ns + 1 AS k, 1 AS d, ts_ns + dur_ns AS o, event_index,
           ts_ns + dur_ns AS end_ns, false AS op
    FROM a
    UNION ALL
    SELECT pid, tid, 2 * (ts_ns + dur_ns), -1, 0, NULL, NULL, false FROM a
    UNION ALL
    SELECT g.pid, g.tid, 2 * g.ts_ns + 1, 0, 0, g.event_index, NULL, true
    FROM gpu_ops g
    WHERE g.run_id = run AND g.ts_ns IS NOT NULL
      AND EXISTS (SELECT 1 FROM a WHERE a.pid = g.pid AND a.tid = g.tid)
),
sweep AS (
    SELECT *, sum(d) OVER (PARTITION BY pid, tid ORDER BY k, op, o DESC, event_index
                           ROWS UNBOUNDED PRECEDING) AS lvl
    FROM pts
),
hit AS (
    SELECT o.event_index, CASE WHEN s.end_ns > (o.k - 1) // 2 THEN s.event_index END AS span
    FROM (FROM sweep WHERE op) o
    ASOF LEFT JOIN (FROM sweep WHERE d = 1) s
        ON s.pid = o.pid AND s.tid = o.tid AND s.lvl = o.lvl AND o.k >= s.k
)
SELECT g.event_index, g.dur_ns, a.annotation_path
FROM gpu_ops g
LEFT JOIN hit h ON h.event_index = g.event_index
LEFT JOIN a ON a.event_index = h.span
WHERE g.run_id = run;

CREATE OR REPLACE MACRO attribution_time(run, kind, max_depth := NULL) AS TABLE
WITH p AS (
    SELECT module_path AS path, dur_ns FROM gpu_ops_attributed(run) WHERE kind = 'module'
    UNION ALL
    SELECT annotation_path, dur_ns FROM gpu_ops_attributed(run)
    WHERE kind = 'user_annotation'
    UNION ALL
    SELECT annotation_path, dur_ns FROM gpu_annotation_ops(run)
    WHERE kind = 'gpu_user_annotation'
),
g AS (
    SELECT CASE WHEN path IS NOT NULL THEN array_to_string(
               list_slice(string_split(path, '/'), 1,
                          coalesce(max_depth, len(string_split(path, '/')))), '/')
           END AS path,
           dur_ns
    FROM p
),
calls AS (
    SELECT module_path AS path, count(*) AS calls FROM module_spans
    WHERE run_id = run AND kind = 'module' GROUP BY 1
    UNION ALL
    SELECT annotation_path, count(*) FROM annotation_spans
    WHERE run_id = run AND kind = 'user_annotation' GROUP BY 1
    UNION ALL
    SELECT annotation_path, count(*) FROM gpu_annotation_spans(run)
    WHERE kind = 'gpu_user_annotation' GROUP BY 1
),
agg AS (
    SELECT path, count(*) AS kernels, CAST(coalesce(sum(dur_ns), 0) AS BIGINT) AS gpu_ns
    FROM g GROUP BY path
)
SELECT
    agg.path,
    CAST(coalesce(len(string_split(agg.path, '/')), 0) AS BIGINT) AS depth,
    CAST(coalesce(c.calls, 0) AS BIGINT) AS calls,
    agg.kernels,
    agg.gpu_ns,
    100.0 * agg.gpu_ns / nullif(sum(agg.gpu_ns) OVER (), 0) AS pct
FROM agg
LEFT JOIN calls c ON c.path = agg.path
ORDER BY agg.gpu_ns DESC, agg.path NULLS LAST;

CREATE OR REPLACE MACRO attribution_tree(run, kind, max_depth := NULL, top := NULL) AS TABLE
WITH p AS (
    SELECT module_path AS path, dur_ns FROM gpu_ops_attributed(run) WHERE kind = 'module'
    UNION ALL
    SELECT annotation_path, dur_ns FROM gpu_ops_attributed(run)
    WHERE kind = 'user_annotation'
    UNION ALL
    SELECT annotation_path, dur_ns FROM gpu_annotation_ops(run)
    WHERE kind = 'gpu_user_annotation'
),
cut AS (
    SELECT names[1:least(len(names), coalesce(max_depth, len(names)))] AS names, dur_ns
    FROM (SELECT string_split(path, '/') AS names, dur_ns FROM p WHERE path IS NOT NULL)
),
nodes AS (
    SELECT array_to_string(names[1:d], '/') AS path, d AS lvl, d = len(names) AS own, dur_ns
    FROM (SELECT names, dur_ns, unnest(generate_series(1, len(names))) AS d FROM cut)
),
agg AS (
    SELECT path, any_value(lvl) AS lvl, count(*) AS kernels,
           CAST(coalesce(sum(dur_ns), 0) AS BIGINT) AS gpu_ns,
           CAST(coalesce(sum(dur_ns) FILTER (WHERE own), 0) AS BIGINT) AS self_gpu_ns
    FROM nodes GROUP BY path
),
ranked AS (
    SELECT *, row_number() OVER (
        PARTITION BY CASE WHEN lvl > 1
                          THEN array_to_string(string_split(path, '/')[1:lvl - 1], '/') END
        ORDER BY gpu_ns DESC, path) AS r
    FROM agg
),
keys AS (
    SELECT a.path, list(q.r ORDER BY q.lvl) AS k
    FROM agg a
    JOIN ranked q ON a.path = q.path OR starts_with(a.path, q.path || '/')
    GROUP BY a.path
),
total AS (
    SELECT CAST(coalesce(sum(dur_ns), 0) AS BIGINT) AS t,
           count(*) FILTER (WHERE path IS NULL) AS bare_ops,
           CAST(coalesce(sum(dur_ns) FILTER (WHERE path IS NULL), 0) AS BIGINT) AS bare_ns
    FROM p
),
calls AS (
    SELECT module_path AS path, count(*) AS calls FROM module_spans
    WHERE run_id = run AND kind = 'module' GROUP BY 1
    UNION ALL
    SELECT annotation_path, count(*) FROM annotation_spans
    WHERE run_id = run AND kind = 'user_annotation' GROUP BY 1
    UNION ALL
    SELECT annotation_path, count(*) FROM gpu_annotation_spans(run)
    WHERE kind = 'gpu_user_annotation' GROUP BY 1
),
rows AS (
    SELECT a.path, string_split(a.path, '/')[-1] AS name,
           CAST(a.lvl AS BIGINT) AS depth, CAST(coalesce(c.calls, 0) AS BIGINT) AS calls,
           a.kernels, a.gpu_ns, a.self_gpu_ns, k.k AS sort_key
    FROM agg a JOIN keys k USING (path) LEFT JOIN calls c ON c.path = a.path
    UNION ALL
    SELECT NULL, NULL, CAST(0 AS BIGINT), CAST(0 AS BIGINT), bare_ops, bare_ns, bare_ns, NULL
    FROM total WHERE bare_ops > 0
)
SELECT path, name, depth, calls, kernels, gpu_ns, self_gpu_ns,
       100.0 * gpu_ns / nullif((SELECT t FROM total), 0) AS pct
FROM rows
QUALIFY top IS NULL
     OR row_number() OVER (ORDER BY gpu_ns DESC, depth, path NULLS LAST) <= top
ORDER BY sort_key NULLS LAST;
