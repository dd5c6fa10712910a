-- the row of `fingerprints` for one run (params: $run_id, $ingest_id, $day): a MinHash
-- signature of its workload's tokens, 128 slots (tracewh.schema.MINHASH_SLOTS), each the
-- least md5 (lower 64 bits, shifted to fit int64) of "<slot>:<token>" over the tokens.
-- Tokens: with GPU ops, 'k:' + the base kernel key (06_kernel_key.sql: stable across
-- recompiles) of each distinct GPU op name, and 'o:' + name + input dims of each distinct
-- CPU operator that launched one (t_op); without GPU ops (a CPU trace), 'o:' + name +
-- input dims of each distinct cpu_op. md5 is used because it is the same everywhere and
-- in every DuckDB version: fingerprints of runs ingested years apart compare.
WITH has_gpu AS (
    SELECT count(*) > 0 AS g FROM s_gev
),
tok AS (
    SELECT DISTINCT 'k:' || tw_kernel_key_base(name) AS token
    FROM s_gev WHERE name IS NOT NULL
    UNION
    SELECT DISTINCT 'o:' || name || ':' || coalesce(input_dims, '')
    FROM t_op WHERE name IS NOT NULL
    UNION
    SELECT DISTINCT 'o:' || name || ':'
        || coalesce(CAST(json_extract(args_json, '$."Input Dims"') AS VARCHAR), '')
    FROM s_ev
    WHERE NOT (SELECT g FROM has_gpu) AND cat IN ('cpu_op', 'Operator') AND name IS NOT NULL
),
slots AS (
    SELECT i, min(md5_number_lower(CAST(i AS VARCHAR) || ':' || token)) AS m
    FROM tok, range(128) r(i)
    GROUP BY i
)
SELECT $run_id AS run_id, $ingest_id AS ingest_id, CAST($day AS DATE) AS day,
       CASE WHEN (SELECT g FROM has_gpu) THEN 'gpu' ELSE 'cpu' END AS source,
       (SELECT count(*) FROM tok) AS tokens,
       coalesce((SELECT list(CAST(m >> 1 AS BIGINT) ORDER BY i) FROM slots), []) AS minhash
