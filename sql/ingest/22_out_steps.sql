-- rows of `steps` for each run of t_files (see 20_out_events.sql)
SELECT f.run_id, f.ingest_id, f.day,
       step, name, pid, tid, ts_ns + f.base_ns AS ts_ns, dur_ns
FROM t_steps s
JOIN t_files f ON f.file_no = s.file_no
WHERE f.lo_ns IS NULL OR EXISTS (
    SELECT 1 FROM t_kept k WHERE k.file_no = s.file_no AND k.step = s.step)
