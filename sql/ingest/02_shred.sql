-- Route the chunk `c` (01_chunk.sql) into the staging tables (00_stage_tables.sql).
-- Not an analysis view, no params. Typed args are read with json_transform, which
-- gives NULL for a value that does not convert (the text stays in args_json); such
-- values of GPU op args are counted in `anom` as mistyped:<arg>.

INSERT INTO ev
SELECT _i, cat, name, tw_i64(pid), tw_i64(tid),
       coalesce(pid_label, tw_i64_label(pid)), coalesce(tid_label, tw_i64_label(tid)),
       ts, dur, _c, _e,
       CASE WHEN _s IS NULL AND cat IN (SELECT cat FROM t_gpu_cats) THEN tw_i64(tid) ELSE _s END,
       CASE WHEN _d IS NULL AND cat IN (SELECT cat FROM t_gpu_cats) THEN tw_i64(pid) ELSE _d END,
       NULLIF(CAST(args AS VARCHAR), '{}')
FROM c
WHERE ph = 'X' AND cat IS DISTINCT FROM 'python_function';

CREATE OR REPLACE TEMP TABLE g AS
SELECT _i, args, json_transform(args, '{"grid": "BIGINT[]", "block": "BIGINT[]",
    "registers per thread": "BIGINT", "shared memory": "BIGINT",
    "blocks per SM": "DOUBLE", "warps per SM": "DOUBLE",
    "est. achieved occupancy %": "DOUBLE", "bytes": "BIGINT",
    "memory bandwidth (GB/s)": "DOUBLE", "context": "BIGINT", "graph id": "BIGINT",
    "graph node id": "BIGINT"}') AS a
FROM c
WHERE ph = 'X' AND args IS NOT NULL AND cat IN (SELECT cat FROM t_gpu_cats);

INSERT INTO gpu
SELECT _i, tw_triple(a.grid)[1], tw_triple(a.grid)[2], tw_triple(a.grid)[3],
       tw_triple(a.block)[1], tw_triple(a.block)[2], tw_triple(a.block)[3],
       a."registers per thread", a."shared memory", a."blocks per SM", a."warps per SM",
       a."est. achieved occupancy %", a.bytes, a."memory bandwidth (GB/s)", a.context,
       a."graph id", a."graph node id"
FROM g;

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

INSERT INTO py
SELECT _i, cat, name, tw_i64(pid), tw_i64(tid),
       coalesce(pid_label, tw_i64_label(pid)), coalesce(tid_label, tw_i64_label(tid)),
       ts, dur, _c, _e, _s, _d, NULLIF(CAST(args AS VARCHAR), '{}'), _py, _pp
FROM c
WHERE ph = 'X' AND cat = 'python_function';

INSERT INTO inst
SELECT _i, ph, cat, name, tw_i64(pid), tw_i64(tid),
       coalesce(pid_label, tw_i64_label(pid)), coalesce(tid_label, tw_i64_label(tid)),
       ts, s, a.Bytes, a."Total Allocated", a."Total Reserved", a."Device Type",
       a."Device Id", a.Addr, coalesce(NULLIF(CAST(args AS VARCHAR), '{}'), _raw)
FROM (
    SELECT *, json_transform(args, '{"Bytes": "BIGINT", "Total Allocated": "BIGINT",
        "Total Reserved": "BIGINT", "Device Type": "BIGINT", "Device Id": "BIGINT",
        "Addr": "BIGINT"}') AS a
    FROM c
    WHERE ph IS NULL OR ph NOT IN ('X', 's', 't', 'f', 'M', 'C')
);

INSERT INTO cnt
SELECT _i, cat, name, tw_i64(pid), tw_i64(tid), ts, e.key,
       CASE WHEN json_type(e.value) IN ('BIGINT', 'UBIGINT', 'HUGEINT', 'DOUBLE', 'VARCHAR')
            THEN TRY_CAST(json_extract_string(e.value, '$') AS DOUBLE) END
FROM (
    SELECT *, unnest(map_entries(json_transform(args, '"MAP(VARCHAR, JSON)"'))) AS e
    FROM c
    WHERE ph = 'C' AND json_type(args) = 'OBJECT'
);

INSERT INTO flow
SELECT _i, ph, cat, name, _f, tw_i64(pid), tw_i64(tid), ts, bp
FROM c
WHERE ph IN ('s', 't', 'f');

INSERT INTO thr
SELECT tw_i64(pid), tw_i64(tid),
       coalesce(pid_label, tw_i64_label(pid)), coalesce(tid_label, tw_i64_label(tid)), name,
       CASE json_type(v) WHEN 'VARCHAR' THEN json_extract_string(v, '$') WHEN 'NULL' THEN NULL
                         ELSE CAST(v AS VARCHAR) END,
       TRY_CAST(json_extract(args, '$.sort_index') AS BIGINT)
FROM (
    SELECT *, CASE WHEN json_exists(args, '$.name') THEN json_extract(args, '$.name')
                   ELSE json_extract(args, '$.labels') END AS v
    FROM c
    WHERE ph = 'M'
);
