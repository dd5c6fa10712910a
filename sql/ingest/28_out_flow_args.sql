-- rows of `flow_args` for one run: the args of each flow event that has any (e.g. HTA's
-- critical-path annotations), kept apart from `flows` (params as 25_out_flows.sql)
SELECT $run_id AS run_id, $ingest_id AS ingest_id, CAST($day AS DATE) AS day,
       event_index, args_json
FROM s_flow
WHERE args_json IS NOT NULL AND tw_keep(ts_ns, $lo_ns, $hi_ns)
