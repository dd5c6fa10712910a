-- rows of `flows` for one run
SELECT $run_id AS run_id, $ingest_id AS ingest_id, CAST($day AS DATE) AS day,
       event_index, ph, cat, name, flow_id, pid, tid, ts_ns + $base_ns AS ts_ns, bp
FROM s_flow
WHERE tw_keep(ts_ns, $lo_ns, $hi_ns)
