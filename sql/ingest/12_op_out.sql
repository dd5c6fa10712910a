-- one row per CPU operator of a run that encloses a launch, in event order: name,
-- times, External id, input dims (10_link.sql's t_op). Not an analysis view:
-- tracewh.ingest writes it to a Parquet file of the staging folder, read back through
-- the view t_op; a gpu_ops slice reads only the row groups of its operators.
SELECT * FROM t_op ORDER BY event_index
