-- one row of per-run figures per file_no of t_files, for its `runs` row (relative times; no
-- params); end_ns, min_ts_ns and max_ts_ns are HUGEINT (a hostile trace may reach past int64)
WITH ev AS (
    SELECT file_no, min(ts_ns) AS start_ns,
           max(CAST(ts_ns AS HUGEINT) + coalesce(dur_ns, 0)) AS end_ns,
           count(*) AS n_duration_events,
           count(*) FILTER (WHERE cat IN ('kernel', 'Kernel')) AS n_kernels,
           count(*) FILTER (WHERE cat IN ('gpu_memcpy', 'Memcpy')) AS n_memcpy,
           count(*) FILTER (WHERE cat IN ('gpu_memset', 'Memset')) AS n_memset,
           count(*) FILTER (WHERE cat IN ('cpu_op', 'Operator')) AS n_cpu_ops,
           count(*) FILTER (WHERE cat LIKE 'mtia%') AS n_mtia
    FROM s_ev GROUP BY file_no
),
py AS (
    SELECT file_no, min(ts_ns) AS lo, max(CAST(ts_ns AS HUGEINT) + coalesce(dur_ns, 0)) AS hi,
           count(*) AS n
    FROM s_py GROUP BY file_no
),
inst AS (SELECT file_no, min(ts_ns) AS lo, max(ts_ns) AS hi, count(*) AS n
         FROM s_inst GROUP BY file_no),
cnt AS (SELECT file_no, min(ts_ns) AS lo, max(ts_ns) AS hi, count(DISTINCT event_index) AS n
        FROM s_cnt GROUP BY file_no),
flow AS (SELECT file_no, min(ts_ns) AS lo, max(ts_ns) AS hi, count(*) AS n
         FROM s_flow GROUP BY file_no),
steps AS (SELECT file_no, count(*) AS n FROM t_steps GROUP BY file_no)
SELECT
    f.file_no,
    ev.start_ns,
    ev.end_ns,
    least(ev.start_ns, py.lo, inst.lo, cnt.lo, flow.lo) AS min_ts_ns,
    greatest(ev.end_ns, py.hi, CAST(inst.hi AS HUGEINT), CAST(cnt.hi AS HUGEINT),
             CAST(flow.hi AS HUGEINT)) AS max_ts_ns,
    coalesce(ev.n_duration_events, 0) AS n_duration_events,
    coalesce(lc.n_gpu_ops, 0) AS n_gpu_ops,
    coalesce(ev.n_kernels, 0) AS n_kernels,
    coalesce(ev.n_memcpy, 0) AS n_memcpy,
    coalesce(ev.n_memset, 0) AS n_memset,
    coalesce(lc.n_runtime, 0) AS n_runtime,
    coalesce(ev.n_cpu_ops, 0) AS n_cpu_ops,
    coalesce(py.n, 0) AS n_python,
    coalesce(inst.n, 0) AS n_instants,
    coalesce(cnt.n, 0) AS n_counters,
    coalesce(flow.n, 0) AS n_flows,
    coalesce(steps.n, 0) AS n_steps,
    coalesce(lc.n_unlinked_gpu_ops, 0) AS n_unlinked_gpu_ops,
    coalesce(lc.n_hip_calls, 0) AS n_hip_calls,
    coalesce(ev.n_mtia, 0) AS n_mtia,
    CASE WHEN lc.n_graph_ops > 0 THEN 'replay' WHEN lc.n_captures > 0 THEN 'capture'
         ELSE 'eager' END AS kind
FROM t_files f
LEFT JOIN ev ON ev.file_no = f.file_no
LEFT JOIN py ON py.file_no = f.file_no
LEFT JOIN inst ON inst.file_no = f.file_no
LEFT JOIN cnt ON cnt.file_no = f.file_no
LEFT JOIN flow ON flow.file_no = f.file_no
LEFT JOIN steps ON steps.file_no = f.file_no
LEFT JOIN t_link_counts lc ON lc.file_no = f.file_no
ORDER BY f.file_no
