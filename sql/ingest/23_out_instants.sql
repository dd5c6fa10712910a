-- rows of `instants` for one run
SELECT $run_id AS run_id, $ingest_id AS ingest_id, CAST($day AS DATE) AS day,
       event_index, ph, cat, name, pid, tid, pid_label, tid_label, ts_ns + $base_ns AS ts_ns,
       scope, bytes, total_allocated, total_reserved, device_type, device_id, addr, args_json
FROM s_inst
WHERE tw_keep(ts_ns, $lo_ns, $hi_ns)
