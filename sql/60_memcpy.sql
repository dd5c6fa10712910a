-- 60_memcpy.sql: memory copies per kind.
--
-- memcpy_summary(run)  (table macro)
--   grain: one row per memcpy_kind (HtoD, DtoH, DtoD, PtoP, ...; NULL when unknown) of the GPU
--          ops of run `run` with op_kind 'memcpy'.
--   columns: memcpy_kind, ops, bytes (sum of bytes), total_ns (sum of dur_ns),
--            achieved_gbps (bytes / dur_ns summed over the copies that report bytes, i.e. GB/s
--            with 1 GB = 1e9 bytes; NULL when none does)
--
-- memcpy_kinds  (view, warehouse-wide)
--   grain: one row per (run_id, memcpy_kind); columns as memcpy_summary plus run_id.

CREATE OR REPLACE MACRO memcpy_summary(run) AS TABLE
SELECT
    memcpy_kind,
    count(*) AS ops,
    CAST(sum(bytes) AS BIGINT) AS bytes,
    CAST(coalesce(sum(dur_ns), 0) AS BIGINT) AS total_ns,
    sum(bytes) / nullif(sum(dur_ns) FILTER (WHERE bytes IS NOT NULL), 0) AS achieved_gbps
FROM gpu_ops
WHERE run_id = run AND op_kind = 'memcpy'
GROUP BY memcpy_kind
ORDER BY total_ns DESC, memcpy_kind;

CREATE OR REPLACE VIEW memcpy_kinds AS
SELECT
    run_id,
    memcpy_kind,
    count(*) AS ops,
    CAST(sum(bytes) AS BIGINT) AS bytes,
    CAST(coalesce(sum(dur_ns), 0) AS BIGINT) AS total_ns,
    sum(bytes) / nullif(sum(dur_ns) FILTER (WHERE bytes IS NOT NULL), 0) AS achieved_gbps
FROM gpu_ops
WHERE op_kind = 'memcpy'
GROUP BY run_id, memcpy_kind;
