-- 78_roofline.sql: achieved FLOP/s and bytes/s per CPU operator against the device's roof.
--
-- cpu_op_parents(run_list)  (table macro)
--   grain: one row per cpu_op event with a duration of the runs in `run_list` (VARCHAR[]).
--   columns: run_id, pid, tid, event_index, name, ts_ns, dur_ns, depth (enclosing cpu_ops on
--            the same thread), parent_event_index (the innermost enclosing cpu_op)
--   Nesting by time on each (run, pid, tid), as cpu_op_nesting (a sweep of starts and ends for
--   the depth, an ASOF join for the parent), for many runs at once.
--
-- tw_tf32_kernel(name)  (scalar macro)
--   whether a GPU kernel name says it multiplies FP32 data on TF32/XF32 matrix units
--   ('tf32', 'xf32', CUTLASS 'tensorop_s...'): an FP32 matrix op whose kernels do so is
--   compared with the tf32 roof (allow_tf32 is a global flag, not in the trace).
--
-- roofline_ops(run_list)  (table macro)
--   grain: one row per GPU op with a duration of the runs in `run_list`.
--   columns: run_id, gpu_event_index, name (the GPU op's), dur_ns, op_kind, memcpy_kind, launcher_event_index (the
--            innermost cpu_op enclosing the launch: the linkage's op; for a replayed op the
--            capture's cpu_op that recorded its graph node), op_run_id (the run of the
--            launcher's and the attributed op's events: the capture's run for a replayed op),
--            op_event_index (the cpu_op the GPU op's time is attributed to; NULL when no
--            cpu_op encloses the launch), graph (launched by a CUDA/HIP graph launch),
--            replayed (a graph-launched op mapped to its capture), graph_launch_ts_ns (the
--            graph launch of a replayed op: each launch is one call of the capture's ops),
--            op_name, input_dims, dtype, family, params, flops, bytes, roof, non_contiguous,
--            note (the attributed op's, from op_work)
--   Attribution: the nearest cpu_op, from the launcher outwards, whose work op_work can
--   compute (its own perf model: aten::addmm under aten::linear, _flash_attention_forward
--   under SDPA); the launcher itself when none can. When that op is an ancestor of the
--   launcher (the launcher has no model, e.g. a fill kernel inside a modelled op), the
--   ancestor owns all of its sub-tree's GPU ops, so its time and its FLOPs cover the same
--   work; the outermost such ancestor wins. GPU ops replayed by a graph launch are mapped
--   to the node of the capture that recorded them (graph_replay, 45_graphs.sql: a trace of
--   the same job that captured the graph) and attributed, by the same rule, from the
--   capture's cpu_op that recorded the node (its Input Dims give the work); one graph
--   launch is one call of each such op. Graph-launched ops without a capture in the
--   warehouse stay with their launcher, unmodelled (it did not issue those kernels).
--   Computed without walking the ancestor chain and without joins on time: nesting is by
--   time on each (run, pid, tid) as in cpu_op_parents (by start, longer first; an end before
--   a start at one instant); a sweep over the modelled ops counts how many are open at each
--   launcher, and a window over that level takes the latest modelled op started on it (the
--   innermost one around the launcher); a second sweep over the absorbing ops takes the
--   latest one started on level 1 (the outermost one around the launcher).
--
-- roofline_runs(run_list, peak_tflops := NULL, peak_tbs := NULL)  (table macro)
--   grain: one row per (run, attributed op name, its Input Dims, dtype, params, note) of the
--          runs in `run_list`; `params` tells apart calls with the same shapes but different
--          work (causal or not, stride, ...).
--   columns: run_id, op_name, input_dims, dtype, family, params, calls (op instances with GPU
--            time), kernels (their GPU ops), flops, bytes (per call, from op_work; NULL when not
--            computable), gpu_ns (total duration of the attributed GPU ops), tflops_per_s
--            (flops * calls / gpu_ns / 1e3: 1e12 FLOP/s), tb_per_s (bytes * calls / gpu_ns /
--            1e3: 1e12 bytes/s), intensity (flops / bytes, FLOP/byte), roof, peak_tflops (the
--            device's peak for `roof`, or the override), peak_tbs (HBM peak or the override),
--            ridge (peak_tflops / peak_tbs: the intensity where the roofs meet), bound
--            ('compute' when intensity >= ridge, else 'memory'), pct_of_peak (100 x achieved /
--            the bounding peak: tflops_per_s / peak_tflops or tb_per_s / peak_tbs), above_peak
--            (pct_of_peak > 100: a figure no device achieves, never shown unflagged; the note
--            gives the likely cause), non_contiguous (any call had a non-contiguous input, see op_work), device,
--            note (why work, bound or pct_of_peak are missing, or why pct_of_peak is above 100)
--   peak_tflops: NULL (the device table), a number (the compute roof of every row, TFLOP/s), or
--            JSON text {"bf16": 989, "vector": 67, ...} (per roof label; others from the
--            device table). peak_tbs: NULL (the device table) or TB/s.
--   Unknown devices (no device_peaks match, no override): rates without bound/pct_of_peak.
--   Host<->device and peer copies (memcpy other than DtoD) are link-bound, not HBM-bound: no
--   bound/pct_of_peak.
--
-- roofline(run, op_pattern := NULL, peak_tflops := NULL, peak_tbs := NULL)  (table macro)
--   grain: roofline_runs for the one run `run`, rows of op names matching `op_pattern`
--          (tw_op_matches; NULL: all), by gpu_ns descending (then op_name, input_dims, params,
--          dtype, note); columns as roofline_runs without
--          run_id.
--
-- roofline_history(op_pattern := NULL, since := NULL, peak_tflops := NULL, peak_tbs := NULL)
--   (table macro)
--   grain: one row per visible run of `day` >= `since` (a DATE; NULL: all) with matching
--          modelled ops, oldest first.
--   columns: day, start_ns, run_id, job, rank, labels_json, device, ops (distinct op names
--            matched), calls, gpu_ns, flops (total: sum of flops * calls), bytes (total),
--            tflops_per_s (flops / gpu_ns / 1e3), tb_per_s, pct_of_peak (the gpu_ns-weighted
--            mean of the matched rows' pct_of_peak), above_peak_rows (matched rows above 100%)
--   Matched: roofline_runs rows with flops, of op names matching `op_pattern` (tw_op_matches).
--
-- tw_op_matches(name, pattern)  (scalar macro)
--   whether `name` matches `pattern`: case-insensitive, a glob when the pattern holds any of
--   * ? [ and a substring otherwise (as metric_history's kernel_pattern); NULL pattern: true.

CREATE OR REPLACE MACRO tw_tf32_kernel(name) AS
    coalesce(regexp_matches(name, 'tf32|xf32|tensorop_s[0-9]', 'i'), false);

CREATE OR REPLACE MACRO cpu_op_parents(run_list) AS TABLE
WITH e AS (
    SELECT
        run_id, coalesce(pid, -1) AS pid_k, coalesce(tid, -1) AS tid_k,
        pid, tid, event_index, name, ts_ns, dur_ns,
        row_number() OVER (
            PARTITION BY run_id, coalesce(pid, -1), coalesce(tid, -1)
            ORDER BY ts_ns, dur_ns DESC, event_index
        ) AS seq
    FROM events
    WHERE list_contains(CAST(run_list AS VARCHAR[]), run_id) AND cat = 'cpu_op'
      AND dur_ns IS NOT NULL AND ts_ns IS NOT NULL
),
pts AS (
    SELECT run_id, pid_k, tid_k, ts_ns AS t, 1 AS k, seq, 0 AS sub, 1 AS d FROM e
    UNION ALL
    SELECT run_id, pid_k, tid_k, ts_ns + dur_ns AS t, CASE WHEN dur_ns > 0 THEN 0 ELSE 1 END AS k,
           seq, 1 AS sub, -1 AS d
    FROM e
),
depths AS (
    SELECT run_id, pid_k, tid_k, seq,
        coalesce(sum(d) OVER (
            PARTITION BY run_id, pid_k, tid_k ORDER BY t, k, seq, sub
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ), 0) AS depth,
        d
    FROM pts
),
ed AS (
    SELECT e.*, CAST(dp.depth AS BIGINT) AS depth
    FROM e JOIN depths dp USING (run_id, pid_k, tid_k, seq)
    WHERE dp.d = 1
)
SELECT c.run_id, c.pid, c.tid, c.event_index, c.name, c.ts_ns, c.dur_ns, c.depth,
       p.event_index AS parent_event_index
FROM ed c
ASOF LEFT JOIN ed p
    ON p.run_id = c.run_id AND p.pid_k = c.pid_k AND p.tid_k = c.tid_k
   AND p.depth = c.depth - 1 AND c.seq > p.seq;

CREATE OR REPLACE MACRO roofline_ops(run_list) AS TABLE
WITH
g AS (
    SELECT run_id, event_index, name, dur_ns, op_kind, memcpy_kind, launch_pid, launch_tid,
           launch_ts_ns, op_name, op_ts_ns, op_dur_ns, graph_position,
           coalesce(launch_kind = 'graph' OR launch_name ILIKE '%GraphLaunch%', false) AS graph
    FROM gpu_ops
    WHERE list_contains(CAST(run_list AS VARCHAR[]), run_id) AND dur_ns IS NOT NULL
),
-- GPU ops replayed by a graph launch, mapped to the node of the capture that recorded them
-- (graph_replay, 45_graphs.sql: same job, by position); the node's launch call, in the
-- capture's run
rep AS MATERIALIZED (
    SELECT q.run_id, r.event_index, r.capture_run_id, n.launch_event_index, r.op_name, r.op_ts_ns
    FROM (SELECT DISTINCT run_id FROM g WHERE graph_position IS NOT NULL) q,
         LATERAL graph_replay(q.run_id) r
    JOIN graph_nodes n
      ON n.run_id = r.capture_run_id AND n.capture = r.capture AND n.position = r.graph_position
    WHERE r.op_name IS NOT NULL
),
-- the runs whose cpu_ops count: those asked for and the captures their replays map to
op_runs AS (
    SELECT list_distinct(list_concat(
        CAST(run_list AS VARCHAR[]),
        coalesce((SELECT list(DISTINCT capture_run_id) FROM rep), CAST([] AS VARCHAR[])))) AS ids
),
-- every cpu_op with a duration: its place on its thread (seq: by start, longer first) and
-- the work of its signature (args_json parsed once per op)
o AS MATERIALIZED (
    SELECT
        a.run_id, a.event_index, a.name, a.pid, a.tid, a.ts_ns, a.dur_ns, a.input_dims,
        a.pid_k, a.tid_k, a.seq,
        w.dtype, w.family, w.params, w.flops, w.bytes, w.roof, w.non_contiguous, w.note,
        coalesce(w.flops IS NOT NULL AND w.bytes IS NOT NULL, false) AS modelled
    FROM (
        -- numbered before the join: the window sorts the op rows, not their work columns
        SELECT *, coalesce(pid, -1) AS pid_k, coalesce(tid, -1) AS tid_k,
               row_number() OVER (
                   PARTITION BY run_id, coalesce(pid, -1), coalesce(tid, -1)
                   ORDER BY ts_ns, dur_ns DESC, event_index
               ) AS seq
        FROM cpu_op_args((SELECT ids FROM op_runs))
        WHERE dur_ns IS NOT NULL AND ts_ns IS NOT NULL
    ) a
    LEFT JOIN op_work((SELECT ids FROM op_runs)) w
      ON w.run_id = a.run_id AND w.op_name = a.name
     AND w.input_dims IS NOT DISTINCT FROM a.input_dims
     AND w.input_types IS NOT DISTINCT FROM a.input_types
     AND w.input_strides IS NOT DISTINCT FROM a.input_strides
     AND w.concrete_inputs IS NOT DISTINCT FROM a.concrete_inputs
),
-- the launcher: the cpu_op the linkage named (the innermost one of identical spans)
l0 AS (
    SELECT g.*, o.event_index AS launcher
    FROM g
    LEFT JOIN o
      ON o.run_id = g.run_id AND o.pid = g.launch_pid AND o.tid = g.launch_tid
     AND o.ts_ns = g.op_ts_ns AND o.name = g.op_name AND o.dur_ns = g.op_dur_ns
    QUALIFY row_number() OVER (PARTITION BY g.run_id, g.event_index ORDER BY o.seq DESC NULLS LAST) = 1
),
-- a replayed op's launcher is the capture's cpu_op that recorded its node: the innermost
-- one of that name and start on the thread of the node's launch call
cl AS (
    SELECT r.run_id, r.event_index, o.run_id AS op_run_id, o.event_index AS launcher
    FROM rep r
    JOIN events le ON le.run_id = r.capture_run_id AND le.event_index = r.launch_event_index
    JOIN o ON o.run_id = r.capture_run_id AND o.pid IS NOT DISTINCT FROM le.pid
          AND o.tid IS NOT DISTINCT FROM le.tid AND o.ts_ns = r.op_ts_ns AND o.name = r.op_name
    WHERE list_contains((SELECT ids FROM op_runs), le.run_id)
    QUALIFY row_number() OVER (PARTITION BY r.run_id, r.event_index ORDER BY o.seq DESC) = 1
),
-- op_run_id: the run of the launcher's event (the capture's for a replayed op)
l AS (
    SELECT l0.* REPLACE (CASE WHEN c.launcher IS NOT NULL THEN c.launcher ELSE l0.launcher END AS launcher),
           coalesce(c.op_run_id, l0.run_id) AS op_run_id,
           c.launcher IS NOT NULL AS replayed
    FROM l0
    LEFT JOIN cl c ON c.run_id = l0.run_id AND c.event_index = l0.event_index
),
launchers AS (
    SELECT op_run_id AS run_id, launcher, bool_and(graph AND NOT replayed) AS graph
    FROM l WHERE launcher IS NOT NULL
    GROUP BY op_run_id, launcher
),
-- the ops sweep 1 needs: modelled ops and the launchers of GPU ops not replayed by a graph
p1 AS (
    SELECT o.run_id, o.pid_k, o.tid_k, o.ts_ns, o.dur_ns, o.seq, o.event_index, o.modelled,
           la.launcher IS NOT NULL AS launcher
    FROM o
    LEFT JOIN launchers la ON la.run_id = o.run_id AND la.launcher = o.event_index AND NOT la.graph
    WHERE o.modelled OR la.launcher IS NOT NULL
),
-- sweep 1, over the modelled ops and the launchers of each thread: `lv` = how many modelled
-- ops are open at an op's start, itself included (ends before starts at one instant, as in
-- cpu_op_parents). A modelled op's own lv is its level among the modelled ops; the innermost
-- modelled op around a launcher (or the launcher itself) is the latest modelled op that
-- started before it on that level (a window over the level, no join).
s1 AS (
    SELECT *, sum(d) OVER (PARTITION BY run_id, pid_k, tid_k ORDER BY t, k, seq, sub
                           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS lv
    FROM (
        SELECT run_id, pid_k, tid_k, ts_ns AS t, 1 AS k, seq, 0 AS sub,
               CASE WHEN modelled THEN 1 ELSE 0 END AS d, event_index, modelled, launcher
        FROM p1
        UNION ALL
        SELECT run_id, pid_k, tid_k, ts_ns + dur_ns AS t, CASE WHEN dur_ns > 0 THEN 0 ELSE 1 END AS k,
               seq, 1 AS sub, -1 AS d, event_index, modelled, launcher
        FROM p1 WHERE modelled
    )
),
nearest AS (
    SELECT run_id, launcher, nm
    FROM (
        SELECT run_id, sub, launcher AS is_launcher, event_index AS launcher,
               last_value(CASE WHEN sub = 0 AND modelled THEN event_index END IGNORE NULLS) OVER (
                   PARTITION BY run_id, pid_k, tid_k, lv ORDER BY t, k, seq, sub
                   ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS nm
        FROM s1
    )
    WHERE sub = 0 AND is_launcher
),
-- an ancestor that is the nearest modelled op of a launcher below it owns its sub-tree
absorbing AS (
    SELECT DISTINCT run_id, nm AS event_index FROM nearest WHERE nm IS NOT NULL AND nm <> launcher
),
-- sweep 2, over the absorbing ops and the launchers: the outermost absorbing op around a
-- launcher (or the launcher itself) is the latest one that started on level 1, when any is
-- open there
p2 AS (
    SELECT o.run_id, o.pid_k, o.tid_k, o.ts_ns, o.dur_ns, o.seq, o.event_index,
           a.event_index IS NOT NULL AS absorbing, n.launcher IS NOT NULL AS launcher
    FROM o
    LEFT JOIN absorbing a ON a.run_id = o.run_id AND a.event_index = o.event_index
    LEFT JOIN nearest n ON n.run_id = o.run_id AND n.launcher = o.event_index
    WHERE a.event_index IS NOT NULL OR n.launcher IS NOT NULL
),
s2 AS (
    SELECT *, sum(d) OVER (PARTITION BY run_id, pid_k, tid_k ORDER BY t, k, seq, sub
                           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS lv
    FROM (
        SELECT run_id, pid_k, tid_k, ts_ns AS t, 1 AS k, seq, 0 AS sub,
               CASE WHEN absorbing THEN 1 ELSE 0 END AS d, event_index, absorbing, launcher
        FROM p2
        UNION ALL
        SELECT run_id, pid_k, tid_k, ts_ns + dur_ns AS t, CASE WHEN dur_ns > 0 THEN 0 ELSE 1 END AS k,
               seq, 1 AS sub, -1 AS d, event_index, absorbing, launcher
        FROM p2 WHERE absorbing
    )
),
outer_absorbing AS (
    SELECT run_id, launcher, CASE WHEN lv >= 1 THEN oa END AS oa
    FROM (
        SELECT run_id, sub, lv, launcher AS is_launcher, event_index AS launcher,
               last_value(CASE WHEN sub = 0 AND absorbing AND lv = 1 THEN event_index END IGNORE NULLS) OVER (
                   PARTITION BY run_id, pid_k, tid_k ORDER BY t, k, seq, sub
                   ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS oa
        FROM s2
    )
    WHERE sub = 0 AND is_launcher
),
attr AS (
    SELECT n.run_id, n.launcher, coalesce(x.oa, n.nm, n.launcher) AS attributed
    FROM nearest n
    LEFT JOIN outer_absorbing x ON x.run_id = n.run_id AND x.launcher = n.launcher
)
SELECT
    l.run_id, l.event_index AS gpu_event_index, l.name, l.dur_ns, l.op_kind, l.memcpy_kind,
    l.launcher AS launcher_event_index, l.op_run_id,
    w.event_index AS op_event_index, l.graph, l.replayed,
    CASE WHEN l.replayed THEN l.launch_ts_ns END AS graph_launch_ts_ns,
    w.name AS op_name, w.input_dims, w.dtype, w.family, w.params,
    CASE WHEN NOT l.graph OR l.replayed THEN w.flops END AS flops,
    CASE WHEN NOT l.graph OR l.replayed THEN w.bytes END AS bytes,
    w.roof, w.non_contiguous,
    CASE
        WHEN l.launcher IS NULL AND l.launch_pid IS NULL AND NOT l.replayed
            THEN 'unlinked: no launch call found for these GPU ops'
        WHEN l.launcher IS NULL THEN 'no CPU operator encloses the launch'
        WHEN l.graph AND NOT l.replayed
            THEN 'CUDA/HIP graph replay with no capture of the graph in the warehouse (ingest the trace that captured it): the operator around the launch did not issue these kernels'
        ELSE w.note
    END AS note
FROM l
LEFT JOIN attr a ON a.run_id = l.op_run_id AND a.launcher = l.launcher
LEFT JOIN o w
  ON w.run_id = l.op_run_id
 AND w.event_index = CASE WHEN l.graph AND NOT l.replayed THEN l.launcher ELSE coalesce(a.attributed, l.launcher) END;

CREATE OR REPLACE MACRO roofline_runs(run_list, peak_tflops := NULL, peak_tbs := NULL) AS TABLE
WITH per_op AS (
    SELECT
        run_id, op_run_id, op_event_index, graph, graph_launch_ts_ns,
        any_value(op_name) AS op_name, any_value(input_dims) AS input_dims,
        any_value(dtype) AS dtype, any_value(family) AS family, any_value(params) AS params,
        any_value(flops) AS flops, any_value(bytes) AS bytes, any_value(roof) AS roof,
        any_value(non_contiguous) AS non_contiguous, any_value(note) AS note,
        CAST(sum(dur_ns) AS BIGINT) AS gpu_ns,
        count(*) AS kernels,
        bool_or(op_kind = 'memcpy' AND coalesce(memcpy_kind, '') <> 'DtoD') AS host_copy,
        bool_or(tw_tf32_kernel(name)) AS tf32
    FROM roofline_ops(run_list)
    GROUP BY run_id, op_run_id, op_event_index, graph, graph_launch_ts_ns
),
per_op_roof AS (
    SELECT * REPLACE (
        CASE WHEN roof = 'fp32' AND tf32 AND family IN ('gemm', 'grouped_gemm', 'attention', 'attention_bwd', 'conv', 'conv_bwd')
             THEN 'tf32' ELSE roof END AS roof)
    FROM per_op
),
grp AS (
    SELECT
        run_id, op_name, input_dims, dtype, family, params, flops, bytes, roof, note,
        count(*) AS calls,
        CAST(sum(kernels) AS BIGINT) AS kernels,
        CAST(sum(gpu_ns) AS BIGINT) AS gpu_ns,
        bool_or(host_copy) AS host_copy,
        bool_or(non_contiguous) AS non_contiguous
    FROM per_op_roof
    GROUP BY run_id, op_name, input_dims, dtype, family, params, flops, bytes, roof, note
),
peaked AS (
    SELECT
        g.*,
        d.device,
        coalesce(
            TRY_CAST(CAST(peak_tflops AS VARCHAR) AS DOUBLE),
            TRY_CAST(json_extract_string(TRY_CAST(CAST(peak_tflops AS VARCHAR) AS JSON), '$."' || g.roof || '"') AS DOUBLE),
            tw_peak_tflops(d, g.roof)
        ) AS pk_tflops,
        coalesce(CAST(peak_tbs AS DOUBLE), d.hbm_tbs) AS pk_tbs,
        g.flops * g.calls / nullif(g.gpu_ns, 0) / 1e3 AS tflops_per_s,
        g.bytes * g.calls / nullif(g.gpu_ns, 0) / 1e3 AS tb_per_s,
        g.flops / nullif(g.bytes, 0) AS intensity
    FROM grp g
    LEFT JOIN run_device(run_list) d ON d.run_id = g.run_id
),
bounded AS (
    SELECT
        *,
        pk_tflops / nullif(pk_tbs, 0) AS ridge,
        CASE WHEN host_copy OR intensity IS NULL OR pk_tflops IS NULL OR pk_tbs IS NULL THEN NULL
             WHEN intensity >= pk_tflops / pk_tbs THEN 'compute' ELSE 'memory' END AS bound
    FROM peaked
),
pct AS (
    SELECT
        *,
        CASE bound WHEN 'compute' THEN 100.0 * tflops_per_s / pk_tflops
                   WHEN 'memory' THEN 100.0 * tb_per_s / pk_tbs END AS pct_of_peak
    FROM bounded
)
SELECT
    run_id, op_name, input_dims, dtype, family, params, calls, kernels, flops, bytes, gpu_ns,
    tflops_per_s, tb_per_s, intensity, roof, pk_tflops AS peak_tflops, pk_tbs AS peak_tbs, ridge, bound,
    pct_of_peak, coalesce(pct_of_peak > 100, false) AS above_peak,
    non_contiguous, device,
    nullif(concat_ws('; ', note,
        CASE WHEN pct_of_peak > 100 AND bound = 'memory'
             THEN 'above the HBM peak: not a measurement of HBM traffic; likely cause: cache reuse '
                  || '(bytes are each tensor read once, and a working set of '
                  || CAST(round(bytes / 1e6, 1) AS VARCHAR) || ' MB per call may be served by L2), '
                  || 'or a device row that is not this GPU (--peak-tbs)'
             WHEN pct_of_peak > 100
             THEN 'above the ' || roof || ' peak: not achievable; likely cause: a FLOP count above '
                  || 'the work done (masking, sparsity, a lower-precision kernel), GPU time missing '
                  || 'from the op (kernels attributed elsewhere), durations that are not measured '
                  || '(synthetic traces), or a device row that is not this GPU (--peak-tflops)' END,
        CASE WHEN host_copy THEN 'host<->device or peer copy: bound by the link, not HBM' END,
        CASE WHEN flops IS NOT NULL AND bytes IS NOT NULL AND NOT host_copy
                  AND (pk_tflops IS NULL OR pk_tbs IS NULL)
             THEN 'no peak for this device/dtype (give --peak-tflops/--peak-tbs)' END
    ), '') AS note
FROM pct;

CREATE OR REPLACE MACRO tw_op_matches(name, pattern) AS
    pattern IS NULL OR CASE
        WHEN regexp_matches(pattern, '[*?\[]') THEN lower(coalesce(name, '')) GLOB lower(pattern)
        ELSE contains(lower(coalesce(name, '')), lower(pattern))
    END;

CREATE OR REPLACE MACRO roofline(run, op_pattern := NULL, peak_tflops := NULL, peak_tbs := NULL) AS TABLE
SELECT * EXCLUDE (run_id)
FROM roofline_runs([run], peak_tflops := peak_tflops, peak_tbs := peak_tbs)
WHERE tw_op_matches(op_name, op_pattern)
ORDER BY gpu_ns DESC, op_name, input_dims, params, dtype, note;

CREATE OR REPLACE MACRO roofline_history(op_pattern := NULL, since := NULL, peak_tflops := NULL, peak_tbs := NULL) AS TABLE
WITH rs AS (
    SELECT list(run_id) AS run_list
    FROM runs
    WHERE CAST(since AS DATE) IS NULL OR day >= CAST(since AS DATE)
),
rows AS (
    SELECT *
    FROM roofline_runs((SELECT run_list FROM rs), peak_tflops := peak_tflops, peak_tbs := peak_tbs)
    WHERE flops IS NOT NULL AND gpu_ns > 0
      AND tw_op_matches(op_name, op_pattern)
),
agg AS (
    SELECT
        run_id,
        any_value(device) AS device,
        count(DISTINCT op_name) AS ops,
        CAST(sum(calls) AS BIGINT) AS calls,
        CAST(sum(gpu_ns) AS BIGINT) AS gpu_ns,
        sum(flops * calls) AS flops,
        sum(bytes * calls) AS bytes,
        sum(pct_of_peak * gpu_ns) / nullif(sum(gpu_ns) FILTER (WHERE pct_of_peak IS NOT NULL), 0) AS pct_of_peak,
        count(*) FILTER (WHERE above_peak) AS above_peak_rows
    FROM rows
    GROUP BY run_id
)
SELECT
    r.day, r.start_ns, r.run_id, r.job, r.rank, r.labels_json, a.device, a.ops, a.calls, a.gpu_ns,
    a.flops, a.bytes,
    a.flops / nullif(a.gpu_ns, 0) / 1e3 AS tflops_per_s,
    a.bytes / nullif(a.gpu_ns, 0) / 1e3 AS tb_per_s,
    a.pct_of_peak, a.above_peak_rows
FROM agg a
JOIN runs r ON r.run_id = a.run_id
ORDER BY r.start_ns, r.rank, r.run_id;
