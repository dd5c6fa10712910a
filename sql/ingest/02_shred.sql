-- Route the chunk `c` (01_chunk.sql) into the staged tables (00_stage_tables.sql),
-- each written straight to its own Parquet file: a statement per table, run one at a
-- time by tracewh.ingest.shred with $out set to <part folder>/<table>/<chunk>.parquet
-- (a file that gets no rows is removed). Not an analysis view. Columns and types are
-- those of the staging table of the same name. Typed args are read with
-- json_transform, which gives NULL for a value that does not convert (the text stays
-- in args_json); such values of GPU op args are counted in `anom` as mistyped:<arg>.

-- the `ph: X` rows, routed below to ev, gev (GPU ops: apart, so a gpu_ops output
-- slice reads only GPU ops) and py (python_function)
CREATE OR REPLACE TEMP VIEW x AS
SELECT CAST(_i AS BIGINT) AS event_index, CAST(cat AS VARCHAR) AS cat,
       CAST(name AS VARCHAR) AS name, tw_i64(pid) AS pid, tw_i64(tid) AS tid,
       CAST(coalesce(pid_label, tw_i64_label(pid)) AS VARCHAR) AS pid_label,
       CAST(coalesce(tid_label, tw_i64_label(tid)) AS VARCHAR) AS tid_label,
       CAST(ts AS BIGINT) AS ts_ns, CAST(dur AS BIGINT) AS dur_ns,
       CAST(_c AS BIGINT) AS correlation, CAST(_e AS BIGINT) AS external_id,
       CAST(CASE WHEN _s IS NULL AND _gpu THEN tw_i64(tid) ELSE _s END AS BIGINT) AS stream,
       CAST(CASE WHEN _d IS NULL AND _gpu THEN tw_i64(pid) ELSE _d END AS BIGINT) AS device,
       CAST(NULLIF(CAST(args AS VARCHAR), '{}') AS VARCHAR) AS args_json,
       CAST(_py AS BIGINT) AS python_id, CAST(_pp AS BIGINT) AS python_parent_id,
       _gpu, coalesce(cat = 'python_function', false) AS _python
FROM (SELECT *, coalesce(cat IN (SELECT cat FROM t_gpu_cats), false) AS _gpu FROM c)
WHERE ph = 'X';

-- ev
COPY (SELECT * EXCLUDE (python_id, python_parent_id, _gpu, _python) FROM x
      WHERE NOT _gpu AND NOT _python)
TO $out (FORMAT parquet, COMPRESSION lz4_raw);

-- gev
COPY (SELECT * EXCLUDE (python_id, python_parent_id, _gpu, _python) FROM x WHERE _gpu)
TO $out (FORMAT parquet, COMPRESSION lz4_raw);

-- py
COPY (SELECT * EXCLUDE (_gpu, _python) FROM x WHERE _python)
TO $out (FORMAT parquet, COMPRESSION lz4_raw);

CREATE OR REPLACE TEMP TABLE g AS
SELECT _i, args, json_transform(args, '{"grid": "BIGINT[]", "block": "BIGINT[]",
    "registers per thread": "BIGINT", "shared memory": "BIGINT",
    "blocks per SM": "DOUBLE", "warps per SM": "DOUBLE",
    "est. achieved occupancy %": "DOUBLE", "bytes": "BIGINT",
    "memory bandwidth (GB/s)": "DOUBLE", "context": "BIGINT", "graph id": "BIGINT",
    "graph node id": "BIGINT"}') AS a
FROM c
WHERE ph = 'X' AND args IS NOT NULL AND cat IN (SELECT cat FROM t_gpu_cats);

-- gpu
COPY (
    SELECT CAST(_i AS BIGINT) AS event_index,
           CAST(tw_triple(a.grid)[1] AS BIGINT) AS grid_x,
           CAST(tw_triple(a.grid)[2] AS BIGINT) AS grid_y,
           CAST(tw_triple(a.grid)[3] AS BIGINT) AS grid_z,
           CAST(tw_triple(a.block)[1] AS BIGINT) AS block_x,
           CAST(tw_triple(a.block)[2] AS BIGINT) AS block_y,
           CAST(tw_triple(a.block)[3] AS BIGINT) AS block_z,
           CAST(a."registers per thread" AS BIGINT) AS registers_per_thread,
           CAST(a."shared memory" AS BIGINT) AS shared_memory_bytes,
           CAST(a."blocks per SM" AS DOUBLE) AS blocks_per_sm,
           CAST(a."warps per SM" AS DOUBLE) AS warps_per_sm,
           CAST(a."est. achieved occupancy %" AS DOUBLE) AS occupancy_pct,
           CAST(a.bytes AS BIGINT) AS bytes,
           CAST(a."memory bandwidth (GB/s)" AS DOUBLE) AS bandwidth_gbps,
           CAST(a.context AS BIGINT) AS context, CAST(a."graph id" AS BIGINT) AS graph_id,
           CAST(a."graph node id" AS BIGINT) AS graph_node_id
    FROM g
) TO $out (FORMAT parquet, COMPRESSION lz4_raw);

