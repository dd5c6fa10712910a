-- rows of `flow_args` for each run of t_files (see 20_out_events.sql): the args of each flow event that has any (e.g. HTA's
-- critical-path annotations), kept apart from `flows` (params as 25_out_flows.sql)
SELECT f.run_id, f.ingest_id, f.day,
       event_index - f.ev_off AS event_index, args_json
FROM s_flow s
JOIN t_files f ON f.file_no = s.file_no
WHERE args_json IS NOT NULL AND tw_keep(ts_ns, f.lo_ns, f.hi_ns)
