-- rows of `counters` for one run
SELECT $run_id AS run_id, $ingest_id AS ingest_id, CAST($day AS DATE) AS day,
       event_index, cat, name, pid, tid, ts_ns + $base_ns AS ts_ns, series, value
FROM s_cnt
WHERE tw_keep(ts_ns, $lo_ns, $hi_ns)
