-- the gpu_ops output slices of a run (param: $n, GPU ops per slice): per slice, its
-- first GPU op's event_index and the event_index range of the CPU operators enclosing
-- its launches (NULL: none), in event order. Not an analysis view: read by
-- tracewh.ingest, which bounds each slice's reads of t_gpu_link, the staged rows and
-- t_op with them.
SELECT min(event_index) AS lo, min(op_index) AS op_lo, max(op_index) AS op_hi
FROM (
    SELECT event_index, op_index,
           (row_number() OVER (ORDER BY event_index) - 1) // $n AS slice
    FROM t_gpu_link
)
GROUP BY slice
ORDER BY lo
