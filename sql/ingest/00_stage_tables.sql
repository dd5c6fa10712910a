-- Staging tables of one part of one trace: their columns and types. Not an analysis
-- view: created (empty) by tracewh.ingest.shred in each part's in-memory DuckDB;
-- 02_shred.sql writes each chunk's rows of table T straight to <part>/T/<chunk>.parquet
-- with these columns, an empty <part>/T/schema.parquet is written from the table
-- itself, and 10_link.sql reads them through the s_* views over every part
-- (`anom` alone is filled in memory). event_index is the position in the part; the
-- reader adds the part's offset.
--
-- ev    one row per `ph: X` event except python_function and GPU ops: base columns
-- gev   one row per GPU op (`ph: X` of a GPU op category): base columns, as ev
-- py    one row per python_function event: base columns, python ids
-- gpu   one row per GPU op (kernel/copy/set categories) with args: typed args
-- inst  one row per instant event (`ph: i/I`) or event of a phase tracewh does not model
-- cnt   one row per (counter event, series) of `ph: C` events
-- flow  one row per flow event (`ph: s/t/f`), its args (if any) as JSON text
-- thr   one row per metadata event (`ph: M`): process/thread names, sort order
-- anom  one row per (chunk, anomaly found in SQL): key (as in runs.anomalies_json), n
-- t_gpu_cats  the GPU op categories (tracewh.schema.arrow.GPU_OP_CATEGORIES)
--
-- tw_i64(x)       a HUGEINT id as int64 (uint64 wrapped to its two's complement)
-- tw_i64_label(x) the decimal text of an id that did not fit int64
-- tw_triple(l)    a list of 3 values (grid, block), else NULL
-- tw_bad(v, args, path)        a typed arg v is NULL though args has a non-null value there
-- tw_bad_triple(l, args, path) likewise for grid/block: not a list of 3 integers

CREATE TABLE IF NOT EXISTS ev (
    event_index BIGINT, cat VARCHAR, name VARCHAR, pid BIGINT, tid BIGINT,
    pid_label VARCHAR, tid_label VARCHAR, ts_ns BIGINT, dur_ns BIGINT,
    correlation BIGINT, external_id BIGINT, stream BIGINT, device BIGINT, args_json VARCHAR
);
CREATE TABLE IF NOT EXISTS gev (
    event_index BIGINT, cat VARCHAR, name VARCHAR, pid BIGINT, tid BIGINT,
    pid_label VARCHAR, tid_label VARCHAR, ts_ns BIGINT, dur_ns BIGINT,
    correlation BIGINT, external_id BIGINT, stream BIGINT, device BIGINT, args_json VARCHAR
);
CREATE TABLE IF NOT EXISTS py (
    event_index BIGINT, cat VARCHAR, name VARCHAR, pid BIGINT, tid BIGINT,
    pid_label VARCHAR, tid_label VARCHAR, ts_ns BIGINT, dur_ns BIGINT,
    correlation BIGINT, external_id BIGINT, stream BIGINT, device BIGINT, args_json VARCHAR,
    python_id BIGINT, python_parent_id BIGINT
);
CREATE TABLE IF NOT EXISTS gpu (
    event_index BIGINT, grid_x BIGINT, grid_y BIGINT, grid_z BIGINT,
    block_x BIGINT, block_y BIGINT, block_z BIGINT, registers_per_thread BIGINT,
    shared_memory_bytes BIGINT, blocks_per_sm DOUBLE, warps_per_sm DOUBLE,
    occupancy_pct DOUBLE, bytes BIGINT, bandwidth_gbps DOUBLE, context BIGINT,
    graph_id BIGINT, graph_node_id BIGINT
);
CREATE TABLE IF NOT EXISTS inst (
    event_index BIGINT, ph VARCHAR, cat VARCHAR, name VARCHAR, pid BIGINT, tid BIGINT,
    pid_label VARCHAR, tid_label VARCHAR, ts_ns BIGINT, scope VARCHAR, bytes BIGINT,
    total_allocated BIGINT, total_reserved BIGINT, device_type BIGINT, device_id BIGINT,
    addr BIGINT, args_json VARCHAR
);
CREATE TABLE IF NOT EXISTS cnt (
    event_index BIGINT, cat VARCHAR, name VARCHAR, pid BIGINT, tid BIGINT, ts_ns BIGINT,
    series VARCHAR, value DOUBLE
);
CREATE TABLE IF NOT EXISTS flow (
    event_index BIGINT, ph VARCHAR, cat VARCHAR, name VARCHAR, flow_id BIGINT,
    pid BIGINT, tid BIGINT, ts_ns BIGINT, bp VARCHAR, args_json VARCHAR
);
CREATE TABLE IF NOT EXISTS thr (
    pid BIGINT, tid BIGINT, pid_label VARCHAR, tid_label VARCHAR, kind VARCHAR,
    value VARCHAR, sort_index BIGINT
);
CREATE TABLE IF NOT EXISTS anom (key VARCHAR, n BIGINT);
CREATE TABLE IF NOT EXISTS t_gpu_cats (cat VARCHAR);

CREATE OR REPLACE TEMP MACRO tw_i64(x) AS
    CASE WHEN x BETWEEN -9223372036854775808 AND 9223372036854775807 THEN CAST(x AS BIGINT)
         WHEN x BETWEEN 9223372036854775808 AND 18446744073709551615
             THEN CAST(x - 18446744073709551616 AS BIGINT) END;
CREATE OR REPLACE TEMP MACRO tw_i64_label(x) AS
    CASE WHEN x NOT BETWEEN -9223372036854775808 AND 9223372036854775807
         THEN CAST(x AS VARCHAR) END;
CREATE OR REPLACE TEMP MACRO tw_triple(l) AS CASE WHEN len(l) = 3 THEN l END;
CREATE OR REPLACE TEMP MACRO tw_bad(v, args, path) AS
    CASE WHEN v IS NULL THEN coalesce(json_type(args, path), 'NULL') <> 'NULL' ELSE false END;
CREATE OR REPLACE TEMP MACRO tw_bad_triple(l, args, path) AS
    CASE WHEN l IS NULL OR len(l) <> 3 OR list_count(l) <> 3
         THEN coalesce(json_type(args, path), 'NULL') <> 'NULL' ELSE false END;
