-- 07_kernel_keys.sql: each GPU op name's kernel_key, resolved over the runs (06_kernel_key.sql).
--
-- kernel_keys_of(pairs)  (table macro)
--   grain: one row per distinct name of pairs, a list of STRUCT(run_id VARCHAR, name VARCHAR):
--          the GPU op names each run holds (NULL names left out).
--   columns: name, kernel_key, key_level ('coarse' | 'base' | 'fine')
--   kernel_key: the coarsest level that keeps distinct kernels distinct: a name takes its
--   coarse key unless some run holds two names with that coarse key and different fine keys,
--   then its base key, unless some run holds two names with that base key and different fine
--   keys, then its fine key. So a kernel renumbered or retuned by a recompile keeps its key
--   across runs, while two kernels that run side by side (triton_poi_fused_add_0 and _1 in
--   one run) keep theirs apart. The one definition of the resolution: the view below and
--   series_values (93_changes.sql, which hands it the names of its own scan of gpu_ops) use it.
--
-- kernel_keys  (view)
--   grain: one row per distinct GPU op name of the visible runs (of the connection's
--          partitions).
--   columns: name, kernel_key, key_level: kernel_keys_of the (run_id, name) pairs of gpu_ops.
--

CREATE OR REPLACE MACRO kernel_keys_of(pairs) AS TABLE
WITH rn AS (
    -- unnest as a table function: in a projection, DuckDB carried the whole list on each row
    SELECT DISTINCT p.run_id, p.name
    FROM unnest(pairs) AS u(p)
    WHERE p.name IS NOT NULL
),
n AS (
    SELECT name, tw_kernel_key_fine(name) AS fine, tw_kernel_key_base(name) AS base,
           tw_kernel_key_coarse(name) AS coarse
    FROM (SELECT DISTINCT name FROM rn)
),
-- a key is ambiguous when one run holds names of two fine keys under it
amb_coarse AS (
    SELECT DISTINCT n.coarse
    FROM rn JOIN n USING (name)
    GROUP BY rn.run_id, n.coarse
    HAVING count(DISTINCT n.fine) > 1
),
amb_base AS (
    SELECT DISTINCT n.base
    FROM rn JOIN n USING (name)
    GROUP BY rn.run_id, n.base
    HAVING count(DISTINCT n.fine) > 1
)
SELECT
    n.name,
    CASE
        WHEN n.coarse NOT IN (SELECT coarse FROM amb_coarse) THEN n.coarse
        WHEN n.base NOT IN (SELECT base FROM amb_base) THEN n.base
        ELSE n.fine
    END AS kernel_key,
    CASE
        WHEN n.coarse NOT IN (SELECT coarse FROM amb_coarse) THEN 'coarse'
        WHEN n.base NOT IN (SELECT base FROM amb_base) THEN 'base'
        ELSE 'fine'
    END AS key_level
FROM n;

CREATE OR REPLACE VIEW kernel_keys AS
SELECT *
FROM kernel_keys_of((
    SELECT coalesce(list({'run_id': run_id, 'name': name}), [])
    FROM (SELECT DISTINCT run_id, name FROM gpu_ops WHERE name IS NOT NULL)
));
