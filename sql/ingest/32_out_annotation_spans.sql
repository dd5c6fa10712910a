-- rows of `annotation_spans` for each run of t_files (see 20_out_events.sql): each user annotation (but ProfilerStep#N) with its
-- path, depth and parent (10_link.sql's t_ann_tree; params as 26_out_python.sql)
SELECT f.run_id, f.ingest_id, f.day,
       event_index - f.ev_off AS event_index, pid, tid, ts_ns + f.base_ns AS ts_ns, dur_ns, name, annotation_path, depth,
       parent_event_index - f.ev_off AS parent_event_index
FROM t_ann_tree s
JOIN t_files f ON f.file_no = s.file_no
WHERE tw_keep(ts_ns, f.lo_ns, f.hi_ns)
