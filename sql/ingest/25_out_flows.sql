-- rows of `flows` for each run of t_files (see 20_out_events.sql)
SELECT f.run_id, f.ingest_id, f.day,
       event_index - f.ev_off AS event_index, ph, cat, name, flow_id, pid, tid, ts_ns + f.base_ns AS ts_ns, bp
FROM s_flow s
JOIN t_files f ON f.file_no = s.file_no
WHERE tw_keep(ts_ns, f.lo_ns, f.hi_ns)
