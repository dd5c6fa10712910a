-- Anomalies of one run that skew its figures, found after the linkage (10_link.sql, read
-- through the view t_gpu_link of its output) over
-- the staging views of every part (s_ev holds the GPU ops of s_gev too; timestamps still
-- relative to baseTimeNanoseconds). Not an analysis view: run by tracewh.ingest once per
-- trace (or group of tiny traces); each row becomes a key of its run's anomalies_json (rows
-- with n = 0 are dropped).
--
-- Grain: one row per file_no (the staged trace) and anomaly key. Columns: file_no, key, n.
--
-- duplicate_events        `ph: X` events (s_ev: CPU ops, runtime calls, annotations, GPU
--                         ops) that repeat an earlier event exactly: same cat, name, pid,
--                         tid, labels, ts, dur, correlation, External id, stream, device,
--                         untyped args and, for GPU ops, typed args; counted beyond the
--                         first copy. Found by a 64-bit hash of all of them, confirmed by
--                         the typed args of the candidates only.
-- correlation_reuse       GPU ops linked by correlation id (t_gpu_link) whose id is carried
--                         by more than one runtime call of s_ev, where a later call with the
--                         same id starts after the linked one and no later than the op:
--                         the launch order says the op was launched by that later call.
-- gpu_outside_cpu_window  GPU ops that start before the CPU window (first start to last
--                         end of the non-GPU `ph: X` and python events) by more than
--                         max(1 s, the window's length), or end after it by as much.
WITH h AS (
    SELECT file_no, event_index,
           hash(cat, name, pid, tid, pid_label, tid_label, ts_ns, dur_ns, correlation,
                external_id, stream, device, args_json) AS h
    FROM s_ev
),
cand AS (
    SELECT file_no, event_index, h FROM h
    WHERE (file_no, h) IN (SELECT (file_no, h) FROM h GROUP BY file_no, h HAVING count(*) > 1)
),
full_key AS (
    SELECT c.file_no, c.h, hash(g.grid_x, g.grid_y, g.grid_z, g.block_x, g.block_y, g.block_z,
                     g.registers_per_thread, g.shared_memory_bytes, g.blocks_per_sm,
                     g.warps_per_sm, g.occupancy_pct, g.bytes, g.bandwidth_gbps, g.context,
                     g.graph_id, g.graph_node_id) AS g
    FROM cand c LEFT JOIN s_gpu g ON g.event_index = c.event_index
),
rt AS (
    SELECT file_no, event_index, correlation, ts_ns FROM s_ev
    WHERE cat IN ('cuda_runtime', 'cuda_driver', 'Runtime', 'mtia_runtime', 'hip_runtime')
      AND correlation IS NOT NULL AND ts_ns IS NOT NULL
),
reused AS (
    SELECT file_no, correlation FROM rt GROUP BY file_no, correlation HAVING count(*) > 1
),
linked AS (
    SELECT g.file_no, g.event_index, g.correlation, g.ts_ns, l.launch_index, l.launch_ts_ns
    FROM s_gev g JOIN t_gpu_link l ON l.event_index = g.event_index
    WHERE l.link_method = 'correlation' AND g.ts_ns IS NOT NULL AND l.launch_ts_ns IS NOT NULL
      AND (g.file_no, g.correlation) IN (SELECT (file_no, correlation) FROM reused)
),
contradicted AS (
    SELECT DISTINCT x.file_no, x.event_index
    FROM linked x
    JOIN rt r ON r.file_no = x.file_no AND r.correlation = x.correlation
    WHERE r.event_index <> x.launch_index AND r.ts_ns > x.launch_ts_ns AND r.ts_ns <= x.ts_ns
),
cpu AS (
    SELECT file_no, min(lo) AS lo, max(hi) AS hi FROM (
        SELECT file_no, min(ts_ns) AS lo, max(CAST(ts_ns AS HUGEINT) + coalesce(dur_ns, 0)) AS hi
        FROM s_ev
        WHERE coalesce(cat, '') NOT IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'Kernel', 'Memcpy',
                                        'Memset', 'mtia_ccp_events')
        GROUP BY file_no
        UNION ALL
        SELECT file_no, min(ts_ns), max(CAST(ts_ns AS HUGEINT) + coalesce(dur_ns, 0)) FROM s_py
        GROUP BY file_no
    )
    GROUP BY file_no
),
outside AS (
    SELECT g.file_no, count(*) AS n
    FROM s_gev g JOIN cpu ON cpu.file_no = g.file_no
    WHERE g.ts_ns IS NOT NULL AND cpu.lo IS NOT NULL
      AND (CAST(g.ts_ns AS HUGEINT) < cpu.lo - greatest(1000000000, cpu.hi - cpu.lo)
           OR CAST(g.ts_ns AS HUGEINT) + coalesce(g.dur_ns, 0)
              > cpu.hi + greatest(1000000000, cpu.hi - cpu.lo))
    GROUP BY g.file_no
)
SELECT file_no, 'duplicate_events' AS key, count(*) - count(DISTINCT (h, g)) AS n
FROM full_key GROUP BY file_no
UNION ALL
SELECT file_no, 'correlation_reuse', count(*) FROM contradicted GROUP BY file_no
UNION ALL
SELECT file_no, 'gpu_outside_cpu_window', n FROM outside
