-- 55_modules.sql: GPU time per nn.Module (module attribution) and the module tree (the
-- 'module' kind of 54_attribution.sql).
--
-- Module paths come from the ingest (gpu_ops.module_path): the `nn.Module: X` python_function
-- spans enclosing each GPU op's launch call on the launch's thread, outermost first, names
-- without the prefix, joined by '/'. A path cut at max_depth keeps its first max_depth names.
--
-- module_gpu_time(run, max_depth := NULL)  (table macro)
--   grain: one row per module path of run `run` cut at max_depth names (NULL: full paths),
--          plus one row with module_path NULL for the GPU ops without one; the rows
--          partition the run's GPU ops (each op counts once, under its cut path).
--   columns: module_path, depth (names in module_path; 0 for the NULL row), calls
--            (module_spans rows with exactly this path: calls of that module), kernels (GPU
--            ops), gpu_ns (sum of their durations), pct (100 * gpu_ns / GPU time of all the
--            run's GPU ops)
--
-- module_tree(run, max_depth := NULL, top := NULL)  (table macro)
--   grain: one row per node of the module tree of run `run` (every prefix, down to
--          max_depth names, of a GPU op's module path), plus the NULL row as above; ordered
--          depth first, the heaviest child first. With top, only the `top` nodes of largest
--          gpu_ns (ties: shallower first), which keeps every kept node's ancestors.
--   columns: module_path, name (its last name), depth, calls (as above), kernels, gpu_ns
--            (inclusive: the GPU ops whose path is this node or below it), self_gpu_ns (the
--            GPU ops whose path, cut at max_depth, is exactly this node), pct (100 * gpu_ns
--            / the run's GPU time)
--
-- module_segments(run)  (table macro)
--   grain: one row per (pid, tid, segment) of run `run`, where a segment is the interval
--          between two consecutive module span boundaries (starts or ends) of the thread
--          with at least one module span open.
--   columns: pid, tid, start_ns, end_ns (half-open [start_ns, end_ns)), module_path (of the
--            innermost module span open throughout the segment), module_event_index (that
--            span's event_index). To find the module of an instant (an allocation) at
--            (pid, tid, ts_ns): ASOF JOIN on pid, tid and ts_ns >= start_ns, then keep
--            ts_ns < end_ns.

CREATE OR REPLACE MACRO module_gpu_time(run, max_depth := NULL) AS TABLE
SELECT path AS module_path, * EXCLUDE (path)
FROM attribution_time(run, 'module', max_depth := max_depth);

CREATE OR REPLACE MACRO module_tree(run, max_depth := NULL, top := NULL) AS TABLE
SELECT path AS module_path, * EXCLUDE (path)
FROM attribution_tree(run, 'module', max_depth := max_depth, top := top);

CREATE OR REPLACE MACRO module_segments(run) AS TABLE
WITH pts AS (
    SELECT pid, tid, ts_ns AS t, 1 AS d FROM module_spans WHERE run_id = run AND dur_ns > 0
    UNION ALL
    SELECT pid, tid, ts_ns + dur_ns, -1 FROM module_spans WHERE run_id = run AND dur_ns > 0
),
cuts AS (
    SELECT pid, tid, t, sum(sum(d)) OVER (PARTITION BY pid, tid ORDER BY t) AS open_spans
    FROM pts GROUP BY pid, tid, t
),
seg AS (
    SELECT pid, tid, t AS start_ns, lead(t) OVER (PARTITION BY pid, tid ORDER BY t) AS end_ns,
           open_spans
    FROM cuts
),
-- the innermost span open at a segment start: on a thread, at most one span per depth is
-- open at a time, so it is the latest span of depth open_spans started by then
spans AS (
    SELECT pid, tid, ts_ns, depth, event_index, module_path
    FROM module_spans WHERE run_id = run AND dur_ns > 0
)
SELECT s.pid, s.tid, s.start_ns, s.end_ns, m.module_path, m.event_index AS module_event_index
FROM (FROM seg WHERE end_ns IS NOT NULL AND open_spans > 0) s
ASOF JOIN spans m
    ON m.pid = s.pid AND m.tid = s.tid AND m.depth = s.open_spans AND s.start_ns >= m.ts_ns
ORDER BY s.pid, s.tid, s.start_ns;
