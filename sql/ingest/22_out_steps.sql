-- rows of `steps` for one run
SELECT $run_id AS run_id, $ingest_id AS ingest_id, CAST($day AS DATE) AS day,
       step, name, pid, tid, ts_ns + $base_ns AS ts_ns, dur_ns
FROM t_steps
WHERE $lo_ns IS NULL OR step IN (SELECT step FROM t_kept)
