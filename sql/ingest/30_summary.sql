-- one row of per-run figures for the `runs` row (relative times; no params);
-- end_ns, min_ts_ns and max_ts_ns are HUGEINT (a hostile trace may reach past int64)
SELECT
    (SELECT min(ts_ns) FROM s_ev) AS start_ns,
    (SELECT max(CAST(ts_ns AS HUGEINT) + coalesce(dur_ns, 0)) FROM s_ev) AS end_ns,
    (SELECT min(m) FROM (
        SELECT min(ts_ns) AS m FROM s_ev UNION ALL SELECT min(ts_ns) FROM s_py
        UNION ALL SELECT min(ts_ns) FROM s_inst UNION ALL SELECT min(ts_ns) FROM s_cnt
        UNION ALL SELECT min(ts_ns) FROM s_flow)) AS min_ts_ns,
    (SELECT max(m) FROM (
        SELECT max(CAST(ts_ns AS HUGEINT) + coalesce(dur_ns, 0)) AS m FROM s_ev
        UNION ALL SELECT max(CAST(ts_ns AS HUGEINT) + coalesce(dur_ns, 0)) FROM s_py
        UNION ALL SELECT max(ts_ns) FROM s_inst UNION ALL SELECT max(ts_ns) FROM s_cnt
        UNION ALL SELECT max(ts_ns) FROM s_flow)) AS max_ts_ns,
    (SELECT count(*) FROM s_ev) AS n_duration_events,
    (SELECT n_gpu_ops FROM t_link_counts) AS n_gpu_ops,
    (SELECT count(*) FROM s_ev WHERE cat IN ('kernel', 'Kernel')) AS n_kernels,
    (SELECT count(*) FROM s_ev WHERE cat IN ('gpu_memcpy', 'Memcpy')) AS n_memcpy,
    (SELECT count(*) FROM s_ev WHERE cat IN ('gpu_memset', 'Memset')) AS n_memset,
    (SELECT n_runtime FROM t_link_counts) AS n_runtime,
    (SELECT count(*) FROM s_ev WHERE cat IN ('cpu_op', 'Operator')) AS n_cpu_ops,
    (SELECT count(*) FROM s_py) AS n_python,
    (SELECT count(*) FROM s_inst) AS n_instants,
    (SELECT count(DISTINCT event_index) FROM s_cnt) AS n_counters,
    (SELECT count(*) FROM s_flow) AS n_flows,
    (SELECT count(*) FROM t_steps) AS n_steps,
    (SELECT n_unlinked_gpu_ops FROM t_link_counts) AS n_unlinked_gpu_ops,
    (SELECT n_hip_calls FROM t_link_counts) AS n_hip_calls,
    (SELECT count(*) FILTER (WHERE cat LIKE 'mtia%') FROM s_ev) AS n_mtia,
    (SELECT CASE WHEN n_graph_ops > 0 THEN 'replay' WHEN n_captures > 0 THEN 'capture'
                 ELSE 'eager' END FROM t_link_counts) AS kind
