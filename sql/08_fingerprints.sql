-- 08_fingerprints.sql: a run's workload fingerprint computed from its stored tables, for runs
-- ingested before the `fingerprints` table existed (tracewh.history.workload reads it).
--
-- run_fingerprints_in(run_ids)  (table macro)
--   grain: one row per visible run whose run_id is in run_ids (a VARCHAR[]).
--   columns: run_id, ingest_id, day, source, tokens, minhash: the columns of the
--            `fingerprints` table, with the definition of sql/ingest/29_out_fingerprints.sql
--            applied to the run's rows instead of its staged events:
--   source: 'gpu' when the run recorded GPU ops (runs.n_gpu_ops > 0, the ingest's test of its
--   staged GPU ops), else 'cpu'.
--   tokens (how many distinct tokens were hashed): for a 'gpu' run, 'k:' + the base kernel
--   key (tw_kernel_key_base) of each distinct gpu_ops.name, and 'o:' + op_name + ':' +
--   op_input_dims (the CPU operator that launched the op and its "Input Dims", as the ingest
--   stored them; '' without dims) of each distinct launching operator; for a 'cpu' run,
--   'o:' + name + ':' + the "Input Dims" of args_json of each distinct `events` row of
--   category cpu_op / Operator.
--   minhash: 128 slots (tracewh.schema.arrow.MINHASH_SLOTS); slot i is the least
--   md5_number_lower(i || ':' || token) over the tokens, shifted right by one bit to fit an
--   int64 ([] without tokens).
--   Equal to the ingest-time row of the same trace (tests/ingest/test_backfill.py),
--   except for a run ingested with --steps N: the ingest hashes every GPU op of the trace,
--   while gpu_ops holds those of the kept steps only (the same kernels, in practice).

CREATE OR REPLACE MACRO run_fingerprints_in(run_ids) AS TABLE
WITH r AS (
    SELECT run_id, ingest_id, day, coalesce(n_gpu_ops, 0) > 0 AS gpu
    FROM runs
    WHERE list_contains(run_ids, run_id)
),
ops AS MATERIALIZED (
    SELECT DISTINCT run_id, name, op_name, op_input_dims
    FROM gpu_ops
    WHERE list_contains(run_ids, run_id)
),
cpu_runs AS (
    SELECT coalesce(list(run_id), []) AS ids FROM r WHERE NOT gpu
),
tok AS (
    SELECT DISTINCT run_id, 'k:' || tw_kernel_key_base(name) AS token
    FROM (SELECT DISTINCT run_id, name FROM ops WHERE name IS NOT NULL)
    UNION
    SELECT DISTINCT run_id, 'o:' || op_name || ':' || coalesce(op_input_dims, '')
    FROM ops
    WHERE op_name IS NOT NULL
    UNION
    SELECT DISTINCT run_id, 'o:' || name || ':'
        || coalesce(CAST(json_extract(args_json, '$."Input Dims"') AS VARCHAR), '')
    FROM events
    WHERE list_contains((SELECT ids FROM cpu_runs), run_id)
      AND cat IN ('cpu_op', 'Operator') AND name IS NOT NULL
),
slots AS (
    SELECT run_id, i, min(md5_number_lower(CAST(i AS VARCHAR) || ':' || token)) AS m
    FROM tok, range(128) t(i)
    GROUP BY run_id, i
),
sig AS (
    SELECT run_id, list(CAST(m >> 1 AS BIGINT) ORDER BY i) AS minhash
    FROM slots
    GROUP BY run_id
),
n AS (
    SELECT run_id, count(*) AS tokens FROM tok GROUP BY run_id
)
SELECT r.run_id, r.ingest_id, r.day,
       CASE WHEN r.gpu THEN 'gpu' ELSE 'cpu' END AS source,
       coalesce(n.tokens, 0) AS tokens,
       coalesce(sig.minhash, []) AS minhash
FROM r
LEFT JOIN n ON n.run_id = r.run_id
LEFT JOIN sig ON sig.run_id = r.run_id
ORDER BY r.run_id;
