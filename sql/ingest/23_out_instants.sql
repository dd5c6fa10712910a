-- rows of `instants` for each run of t_files (see 20_out_events.sql)
SELECT f.run_id, f.ingest_id, f.day,
       event_index - f.ev_off AS event_index, ph, cat, name, pid, tid, pid_label, tid_label, ts_ns + f.base_ns AS ts_ns,
       scope, bytes, total_allocated, total_reserved, device_type, device_id, addr, args_json
FROM s_inst s
JOIN t_files f ON f.file_no = s.file_no
WHERE tw_keep(ts_ns, f.lo_ns, f.hi_ns)
