-- one row per GPU op of a run, in event order: its place, step, launch call and the
-- event_index of its innermost enclosing CPU operator (10_link.sql's t_gpu_link1).
-- Not an analysis view: tracewh.ingest writes it to a Parquet file of the staging
-- folder (row groups of GPU_SLICE_ROWS, so an output slice reads one or two) and
-- reads it back through the view t_gpu_link.
SELECT * FROM t_gpu_link1 ORDER BY event_index