-- typed args present (not null) that did not convert: mistyped:<arg> anomalies
INSERT INTO anom
SELECT 'mistyped:' || key, n
FROM (UNPIVOT (
    SELECT count(*) FILTER (WHERE tw_bad_triple(a.grid, args, '$.grid')) AS "grid",
           count(*) FILTER (WHERE tw_bad_triple(a.block, args, '$.block')) AS "block",
           count(*) FILTER (WHERE tw_bad(a."registers per thread", args,
                                         '$."registers per thread"')) AS "registers per thread",
           count(*) FILTER (WHERE tw_bad(a."shared memory", args, '$."shared memory"'))
               AS "shared memory",
           count(*) FILTER (WHERE tw_bad(a."blocks per SM", args, '$."blocks per SM"'))
               AS "blocks per SM",
           count(*) FILTER (WHERE tw_bad(a."warps per SM", args, '$."warps per SM"'))
               AS "warps per SM",
           count(*) FILTER (WHERE tw_bad(a."est. achieved occupancy %", args,
                                         '$."est. achieved occupancy %"'))
               AS "est. achieved occupancy %",
           count(*) FILTER (WHERE tw_bad(a.bytes, args, '$.bytes')) AS "bytes",
           count(*) FILTER (WHERE tw_bad(a."memory bandwidth (GB/s)", args,
                                         '$."memory bandwidth (GB/s)"'))
               AS "memory bandwidth (GB/s)",
           count(*) FILTER (WHERE tw_bad(a.context, args, '$.context')) AS "context",
           count(*) FILTER (WHERE tw_bad(a."graph id", args, '$."graph id"')) AS "graph id",
           count(*) FILTER (WHERE tw_bad(a."graph node id", args, '$."graph node id"'))
               AS "graph node id"
    FROM g
) ON COLUMNS(*) INTO NAME key VALUE n)
WHERE n > 0;

DROP TABLE g;

-- inst
COPY (
    SELECT CAST(_i AS BIGINT) AS event_index, CAST(ph AS VARCHAR) AS ph,
           CAST(cat AS VARCHAR) AS cat, CAST(name AS VARCHAR) AS name,
           tw_i64(pid) AS pid, tw_i64(tid) AS tid,
           CAST(coalesce(pid_label, tw_i64_label(pid)) AS VARCHAR) AS pid_label,
           CAST(coalesce(tid_label, tw_i64_label(tid)) AS VARCHAR) AS tid_label,
           CAST(ts AS BIGINT) AS ts_ns, CAST(s AS VARCHAR) AS scope,
           CAST(a.Bytes AS BIGINT) AS bytes, CAST(a."Total Allocated" AS BIGINT) AS total_allocated,
           CAST(a."Total Reserved" AS BIGINT) AS total_reserved,
           CAST(a."Device Type" AS BIGINT) AS device_type,
           CAST(a."Device Id" AS BIGINT) AS device_id, CAST(a.Addr AS BIGINT) AS addr,
           CAST(coalesce(NULLIF(CAST(args AS VARCHAR), '{}'), _raw) AS VARCHAR) AS args_json
    FROM (
        SELECT *, json_transform(args, '{"Bytes": "BIGINT", "Total Allocated": "BIGINT",
            "Total Reserved": "BIGINT", "Device Type": "BIGINT", "Device Id": "BIGINT",
            "Addr": "BIGINT"}') AS a
        FROM c
        WHERE ph IS NULL OR ph NOT IN ('X', 's', 't', 'f', 'M', 'C')
    )
) TO $out (FORMAT parquet, COMPRESSION lz4_raw);

-- cnt
COPY (
    SELECT CAST(_i AS BIGINT) AS event_index, CAST(cat AS VARCHAR) AS cat,
           CAST(name AS VARCHAR) AS name, tw_i64(pid) AS pid, tw_i64(tid) AS tid,
           CAST(ts AS BIGINT) AS ts_ns, CAST(e.key AS VARCHAR) AS series,
           CAST(CASE WHEN json_type(e.value) IN ('BIGINT', 'UBIGINT', 'HUGEINT', 'DOUBLE', 'VARCHAR')
                     THEN TRY_CAST(json_extract_string(e.value, '$') AS DOUBLE) END AS DOUBLE)
               AS value
    FROM (
        SELECT *, unnest(map_entries(json_transform(args, '"MAP(VARCHAR, JSON)"'))) AS e
        FROM c
        WHERE ph = 'C' AND json_type(args) = 'OBJECT'
    )
) TO $out (FORMAT parquet, COMPRESSION lz4_raw);

-- flow
COPY (
    SELECT CAST(_i AS BIGINT) AS event_index, CAST(ph AS VARCHAR) AS ph,
           CAST(cat AS VARCHAR) AS cat, CAST(name AS VARCHAR) AS name,
           CAST(_f AS BIGINT) AS flow_id, tw_i64(pid) AS pid, tw_i64(tid) AS tid,
           CAST(ts AS BIGINT) AS ts_ns, CAST(bp AS VARCHAR) AS bp,
           CAST(NULLIF(CAST(args AS VARCHAR), '{}') AS VARCHAR) AS args_json
    FROM c
    WHERE ph IN ('s', 't', 'f')
) TO $out (FORMAT parquet, COMPRESSION lz4_raw);

-- thr
COPY (
    SELECT tw_i64(pid) AS pid, tw_i64(tid) AS tid,
           CAST(coalesce(pid_label, tw_i64_label(pid)) AS VARCHAR) AS pid_label,
           CAST(coalesce(tid_label, tw_i64_label(tid)) AS VARCHAR) AS tid_label,
           CAST(name AS VARCHAR) AS kind,
           CAST(CASE json_type(v) WHEN 'VARCHAR' THEN json_extract_string(v, '$')
                                  WHEN 'NULL' THEN NULL
                                  ELSE CAST(v AS VARCHAR) END AS VARCHAR) AS value,
           TRY_CAST(json_extract(args, '$.sort_index') AS BIGINT) AS sort_index
    FROM (
        SELECT *, CASE WHEN json_exists(args, '$.name') THEN json_extract(args, '$.name')
                       ELSE json_extract(args, '$.labels') END AS v
        FROM c
        WHERE ph = 'M'
    )
) TO $out (FORMAT parquet, COMPRESSION lz4_raw);
