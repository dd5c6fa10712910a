-- rows of `events` for one run (params: $run_id, $ingest_id, $day, $base_ns, $lo_ns, $hi_ns).
-- With --steps (t_kept: the kept steps), a GPU op's row is kept when its step (by launch,
-- as in gpu_ops) is kept, any other row when it starts inside [$lo_ns, $hi_ns).
SELECT $run_id AS run_id, $ingest_id AS ingest_id, CAST($day AS DATE) AS day,
       e.event_index, e.cat, e.name, e.pid, e.tid, e.pid_label, e.tid_label,
       e.ts_ns + $base_ns AS ts_ns, e.dur_ns, e.correlation, e.external_id, e.stream, e.device,
       e.args_json
FROM s_ev e
LEFT JOIN (SELECT event_index, step, true AS gpu FROM t_gpu_link) p USING (event_index)
WHERE CASE WHEN p.gpu IS NULL THEN tw_keep(e.ts_ns, $lo_ns, $hi_ns)
           ELSE $lo_ns IS NULL OR p.step IN (SELECT step FROM t_kept) END
