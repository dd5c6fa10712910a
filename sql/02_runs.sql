-- 02_runs.sql: run selectors, the one definition of what `--run SEL` means
-- (tracewh/query/runsel.py parses the same grammar for its error messages).
--
-- A selector is a string of terms separated by commas; a run matches when it matches every
-- term: 'latest' (or an empty selector: every run), a run_id prefix (any length; 'a1b2'),
-- or KEY=VALUE (the run's label KEY is VALUE, or its run field KEY is VALUE, compared as text;
-- run fields: run_id, day, host, rank, world_size, device_name, backend, job, file_name,
-- source_path, trace_name, trace_id, dist_backend, sha256).
-- Order "latest first": ingested_at descending (one value per `tracewh ingest` command: the
-- time it started), then start_ns descending, then rank, then run_id.
--
-- run_matches(sel)  (table macro)
--   grain: one row per visible run matching the selector `sel`, latest first.
--   columns: run_id, day, job, rank, world_size, file_name, start_ns, ingested_at,
--            device_name, labels_json, pos (1 = the run `sel` resolves to), matched (number
--            of matching runs), by_prefix (whether `sel` holds a run_id prefix term)
--
-- run(sel)  (scalar macro) -> VARCHAR
--   the run_id `sel` resolves to: the first of run_matches(sel). Errors when nothing matches,
--   or when a selector with a run_id prefix matches several runs (ambiguous).
--   The per-run table macros take a run_id: give them a selector through run(), e.g.
--   SELECT * FROM stream_gaps(run('959efc7b')), kernel_ranking(run('model=bert,rank=0')),
--   or in any query: SELECT count(*) FROM gpu_ops WHERE run_id = run('latest').
--   (run() is a subquery over runs: the macros do not resolve their argument themselves, which
--   would cost every call from the CLI, which passes resolved run_ids, a second lookup.)
--
-- Helpers: tw_sel_terms(sel) (the trimmed, non-empty terms; split at chr(31) when `sel` holds
-- one, as the Python API passes terms so that a value may hold a comma, else at commas),
-- tw_sel_is_prefix(term),
-- tw_sel_key(term), tw_sel_value(term).

CREATE OR REPLACE MACRO tw_sel_terms(sel) AS
    list_filter(
        list_transform(
            string_split(coalesce(sel, ''), CASE WHEN strpos(coalesce(sel, ''), chr(31)) > 0 THEN chr(31) ELSE ',' END),
            lambda t: trim(t)),
        lambda t: t <> '');

CREATE OR REPLACE MACRO tw_sel_is_prefix(term) AS
    lower(term) <> 'latest' AND strpos(term, '=') = 0;

CREATE OR REPLACE MACRO tw_sel_key(term) AS trim(split_part(term, '=', 1));

CREATE OR REPLACE MACRO tw_sel_value(term) AS trim(substr(term, strpos(term, '=') + 1));

CREATE OR REPLACE MACRO run_matches(sel) AS TABLE
SELECT
    run_id, day, job, rank, world_size, file_name, start_ns, ingested_at, device_name,
    labels_json,
    row_number() OVER (
        ORDER BY ingested_at DESC NULLS LAST, start_ns DESC NULLS LAST, rank NULLS LAST, run_id
    ) AS pos,
    count(*) OVER () AS matched,
    len(list_filter(tw_sel_terms(sel), lambda t: tw_sel_is_prefix(t))) > 0 AS by_prefix
FROM runs r
WHERE len(list_filter(tw_sel_terms(sel), lambda t: NOT (
    lower(t) = 'latest'
    OR (tw_sel_is_prefix(t) AND starts_with(r.run_id, lower(t)))
    OR (strpos(t, '=') > 0 AND (
        coalesce(json_extract_string(r.labels_json, '$."' || replace(tw_sel_key(t), '"', '\"') || '"')
                 = tw_sel_value(t), false)
        OR coalesce(CASE tw_sel_key(t)
            WHEN 'run_id' THEN r.run_id
            WHEN 'day' THEN CAST(r.day AS VARCHAR)
            WHEN 'host' THEN r.host
            WHEN 'rank' THEN CAST(r.rank AS VARCHAR)
            WHEN 'world_size' THEN CAST(r.world_size AS VARCHAR)
            WHEN 'device_name' THEN r.device_name
            WHEN 'backend' THEN r.backend
            WHEN 'job' THEN r.job
            WHEN 'file_name' THEN r.file_name
            WHEN 'source_path' THEN r.source_path
            WHEN 'trace_name' THEN r.trace_name
            WHEN 'trace_id' THEN r.trace_id
            WHEN 'dist_backend' THEN r.dist_backend
            WHEN 'sha256' THEN r.sha256
        END = tw_sel_value(t), false)))
))) = 0
ORDER BY pos;

CREATE OR REPLACE MACRO run(sel) AS (
    SELECT CASE
        WHEN count(*) = 0 THEN error('run selector ''' || coalesce(sel, '') || ''' matches no run')
        WHEN count(*) > 1 AND bool_or(by_prefix) THEN
            error('run selector ''' || sel || ''' is ambiguous: matches ' || count(*) || ' runs')
        ELSE arg_min(run_id, pos)
    END
    FROM run_matches(sel)
);
