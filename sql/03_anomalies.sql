-- Run anomalies, one row each. The ingest counts them into runs.anomalies_json, a JSON
-- object {key: count}: oddities of the file (negative_dur, mistyped:grid, deep_nesting,
-- truncated_strings, ...) and, from sql/ingest/40_anomalies.sql, those that skew a run's
-- times (duplicate_events, correlation_reuse, gpu_outside_cpu_window: the keys of
-- tracewh.schema.arrow.BASELINE_ANOMALIES). Which keys keep a run out of baselines is decided once,
-- in Python (tracewh.schema.arrow.BASELINE_ANOMALIES, read by tracewh.history.health: runs.unusable).
--
-- run_anomalies (view)
--     Grain: one row per (visible run, key of its anomalies_json).
--     Columns: run_id, anomaly (the key), count (its count).
CREATE OR REPLACE VIEW run_anomalies AS
SELECT r.run_id, e.key AS anomaly, TRY_CAST(e.value AS BIGINT) AS count
FROM runs r, json_each(r.anomalies_json) e
WHERE r.anomalies_json IS NOT NULL;
