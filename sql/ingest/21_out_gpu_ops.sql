-- rows of `gpu_ops` for each run of t_files (see 20_out_events.sql) whose staged event_index
-- is in [$slice_lo, $slice_hi) (params: $slice_lo, $slice_hi);
-- written a slice at a time, so the join's memory is bounded by the slice. With --steps
-- (lo_ns not NULL), exactly the GPU ops launched in the kept steps (t_kept).
-- t_paths: module and annotation paths by id (10_link.sql). s_gev_slice, s_gpu_slice, s_op_slice: the GPU ops' staged base rows and typed args
-- of that slice and the CPU operators enclosing its launches (views
-- tracewh.ingest.pipeline sets per slice, so event_index bounds prune the Parquet
-- files and row groups read)
SELECT f.run_id, f.ingest_id, f.day,
       e.event_index - f.ev_off AS event_index, e.cat, e.name, e.pid, e.tid, e.pid_label, e.tid_label,
       e.ts_ns + f.base_ns AS ts_ns, e.dur_ns, e.correlation, e.external_id, e.stream, e.device,
       e.args_json,
       n.op_kind, n.short_name, n.category, n.memcpy_kind,
       a.grid_x, a.grid_y, a.grid_z, a.block_x, a.block_y, a.block_z,
       a.registers_per_thread, a.shared_memory_bytes, a.blocks_per_sm, a.warps_per_sm,
       a.occupancy_pct, a.bytes, a.bandwidth_gbps, a.context, a.graph_id, a.graph_node_id,
       x.link_method,
       x.launch_name, x.launch_ts_ns + f.base_ns AS launch_ts_ns, x.launch_dur_ns,
       x.launch_pid, x.launch_tid,
       o.name AS op_name, o.ts_ns + f.base_ns AS op_ts_ns, o.dur_ns AS op_dur_ns,
       o.input_dims AS op_input_dims, o.external_id AS op_external_id,
       mp.path AS module_path,
       x.step,
       ap.path AS annotation_path,
       x.launch_kind, x.graph_position
FROM s_gev_slice e
JOIN t_files f ON f.file_no = e.file_no
JOIN t_gpu_link x USING (event_index)
LEFT JOIN s_gpu_slice a ON a.event_index = e.event_index
LEFT JOIN s_op_slice o ON o.event_index = x.op_index
LEFT JOIN t_paths mp ON mp.path_id = x.module_path_id
LEFT JOIN t_paths ap ON ap.path_id = x.annotation_path_id
LEFT JOIN t_names n ON n.cat IS NOT DISTINCT FROM e.cat AND n.name IS NOT DISTINCT FROM e.name
WHERE (f.lo_ns IS NULL OR EXISTS (
           SELECT 1 FROM t_kept k WHERE k.file_no = e.file_no AND k.step = x.step))
  AND x.event_index >= $slice_lo AND x.event_index < $slice_hi
