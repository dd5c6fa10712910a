-- 56_annotations.sql: GPU time per user annotation (record_function), apart from operators.
--
-- Two sources (see 54_attribution.sql): 'user_annotation', the CPU-side spans enclosing each
-- GPU op's launch on the launch's thread (gpu_ops.annotation_path, ProfilerStep#N left
-- out), and 'gpu_user_annotation', the GPU-side spans the profiler draws on the GPU tracks,
-- enclosing each op's start on its own track. Operator attribution (op_gpu_time) is the
-- innermost cpu_op only: an annotation never stands in for an operator.
--
-- annotation_gpu_time(run, source := 'user_annotation', max_depth := NULL)  (table macro)
--   grain: one row per annotation path of the source cut at max_depth names, plus one
--          row with annotation_path NULL for the GPU ops without one (a partition).
--   columns: annotation_path, depth, calls (annotation spans with exactly this path),
--            kernels, gpu_ns, pct (100 * gpu_ns / the run's GPU time)
--
-- annotation_tree(run, source := 'user_annotation', max_depth := NULL, top := NULL)
--   (table macro)
--   grain: one row per node of the annotation tree of the source, plus the NULL row;
--          depth first, the heaviest child first; with top, the `top` heaviest nodes.
--   columns: annotation_path, name, depth, calls, kernels, gpu_ns (inclusive), self_gpu_ns,
--            pct

CREATE OR REPLACE MACRO annotation_gpu_time(run, source := 'user_annotation', max_depth := NULL)
AS TABLE
SELECT path AS annotation_path, * EXCLUDE (path)
FROM attribution_time(run, source, max_depth := max_depth);

CREATE OR REPLACE MACRO annotation_tree(run, source := 'user_annotation', max_depth := NULL,
                                        top := NULL) AS TABLE
SELECT path AS annotation_path, * EXCLUDE (path)
FROM attribution_tree(run, source, max_depth := max_depth, top := top);
