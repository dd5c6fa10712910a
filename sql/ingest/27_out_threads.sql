-- rows of `threads` for one run
SELECT DISTINCT $run_id AS run_id, $ingest_id AS ingest_id, CAST($day AS DATE) AS day,
       pid, tid, pid_label, tid_label, kind, value, sort_index
FROM s_thr
