-- rows of `threads` for each run of t_files (see 20_out_events.sql)
SELECT DISTINCT f.run_id, f.ingest_id, f.day,
       pid, tid, pid_label, tid_label, kind, value, sort_index
FROM s_thr s
JOIN t_files f ON f.file_no = s.file_no
