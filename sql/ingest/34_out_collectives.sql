-- rows of `collectives` for each run of t_files (see 20_out_events.sql): one row per
-- communication kernel, with its collective's args (tracewh.schema.arrow.COLLECTIVES).
-- Which kernels: GPU ops of op_kind kernel whose category is communication (sql/05_names.sql
-- tw_category: NCCL, RCCL, HCCL, MSCCL(++), c10d, custom all-reduce kernels), and any other
-- kernel whose args carry "Collective name". Args read from the kernel's args_json (Kineto
-- copies the collective's record_param_comms args onto the kernel); a missing or unreadable
-- arg is NULL and the kernel still a row.
--   collective   tw_collective("Collective name", kernel name) (05_names.sql)
--   seq          the trace's per-group sequence number ("Seq", "seq" or "Sequence number")
--                where present (seq_source = 'trace'); else the 0-based ordinal of the
--                kernel among the run's communication kernels of the same process group
--                (pg_name, pg_ranks), in launch order (launch start, else kernel start, then
--                event_index) (seq_source = 'ordinal')
--   msg_bytes    in_nelems x tw_dtype_bytes(dtype): the per-rank input message
--   out_bytes    out_nelems x tw_dtype_bytes(dtype)
-- With --steps, exactly the kernels launched in the kept steps (as 21_out_gpu_ops.sql).
WITH c AS (
    SELECT e.file_no, e.event_index, e.name, e.stream, e.device, e.ts_ns, e.dur_ns,
           x.launch_ts_ns, x.step, e.args_json AS a
    FROM s_gev e
    JOIN t_names n ON n.cat IS NOT DISTINCT FROM e.cat AND n.name IS NOT DISTINCT FROM e.name
    JOIN t_gpu_link x ON x.event_index = e.event_index
    WHERE n.op_kind = 'kernel'
      AND (n.category = 'communication'
           OR (contains(e.args_json, 'Collective name')
               AND coalesce(json_exists(e.args_json, '$."Collective name"'), false)))
),
p AS (
    SELECT c.*,
           json_extract_string(a, '$."Collective name"') AS collective_name,
           json_extract_string(a, '$."Process Group Name"') AS pg_name,
           json_extract_string(a, '$."Process Group Description"') AS pg_desc,
           json_extract_string(a, '$."Process Group Ranks"') AS pg_ranks,
           TRY_CAST(json_extract_string(a, '$."Group size"') AS BIGINT) AS pg_size,
           TRY_CAST(coalesce(json_extract_string(a, '$."Seq"'), json_extract_string(a, '$."seq"'),
                             json_extract_string(a, '$."Sequence number"')) AS BIGINT) AS trace_seq,
           json_extract_string(a, '$."dtype"') AS dtype,
           TRY_CAST(json_extract_string(a, '$."In msg nelems"') AS BIGINT) AS in_nelems,
           TRY_CAST(json_extract_string(a, '$."Out msg nelems"') AS BIGINT) AS out_nelems,
           json_extract_string(a, '$."In split size"') AS in_split_sizes,
           json_extract_string(a, '$."Out split size"') AS out_split_sizes
    FROM c
)
SELECT f.run_id, f.ingest_id, f.day,
       p.event_index - f.ev_off AS event_index, p.name, p.stream, p.device,
       p.ts_ns + f.base_ns AS ts_ns, p.dur_ns, p.launch_ts_ns + f.base_ns AS launch_ts_ns, p.step,
       tw_collective(p.collective_name, p.name) AS collective, p.collective_name,
       p.pg_name, p.pg_desc, p.pg_ranks, p.pg_size,
       coalesce(p.trace_seq, row_number() OVER (
           PARTITION BY p.file_no, p.pg_name, p.pg_ranks
           ORDER BY coalesce(p.launch_ts_ns, p.ts_ns), p.ts_ns, p.event_index) - 1) AS seq,
       CASE WHEN p.trace_seq IS NOT NULL THEN 'trace' ELSE 'ordinal' END AS seq_source,
       p.dtype, tw_dtype_bytes(p.dtype) AS dtype_bytes, p.in_nelems, p.out_nelems,
       p.in_split_sizes, p.out_split_sizes,
       p.in_nelems * tw_dtype_bytes(p.dtype) AS msg_bytes,
       p.out_nelems * tw_dtype_bytes(p.dtype) AS out_bytes
FROM p
JOIN t_files f ON f.file_no = p.file_no
WHERE f.lo_ns IS NULL OR EXISTS (
    SELECT 1 FROM t_kept k WHERE k.file_no = p.file_no AND k.step = p.step)
ORDER BY p.event_index
