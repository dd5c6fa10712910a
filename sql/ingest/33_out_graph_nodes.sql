-- rows of `graph_nodes` for each run of t_files (see 20_out_events.sql): each launch recorded in a CUDA/HIP graph capture, in
-- capture order, with what recorded it (10_link.sql's t_graph_nodes; params as
-- 26_out_python.sql)
SELECT f.run_id, f.ingest_id, f.day,
       capture, capture_ts_ns + f.base_ns AS capture_ts_ns, position,
       launch_event_index - f.ev_off AS launch_event_index,
       launch_name, launch_kind, launch_ts_ns + f.base_ns AS launch_ts_ns, kernel_name, op_name,
       op_ts_ns + f.base_ns AS op_ts_ns, op_external_id, op_input_dims, module_path,
       annotation_path
FROM t_graph_nodes s
JOIN t_files f ON f.file_no = s.file_no
WHERE tw_keep(launch_ts_ns, f.lo_ns, f.hi_ns)
