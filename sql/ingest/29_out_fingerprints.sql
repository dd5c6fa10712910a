-- the row of `fingerprints` for each run of t_files (see 20_out_events.sql): a MinHash
-- signature of its workload's tokens (29_fingerprint_tokens.sql), 128 slots
-- (tracewh.core.categories.MINHASH_SLOTS), each the least md5 (lower 64 bits, shifted to fit
-- int64) of "<slot>:<token>" over the tokens: DuckDB's
-- min(md5_number_lower(CAST(slot AS VARCHAR) || ':' || token)) >> 1, computed by
-- tracewh.ingest.fingerprint into t_minhash (file_no, tokens, minhash; no row: no token).
-- md5 is used because it is the same everywhere and in every version: fingerprints of runs
-- ingested years apart compare.
WITH has_gpu AS (  -- as in 29_fingerprint_tokens.sql
    SELECT f.file_no, count(g.file_no) > 0 AS g
    FROM t_files f LEFT JOIN (SELECT file_no FROM s_gev) g ON g.file_no = f.file_no
    GROUP BY f.file_no
)
SELECT f.run_id, f.ingest_id, f.day,
       CASE WHEN h.g THEN 'gpu' ELSE 'cpu' END AS source,
       coalesce(m.tokens, 0) AS tokens,
       coalesce(m.minhash, []) AS minhash
FROM t_files f
JOIN has_gpu h ON h.file_no = f.file_no
LEFT JOIN t_minhash m ON m.file_no = f.file_no
