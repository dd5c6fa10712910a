-- rows of `python` for one run
SELECT $run_id AS run_id, $ingest_id AS ingest_id, CAST($day AS DATE) AS day,
       event_index, cat, name, pid, tid, pid_label, tid_label, ts_ns + $base_ns AS ts_ns,
       dur_ns, correlation, external_id, stream, device, args_json, python_id, python_parent_id
FROM s_py
WHERE tw_keep(ts_ns, $lo_ns, $hi_ns)
