-- the row of `fingerprints` for each run of t_files (see 20_out_events.sql): a MinHash
-- signature of its workload's tokens, 128 slots (tracewh.schema.arrow.MINHASH_SLOTS), each the
-- least md5 (lower 64 bits, shifted to fit int64) of "<slot>:<token>" over the tokens.
-- Tokens: with GPU ops, 'k:' + the base kernel key (06_kernel_key.sql: stable across
-- recompiles) of each distinct GPU op name, and 'o:' + name + input dims of each distinct
-- CPU operator that launched one (t_op); without GPU ops (a CPU trace), 'o:' + name +
-- input dims of each distinct cpu_op. md5 is used because it is the same everywhere and
-- in every DuckDB version: fingerprints of runs ingested years apart compare.
WITH has_gpu AS (
    SELECT f.file_no, count(g.file_no) > 0 AS g
    FROM t_files f LEFT JOIN (SELECT file_no FROM s_gev) g ON g.file_no = f.file_no
    GROUP BY f.file_no
),
tok AS (
    SELECT DISTINCT file_no, 'k:' || tw_kernel_key_base(name) AS token
    FROM s_gev WHERE name IS NOT NULL
    UNION
    SELECT DISTINCT file_no, 'o:' || name || ':' || coalesce(input_dims, '')
    FROM t_op WHERE name IS NOT NULL
    UNION
    SELECT DISTINCT e.file_no, 'o:' || e.name || ':'
        || coalesce(CAST(json_extract(e.args_json, '$."Input Dims"') AS VARCHAR), '')
    FROM s_ev e JOIN has_gpu h ON h.file_no = e.file_no
    WHERE NOT h.g AND e.cat IN ('cpu_op', 'Operator') AND e.name IS NOT NULL
),
slots AS (
    SELECT file_no, i, min(md5_number_lower(CAST(i AS VARCHAR) || ':' || token)) AS m
    FROM tok, range(128) r(i)
    GROUP BY file_no, i
),
sig AS (
    SELECT file_no, list(CAST(m >> 1 AS BIGINT) ORDER BY i) AS minhash
    FROM slots GROUP BY file_no
),
n_tok AS (
    SELECT file_no, count(*) AS tokens FROM tok GROUP BY file_no
)
SELECT f.run_id, f.ingest_id, f.day,
       CASE WHEN h.g THEN 'gpu' ELSE 'cpu' END AS source,
       coalesce(n.tokens, 0) AS tokens,
       coalesce(s.minhash, []) AS minhash
FROM t_files f
JOIN has_gpu h ON h.file_no = f.file_no
LEFT JOIN n_tok n ON n.file_no = f.file_no
LEFT JOIN sig s ON s.file_no = f.file_no
