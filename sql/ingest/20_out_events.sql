-- rows of `events` for one run (params: $run_id, $ingest_id, $day, $base_ns, $lo_ns, $hi_ns)
SELECT $run_id AS run_id, $ingest_id AS ingest_id, CAST($day AS DATE) AS day,
       e.event_index, e.cat, e.name, e.pid, e.tid, e.pid_label, e.tid_label,
       e.ts_ns + $base_ns AS ts_ns, e.dur_ns, e.correlation, e.external_id, e.stream, e.device,
       e.args_json
FROM s_ev e
LEFT JOIN (SELECT event_index, launch_ts_ns FROM t_gpu_link WHERE launch_ts_ns IS NOT NULL) p
    USING (event_index)
WHERE tw_keep(coalesce(p.launch_ts_ns, e.ts_ns), $lo_ns, $hi_ns)
