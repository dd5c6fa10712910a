-- 12_segments.sql: the GPU timeline of a device cut into elementary segments (a sweep line).
--
-- gpu_segments(run)  (table macro)
--   grain: one row per (device, segment) where a segment is the interval between two
--          consecutive GPU op boundaries (starts or ends) on that device, from the device's
--          first op start to its last op end (idle stretches are segments too).
--   columns: device, start_ns, end_ns, dur_ns (end_ns - start_ns), compute_ops, comm_ops,
--            memcpy_ops (number of ops of each class running throughout the segment)
--   Classes: comm = category 'communication'; memcpy = op_kind memcpy or memset; compute =
--   every other GPU op. Ops without a positive duration are left out. Built from sorted
--   boundary points and running sums (O(n log n)), never from pairs of ops.

CREATE OR REPLACE MACRO gpu_segments(run) AS TABLE
WITH ops AS (
    SELECT
        device,
        ts_ns AS s,
        ts_ns + dur_ns AS e,
        CASE
            WHEN category = 'communication' THEN 'comm'
            WHEN op_kind IN ('memcpy', 'memset') THEN 'memcpy'
            ELSE 'compute'
        END AS cls
    FROM gpu_ops
    WHERE run_id = run AND dur_ns > 0 AND ts_ns IS NOT NULL
),
pts AS (
    SELECT device, s AS t, cls, 1 AS d FROM ops
    UNION ALL
    SELECT device, e AS t, cls, -1 AS d FROM ops
),
deltas AS (
    SELECT
        device,
        t,
        coalesce(sum(d) FILTER (WHERE cls = 'compute'), 0) AS d_compute,
        coalesce(sum(d) FILTER (WHERE cls = 'comm'), 0) AS d_comm,
        coalesce(sum(d) FILTER (WHERE cls = 'memcpy'), 0) AS d_memcpy
    FROM pts
    GROUP BY device, t
),
swept AS (
    SELECT
        device,
        t AS start_ns,
        lead(t) OVER (PARTITION BY device ORDER BY t) AS end_ns,
        CAST(sum(d_compute) OVER (PARTITION BY device ORDER BY t) AS BIGINT) AS compute_ops,
        CAST(sum(d_comm) OVER (PARTITION BY device ORDER BY t) AS BIGINT) AS comm_ops,
        CAST(sum(d_memcpy) OVER (PARTITION BY device ORDER BY t) AS BIGINT) AS memcpy_ops
    FROM deltas
)
SELECT device, start_ns, end_ns, end_ns - start_ns AS dur_ns, compute_ops, comm_ops, memcpy_ops
FROM swept
WHERE end_ns IS NOT NULL;
