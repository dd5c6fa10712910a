-- rows of `module_spans` for each run of t_files (see 20_out_events.sql): each nn.Module span with its path, depth and parent
-- (10_link.sql's t_mod_tree; params as 26_out_python.sql)
SELECT f.run_id, f.ingest_id, f.day,
       event_index - f.ev_off AS event_index, pid, tid, ts_ns + f.base_ns AS ts_ns, dur_ns, name, module_path, depth,
       parent_event_index - f.ev_off AS parent_event_index
FROM t_mod_tree s
JOIN t_files f ON f.file_no = s.file_no
WHERE tw_keep(ts_ns, f.lo_ns, f.hi_ns)
