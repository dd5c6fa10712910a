-- the workload tokens of each trace of t_files whose MinHash makes its `fingerprints` row
-- (tracewh.ingest.fingerprint computes the signature; 29_out_fingerprints.sql writes it).
-- grain: one row per (file_no, token), distinct. columns: file_no, token.
-- Tokens: with GPU ops, 'k:' + the base kernel key (06_kernel_key.sql: stable across
-- recompiles) of each distinct GPU op name, and 'o:' + name + input dims of each distinct
-- CPU operator that launched one (t_op); without GPU ops (a CPU trace), 'o:' + name +
-- input dims of each distinct cpu_op.
WITH has_gpu AS (  -- as in 29_out_fingerprints.sql
    SELECT f.file_no, count(g.file_no) > 0 AS g
    FROM t_files f LEFT JOIN (SELECT file_no FROM s_gev) g ON g.file_no = f.file_no
    GROUP BY f.file_no
)
SELECT DISTINCT file_no, 'k:' || tw_kernel_key_base(name) AS token
FROM (SELECT DISTINCT file_no, name FROM s_gev WHERE name IS NOT NULL)  -- the regexes once a name
UNION
SELECT DISTINCT file_no, 'o:' || name || ':' || coalesce(input_dims, '')
FROM t_op WHERE name IS NOT NULL
UNION
SELECT DISTINCT e.file_no, 'o:' || e.name || ':'
    || coalesce(CAST(json_extract(e.args_json, '$."Input Dims"') AS VARCHAR), '')
FROM s_ev e JOIN has_gpu h ON h.file_no = e.file_no
WHERE NOT h.g AND e.cat IN ('cpu_op', 'Operator') AND e.name IS NOT NULL
