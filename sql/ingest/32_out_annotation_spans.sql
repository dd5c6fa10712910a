-- rows of `annotation_spans` for one run: each user annotation (but ProfilerStep#N) with its
-- path, depth and parent (10_link.sql's t_ann_tree; params as 26_out_python.sql)
SELECT $run_id AS run_id, $ingest_id AS ingest_id, CAST($day AS DATE) AS day,
       event_index, pid, tid, ts_ns + $base_ns AS ts_ns, dur_ns, name, annotation_path, depth,
       parent_event_index
FROM t_ann_tree
WHERE tw_keep(ts_ns, $lo_ns, $hi_ns)
