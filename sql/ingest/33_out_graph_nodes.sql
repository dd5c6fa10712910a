-- rows of `graph_nodes` for one run: each launch recorded in a CUDA/HIP graph capture, in
-- capture order, with what recorded it (10_link.sql's t_graph_nodes; params as
-- 26_out_python.sql)
SELECT $run_id AS run_id, $ingest_id AS ingest_id, CAST($day AS DATE) AS day,
       capture, capture_ts_ns + $base_ns AS capture_ts_ns, position, launch_event_index,
       launch_name, launch_kind, launch_ts_ns + $base_ns AS launch_ts_ns, kernel_name, op_name,
       op_ts_ns + $base_ns AS op_ts_ns, op_external_id, op_input_dims, module_path,
       annotation_path
FROM t_graph_nodes
WHERE tw_keep(launch_ts_ns, $lo_ns, $hi_ns)
