-- 70_breakdown.sql: GPU time breakdown per device.
--
-- gpu_time_breakdown(run)  (table macro)
--   grain: one row per device of run `run`.
--   columns: device, window_ns (first GPU op start to last end: the active window),
--            computation_ns (time with at least one compute op running), communication_ns
--            (time with at least one communication op running), comm_overlapped_ns
--            (communication while computing), comm_exposed_ns (communication, no compute),
--            memcpy_exposed_ns (memcpy/memset running, no compute, no communication),
--            idle_ns (nothing running), overlap_ratio (comm_overlapped_ns / communication_ns:
--            0.0 when communication never overlaps computation, NULL only without
--            communication)
--   computation_ns + comm_exposed_ns + memcpy_exposed_ns + idle_ns = window_ns. Classes as
--   in gpu_segments.

CREATE OR REPLACE MACRO gpu_time_breakdown(run) AS TABLE
SELECT
    device,
    CAST(sum(dur_ns) AS BIGINT) AS window_ns,
    CAST(coalesce(sum(dur_ns) FILTER (WHERE compute_ops > 0), 0) AS BIGINT) AS computation_ns,
    CAST(coalesce(sum(dur_ns) FILTER (WHERE comm_ops > 0), 0) AS BIGINT) AS communication_ns,
    CAST(coalesce(sum(dur_ns) FILTER (WHERE comm_ops > 0 AND compute_ops > 0), 0) AS BIGINT)
        AS comm_overlapped_ns,
    CAST(coalesce(sum(dur_ns) FILTER (WHERE comm_ops > 0 AND compute_ops = 0), 0) AS BIGINT)
        AS comm_exposed_ns,
    CAST(coalesce(sum(dur_ns) FILTER (
        WHERE memcpy_ops > 0 AND comm_ops = 0 AND compute_ops = 0), 0) AS BIGINT)
        AS memcpy_exposed_ns,
    CAST(coalesce(sum(dur_ns) FILTER (
        WHERE memcpy_ops = 0 AND comm_ops = 0 AND compute_ops = 0), 0) AS BIGINT) AS idle_ns,
    coalesce(sum(dur_ns) FILTER (WHERE comm_ops > 0 AND compute_ops > 0), 0)
        / nullif(sum(dur_ns) FILTER (WHERE comm_ops > 0), 0) AS overlap_ratio
FROM gpu_segments(run)
GROUP BY device
ORDER BY device;
