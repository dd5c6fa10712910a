-- rows of `gpu_ops` for one run (params: $run_id, $ingest_id, $day, $base_ns, $lo_ns, $hi_ns)
SELECT $run_id AS run_id, $ingest_id AS ingest_id, CAST($day AS DATE) AS day,
       e.event_index, e.cat, e.name, e.pid, e.tid, e.pid_label, e.tid_label,
       e.ts_ns + $base_ns AS ts_ns, e.dur_ns, e.correlation, e.external_id, e.stream, e.device,
       e.args_json,
       n.op_kind, n.short_name, n.category, n.memcpy_kind,
       a.grid_x, a.grid_y, a.grid_z, a.block_x, a.block_y, a.block_z,
       a.registers_per_thread, a.shared_memory_bytes, a.blocks_per_sm, a.warps_per_sm,
       a.occupancy_pct, a.bytes, a.bandwidth_gbps, a.context, a.graph_id, a.graph_node_id,
       p.link_method,
       r.name AS launch_name, r.ts_ns + $base_ns AS launch_ts_ns, r.dur_ns AS launch_dur_ns,
       r.pid AS launch_pid, r.tid AS launch_tid,
       o.name AS op_name, o.ts_ns + $base_ns AS op_ts_ns, o.dur_ns AS op_dur_ns,
       o.input_dims AS op_input_dims,
       o.external_id AS op_external_id,
       CAST(NULL AS VARCHAR) AS module_path,
       st.step
FROM s_ev e
JOIN t_gpu_place p USING (event_index)
LEFT JOIN t_gpu_step st USING (event_index)
LEFT JOIN t_names n ON n.cat IS NOT DISTINCT FROM e.cat AND n.name IS NOT DISTINCT FROM e.name
LEFT JOIN s_gpu a ON a.event_index = e.event_index
LEFT JOIN t_rt r ON r.event_index = p.launch_index
LEFT JOIN t_launch l ON l.launch_index = p.launch_index
LEFT JOIN t_op o ON o.event_index = l.op_index
WHERE tw_keep(p.place_ts, $lo_ns, $hi_ns)
