-- 65_memory.sql: device memory from the profiler's [memory] events (profile_memory=True).
--
-- Definitions (the README's "Memory" section says the same in more words):
--   A [memory] event is one instant of `instants` named '[memory]' with a Bytes value: one
--   allocation (Bytes > 0) or free (Bytes < 0) by PyTorch's allocator on one device
--   (Device Type, Device Id). Its Total Allocated is the allocator's count of bytes held by
--   live tensors on that device just after the event, Total Reserved the bytes the caching
--   allocator holds from the driver (allocated + cached free blocks; 0 on the CPU, which
--   does not cache). Both count memory allocated before the trace began.
--   device_type: 'cpu' (Device Type 0) or 'gpu' (any accelerator: CUDA 1, HIP 6, XPU 12,
--   MPS 13, HPU 15, MTIA 19, ...); device_kind: that type's name (cpu, cuda, hip, ...);
--   device: Device Id (-1 for the CPU); device_name: 'cpu', 'cuda:0', 'hip:0', ...
--   Order: a device's events are ordered by (ts_ns, event_index): seq 1, 2, ...
--   Allocated at a point: the Total Allocated of the device's latest event; where a trace
--   has no Total Allocated, the running sum of Bytes (memory from before the trace is then
--   unknown and counted 0).
--   Pairing: a free is paired with the allocation it releases by address: the previous
--   event of the same device and Addr, when that is an allocation (the caching allocator
--   hands an address out again only after it was freed). A free with no such allocation
--   released memory allocated before the trace began; an allocation with no free is still
--   live when the trace ends.
--   Before the trace: the allocated level before a device's first event (its Total
--   Allocated minus its Bytes) is memory allocated before the trace began; at the peak, the
--   part of the peak not held by a traced allocation (peak allocated minus the live traced
--   allocations) is still that memory.
--   Operator: an allocation's op is the innermost CPU operator (cat cpu_op, legacy Operator;
--   positive duration) running on the event's thread (pid, tid) at its timestamp: an
--   operator that starts at the event's time encloses it, one that ends then does not (the
--   rule of gpu_ops.op_name for a launch); record_function annotations (user_annotation,
--   ProfilerStep#N) are not operators.
--   Module: an allocation's module_path is that of the innermost nn.Module span open on
--   its thread at its timestamp (module_segments of 55_modules.sql: the spans' names,
--   outermost first, joined by '/'); NULL without module spans (record with_modules=True).
--   Step: the ProfilerStep#N whose window [first start, last end) of its spans holds the
--   event.
--   Peak: the device's largest allocated level; its time is that of the first event reaching
--   it. Live at the peak: a traced allocation made at or before the peak event (by seq) and
--   not freed by then.
--
-- tw_device_kind(device_type)  (scalar macro)
--   the c10 DeviceType name of a Device Type number: cpu, cuda, hip, xpu, mps, hpu, mtia,
--   privateuse1, ... ('type<N>' for the rest).
--
-- memory_events_in(run_ids)  (table macro)
--   grain: one row per [memory] event, with a Bytes value and a Device Type, of the runs in
--          the list `run_ids`; columns: run_id, then those of memory_events.
--
-- memory_events(run)  (table macro)
--   grain: one row per [memory] event of run `run` with a Bytes value and a Device Type.
--   columns: device_type, device_kind, device, device_name, seq, event_index, pid, tid,
--            ts_ns, bytes (signed), addr, kind ('alloc' | 'free'; NULL for 0 bytes),
--            allocated_bytes (allocated after the event), reserved_bytes (Total Reserved
--            after the event, NULL where the trace has none), pair_seq, pair_ts_ns,
--            pair_event_index (for an allocation its free, for a free its allocation; NULL
--            when unpaired)
--
-- memory_allocations(run, live_only := false)  (table macro)
--   grain: one row per allocation (kind 'alloc') of run `run`; with live_only, only those
--          live at their device's peak (then only the operators around those are swept).
--   columns: device_type, device_kind, device, device_name, seq, event_index, pid, tid,
--            ts_ns, bytes, addr, free_seq, free_ts_ns, free_event_index (NULL: never freed
--            within the trace), lifetime_ns (free_ts_ns - ts_ns; NULL when never freed),
--            op_event_index, op_name, op_ts_ns, op_dur_ns (the innermost enclosing CPU
--            operator; NULL outside any), module_path, step, live_at_peak, age_at_peak_ns (the device's
--            peak time - ts_ns; negative after the peak), peak_allocated_ts_ns,
--            peak_allocated_bytes (the device's)
--
-- memory_summary(run)  (table macro)
--   grain: one row per device of run `run` with [memory] events, the largest peak first.
--   columns: device_type, device_kind, device, device_name, events, allocations, frees,
--            allocated_bytes (sum of allocation sizes), freed_bytes (sum of freed sizes),
--            start_allocated_bytes (allocated before the first event: from before the
--            trace), end_allocated_bytes (after the last event), peak_allocated_bytes,
--            peak_allocated_ts_ns, peak_offset_ns (peak_allocated_ts_ns - runs.start_ns),
--            peak_reserved_bytes, peak_reserved_ts_ns (first event reaching it),
--            peak_live_allocations, peak_live_bytes (traced allocations live at the peak and
--            their bytes), peak_before_trace_bytes (peak_allocated_bytes - peak_live_bytes),
--            top_op_name, top_op_live_bytes (the operator whose allocations hold the most of
--            the peak), top_module_path, top_module_live_bytes (likewise per module path),
--            unpaired_frees, unpaired_freed_bytes (frees of memory allocated
--            before the trace), live_at_end_allocations, live_at_end_bytes (allocations
--            never freed within the trace)
--
-- memory_peak_holders(run, level := 'op')  (table macro)
--   grain: one row per (device, origin, module_path, op_name) holding memory at the
--          device's peak (level 'module': per (device, origin, module_path), op_name NULL);
--          origin 'traced' (live allocations made by op_name in module_path; NULL: outside
--          any operator / module) or 'before_trace' (one row: the part of the peak
--          allocated before the trace began, op_name and module_path NULL).
--   columns: device_type, device_kind, device, device_name, origin, module_path, op_name,
--            allocations,
--            live_bytes, share_of_peak (live_bytes / peak_allocated_bytes), largest_bytes,
--            rank (1 = the largest holder of the device)
--
-- memory_peak_allocations(run, n := 20)  (table macro)
--   grain: one row per allocation live at its device's peak, the n largest per device.
--   columns: device_type, device_kind, device, device_name, rank (1 = largest), event_index,
--            ts_ns, offset_ns (ts_ns - runs.start_ns), bytes, addr, op_name, module_path, step,
--            age_at_peak_ns (peak time - ts_ns), free_ts_ns, lifetime_ns (NULL: still live
--            when the trace ends), peak_allocated_ts_ns
--
-- memory_steps_in(run_ids)  (table macro)
--   grain: one row per (run of the list `run_ids`, ProfilerStep N, device); columns: run_id,
--          then those of memory_steps.
--
-- memory_steps(run)  (table macro)
--   grain: one row per (ProfilerStep N, device with [memory] events) of run `run`; a step's
--          window is [first start, last end) of its ProfilerStep#N spans.
--   columns: step, device_type, device_kind, device, device_name, start_ns, wall_ns,
--            start_allocated_bytes (allocated when the window opens: after the device's
--            latest earlier event, else before its first one), end_allocated_bytes (after
--            the step's last event; start_allocated_bytes without one),
--            peak_allocated_bytes (largest level in the window, the level it opens with
--            included), peak_allocated_ts_ns (first event reaching it; start_ns when the
--            opening level is the peak), peak_reserved_bytes (likewise; NULL without
--            Total Reserved), events, allocations, frees, allocated_bytes, freed_bytes,
--            net_bytes (end_allocated_bytes - start_allocated_bytes: what the step kept),
--            retained_allocations, retained_bytes (allocations of the step not freed
--            before its window closes), peak_growth_bytes (peak_allocated_bytes minus the
--            previous step's; NULL for the first step)
--
-- memory_leak_check(run)  (table macro)
--   grain: one row per device of run `run` with [memory] events and at least 2 steps.
--   columns: device_type, device_kind, device, device_name, steps, first_peak_bytes,
--            last_peak_bytes (peak allocated of the first and last step), growth_per_step_bytes
--            ((last - first) / (steps - 1)), rising_steps (steps whose peak exceeds the
--            previous step's), rising_openings (steps that open at a higher level than the
--            previous step opened: memory kept between the two, inside the step or between
--            steps), retaining_steps (steps with net_bytes > 0), leak_suspect
--   leak_suspect: at least 3 steps, and every step after the first both peaks higher and
--   opens higher than the one before: the per-step peak rises steadily because memory is
--   kept. A workload that frees what each step allocates opens every step at the same level
--   and never qualifies, however its peaks vary.
--
-- memory_timeline(run, buckets := 1000)  (table macro)
--   grain: one row per (device, time bucket with events) of run `run`; the run's
--          [runs.start_ns, runs.end_ns] (widened to the events) in `buckets` equal buckets.
--   columns: device_type, device_kind, device, device_name, bucket, ts_ns (bucket start),
--            end_ns, events, allocated_bytes (after the bucket's last event),
--            min_allocated_bytes, max_allocated_bytes (lowest / highest level inside the
--            bucket, the level before its first event included: the peak is never lost),
--            reserved_bytes, max_reserved_bytes
--
-- run_memory_in(run_ids)  (table macro)
--   grain: one row per (run of the list `run_ids`, device with [memory] events).
--   columns: run_id, device_type, device_kind, device, device_name, events,
--            peak_allocated_bytes, peak_reserved_bytes, n_steps, peak_allocated_per_step_bytes,
--            step_peak_sd_bytes (standard deviation of the steps' peaks; NULL with fewer
--            than 2 steps)
--   peak_allocated_per_step_bytes: the highest peak allocated of any ProfilerStep of the run
--   (the level a step opens with included, as memory_steps); the run's peak allocated when
--   it has no steps. It is what a history compares: runs with more or fewer steps than
--   before still compare (a peak does not add up over steps).
--
-- run_memory  (view, warehouse-wide)
--   grain and columns: run_memory_in over every visible run.

CREATE OR REPLACE MACRO tw_device_kind(device_type) AS
    CASE device_type
        WHEN 0 THEN 'cpu' WHEN 1 THEN 'cuda' WHEN 2 THEN 'mkldnn' WHEN 3 THEN 'opengl'
        WHEN 4 THEN 'opencl' WHEN 5 THEN 'ideep' WHEN 6 THEN 'hip' WHEN 7 THEN 'fpga'
        WHEN 8 THEN 'maia' WHEN 9 THEN 'xla' WHEN 10 THEN 'vulkan' WHEN 11 THEN 'metal'
        WHEN 12 THEN 'xpu' WHEN 13 THEN 'mps' WHEN 14 THEN 'meta' WHEN 15 THEN 'hpu'
        WHEN 16 THEN 've' WHEN 17 THEN 'lazy' WHEN 18 THEN 'ipu' WHEN 19 THEN 'mtia'
        WHEN 20 THEN 'privateuse1'
        ELSE 'type' || CAST(device_type AS VARCHAR)
    END;

CREATE OR REPLACE MACRO memory_events_in(run_ids) AS TABLE
WITH m AS (
    SELECT
        run_id,
        CASE WHEN device_type = 0 THEN 'cpu' ELSE 'gpu' END AS dtype,
        tw_device_kind(device_type) AS device_kind,
        device_id AS device,
        CASE WHEN device_type = 0 THEN 'cpu'
             ELSE tw_device_kind(device_type) || ':' || coalesce(CAST(device_id AS VARCHAR), '?')
        END AS device_name,
        event_index, pid, tid, ts_ns, bytes, addr, total_allocated, total_reserved,
        CASE WHEN bytes > 0 THEN 'alloc' WHEN bytes < 0 THEN 'free' END AS kind,
        -- one sort per device serves the order, the running sum and the count
        row_number() OVER w AS seq,
        sum(bytes) OVER (w ROWS UNBOUNDED PRECEDING) AS running,
        -- a Total Allocated missing in every event of the device: the running sum of Bytes
        count(total_allocated) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
            AS n_total
    FROM instants
    WHERE run_id IN (SELECT unnest(run_ids)) AND name = '[memory]' AND bytes IS NOT NULL
      AND ts_ns IS NOT NULL AND device_type IS NOT NULL
    WINDOW w AS (PARTITION BY run_id, device_type, device_id ORDER BY ts_ns, event_index)
),
p AS (
    SELECT *,
        lead({'kind': kind, 'seq': seq, 'ts': ts_ns, 'idx': event_index}) OVER a AS nxt,
        lag({'kind': kind, 'seq': seq, 'ts': ts_ns, 'idx': event_index}) OVER a AS prv
    FROM m
    WINDOW a AS (PARTITION BY run_id, device_kind, device, addr ORDER BY seq)
),
q AS (
    SELECT *,
        CASE WHEN addr IS NULL THEN NULL
             WHEN kind = 'alloc' AND nxt.kind = 'free' THEN nxt
             WHEN kind = 'free' AND prv.kind = 'alloc' THEN prv END AS pair
    FROM p
)
SELECT
    run_id, dtype AS device_type, device_kind, device, device_name, seq, event_index, pid, tid,
    ts_ns, bytes, addr, kind,
    CAST(CASE WHEN n_total > 0 THEN total_allocated ELSE running END AS BIGINT) AS allocated_bytes,
    total_reserved AS reserved_bytes,
    pair.seq AS pair_seq, pair.ts AS pair_ts_ns, pair.idx AS pair_event_index
FROM q;

CREATE OR REPLACE MACRO memory_events(run) AS TABLE
SELECT * EXCLUDE (run_id) FROM memory_events_in([run]);

CREATE OR REPLACE MACRO memory_allocations(run, live_only := false) AS TABLE
WITH ev AS MATERIALIZED (
    SELECT * FROM memory_events(run)
),
peak AS (
    SELECT device_kind, device,
           max(allocated_bytes) AS peak_allocated_bytes,
           first(seq ORDER BY allocated_bytes DESC, seq) AS peak_seq,
           first(ts_ns ORDER BY allocated_bytes DESC, seq) AS peak_ts
    FROM ev
    GROUP BY device_kind, device
),
al AS MATERIALIZED (
    SELECT e.*, p.peak_allocated_bytes, p.peak_ts,
           e.seq <= p.peak_seq AND (e.pair_seq IS NULL OR e.pair_seq > p.peak_seq) AS live
    FROM ev e
    JOIN peak p ON p.device_kind = e.device_kind AND p.device IS NOT DISTINCT FROM e.device
    WHERE e.kind = 'alloc'
      AND (NOT live_only OR (e.seq <= p.peak_seq AND (e.pair_seq IS NULL OR e.pair_seq > p.peak_seq)))
),
pts AS MATERIALIZED (
    SELECT pid, tid, 2 * ts_ns + 1 AS k, event_index
    FROM al
    WHERE pid IS NOT NULL AND tid IS NOT NULL
),
ops0 AS (
    SELECT event_index, name, pid, tid, ts_ns, dur_ns, ts_ns + dur_ns AS end_ns
    FROM events
    WHERE run_id = run AND cat IN ('cpu_op', 'Operator')
      AND dur_ns > 0 AND ts_ns IS NOT NULL AND pid IS NOT NULL AND tid IS NOT NULL
),
-- only the operators that enclose an allocation can be one's innermost operator; they are
-- closed under "encloses" (an op's ancestors enclose what it encloses), so their nesting
-- levels are those of the full set: the first allocation at or after each op's start
-- (one ASOF join) tells which ops to keep
ops AS MATERIALIZED (
    SELECT o.*
    FROM ops0 o
    ASOF JOIN pts p ON p.pid = o.pid AND p.tid = o.tid AND 2 * o.ts_ns + 1 <= p.k
    WHERE p.k < 2 * o.end_ns
),
-- one sweep per thread over op starts (+1), op ends (-1) and allocations (0): the running
-- sum at an allocation is the nesting depth there, at an op's start its level; the
-- innermost enclosing op is the last op that started at that level (keys 2t for ends,
-- 2t+1 for starts and allocations, starts first and outermost first at equal keys)
sweep AS MATERIALIZED (
    SELECT pid, tid, k, q, event_index, end_ns, depth
    FROM (
        SELECT *, sum(d) OVER (PARTITION BY pid, tid ORDER BY k, q, o DESC, event_index
                               ROWS UNBOUNDED PRECEDING) AS depth
        FROM (
            SELECT pid, tid, 2 * ts_ns + 1 AS k, false AS q, 1 AS d, end_ns AS o,
                   event_index, end_ns
            FROM ops
            UNION ALL
            SELECT pid, tid, 2 * end_ns AS k, false AS q, -1 AS d, 0 AS o,
                   NULL AS event_index, NULL AS end_ns
            FROM ops
            UNION ALL
            SELECT pid, tid, k, true AS q, 0 AS d, 0 AS o, event_index, NULL AS end_ns
            FROM pts
        )
    )
    WHERE d >= 0
),
att AS (
    SELECT m.event_index, CASE WHEN o.end_ns > (m.k - 1) // 2 THEN o.event_index END AS op_index
    FROM (FROM sweep WHERE q) m
    ASOF LEFT JOIN (FROM sweep WHERE NOT q) o
        ON o.pid = m.pid AND o.tid = m.tid AND o.depth = m.depth AND m.k >= o.k
),
w AS (
    SELECT step, min(ts_ns) AS s, max(ts_ns + dur_ns) AS e
    FROM steps
    WHERE run_id = run AND ts_ns IS NOT NULL AND dur_ns IS NOT NULL
    GROUP BY step
),
st AS (
    SELECT al.event_index, CASE WHEN al.ts_ns < w.e THEN w.step END AS step
    FROM al ASOF LEFT JOIN w ON al.ts_ns >= w.s
),
-- the innermost nn.Module span open on the allocating thread (module_segments of 55_modules)
md AS (
    SELECT al.event_index, CASE WHEN al.ts_ns < g.end_ns THEN g.module_path END AS module_path
    FROM al
    ASOF LEFT JOIN module_segments(run) g
        ON g.pid = al.pid AND g.tid = al.tid AND al.ts_ns >= g.start_ns
)
SELECT
    al.device_type, al.device_kind, al.device, al.device_name, al.seq, al.event_index,
    al.pid, al.tid, al.ts_ns, al.bytes, al.addr,
    al.pair_seq AS free_seq, al.pair_ts_ns AS free_ts_ns, al.pair_event_index AS free_event_index,
    al.pair_ts_ns - al.ts_ns AS lifetime_ns,
    ops.event_index AS op_event_index, ops.name AS op_name, ops.ts_ns AS op_ts_ns,
    ops.dur_ns AS op_dur_ns,
    md.module_path,
    st.step,
    al.live AS live_at_peak,
    al.peak_ts - al.ts_ns AS age_at_peak_ns,
    al.peak_ts AS peak_allocated_ts_ns,
    al.peak_allocated_bytes
FROM al
LEFT JOIN att ON att.event_index = al.event_index
LEFT JOIN ops ON ops.event_index = att.op_index
LEFT JOIN st ON st.event_index = al.event_index
LEFT JOIN md ON md.event_index = al.event_index;

CREATE OR REPLACE MACRO memory_peak_holders(run, level := 'op') AS TABLE
WITH al AS MATERIALIZED (
    SELECT * FROM memory_allocations(run, live_only := true)
),
devs AS (
    SELECT device_type, device_kind, device, device_name,
           max(allocated_bytes) AS peak_allocated_bytes
    FROM memory_events(run)
    GROUP BY device_type, device_kind, device, device_name
),
traced AS (
    SELECT device_type, device_kind, device, device_name, 'traced' AS origin, module_path,
           CASE WHEN level = 'module' THEN NULL ELSE op_name END AS op_name,
           count(*) AS allocations, sum(bytes) AS live_bytes, max(bytes) AS largest_bytes,
           any_value(peak_allocated_bytes) AS peak_allocated_bytes
    FROM al
    GROUP BY device_type, device_kind, device, device_name, module_path,
             CASE WHEN level = 'module' THEN NULL ELSE op_name END
),
before AS (
    SELECT d.device_type, d.device_kind, d.device, d.device_name, 'before_trace' AS origin,
           CAST(NULL AS VARCHAR) AS module_path, CAST(NULL AS VARCHAR) AS op_name,
           CAST(NULL AS BIGINT) AS allocations,
           d.peak_allocated_bytes - coalesce(
               (SELECT sum(t.live_bytes) FROM traced t
                WHERE t.device_kind = d.device_kind AND t.device IS NOT DISTINCT FROM d.device),
               0) AS live_bytes,
           CAST(NULL AS BIGINT) AS largest_bytes, d.peak_allocated_bytes
    FROM devs d
),
u AS (
    SELECT * FROM traced
    UNION ALL
    SELECT * FROM before WHERE live_bytes <> 0
)
SELECT
    device_type, device_kind, device, device_name, origin, module_path, op_name,
    CAST(allocations AS BIGINT) AS allocations, CAST(live_bytes AS BIGINT) AS live_bytes,
    live_bytes / nullif(peak_allocated_bytes, 0) AS share_of_peak,
    CAST(largest_bytes AS BIGINT) AS largest_bytes,
    row_number() OVER (PARTITION BY device_kind, device
                       ORDER BY live_bytes DESC, origin DESC, module_path NULLS LAST,
                                op_name NULLS LAST) AS rank
FROM u
WHERE level IN ('op', 'module')
ORDER BY peak_allocated_bytes DESC, device_kind, device, rank;

CREATE OR REPLACE MACRO memory_summary(run) AS TABLE
WITH ev AS MATERIALIZED (
    SELECT * FROM memory_events(run)
),
dev AS (
    SELECT
        device_type, device_kind, device, device_name,
        count(*) AS events,
        count(*) FILTER (WHERE kind = 'alloc') AS allocations,
        count(*) FILTER (WHERE kind = 'free') AS frees,
        CAST(coalesce(sum(bytes) FILTER (WHERE kind = 'alloc'), 0) AS BIGINT) AS allocated_bytes,
        CAST(coalesce(-sum(bytes) FILTER (WHERE kind = 'free'), 0) AS BIGINT) AS freed_bytes,
        first(allocated_bytes - bytes ORDER BY seq) AS start_allocated_bytes,
        last(allocated_bytes ORDER BY seq) AS end_allocated_bytes,
        max(allocated_bytes) AS peak_allocated_bytes,
        first(ts_ns ORDER BY allocated_bytes DESC, seq) AS peak_allocated_ts_ns,
        first(seq ORDER BY allocated_bytes DESC, seq) AS peak_seq,
        max(reserved_bytes) AS peak_reserved_bytes,
        first(ts_ns ORDER BY reserved_bytes DESC NULLS LAST, seq) FILTER (
            WHERE reserved_bytes IS NOT NULL) AS peak_reserved_ts_ns,
        count(*) FILTER (WHERE kind = 'free' AND pair_seq IS NULL) AS unpaired_frees,
        CAST(coalesce(-sum(bytes) FILTER (WHERE kind = 'free' AND pair_seq IS NULL), 0)
             AS BIGINT) AS unpaired_freed_bytes,
        count(*) FILTER (WHERE kind = 'alloc' AND pair_seq IS NULL) AS live_at_end_allocations,
        CAST(coalesce(sum(bytes) FILTER (WHERE kind = 'alloc' AND pair_seq IS NULL), 0)
             AS BIGINT) AS live_at_end_bytes
    FROM ev
    GROUP BY device_type, device_kind, device, device_name
),
lv AS MATERIALIZED (
    SELECT device_kind, device, bytes, op_name, module_path
    FROM memory_allocations(run, live_only := true)
),
live AS (
    SELECT device_kind, device, count(*) AS n, sum(bytes) AS b FROM lv GROUP BY device_kind, device
),
top AS (
    SELECT device_kind, device,
           first(op_name ORDER BY live_bytes DESC, op_name) AS op_name,
           max(live_bytes) AS live_bytes
    FROM (SELECT device_kind, device, op_name, sum(bytes) AS live_bytes
          FROM lv WHERE op_name IS NOT NULL GROUP BY device_kind, device, op_name)
    GROUP BY device_kind, device
),
topm AS (
    SELECT device_kind, device,
           first(module_path ORDER BY live_bytes DESC, module_path) AS module_path,
           max(live_bytes) AS live_bytes
    FROM (SELECT device_kind, device, module_path, sum(bytes) AS live_bytes
          FROM lv WHERE module_path IS NOT NULL GROUP BY device_kind, device, module_path)
    GROUP BY device_kind, device
),
r AS (
    SELECT start_ns FROM runs WHERE run_id = run
)
SELECT
    dev.device_type, dev.device_kind, dev.device, dev.device_name, dev.events,
    dev.allocations, dev.frees, dev.allocated_bytes, dev.freed_bytes,
    dev.start_allocated_bytes, dev.end_allocated_bytes, dev.peak_allocated_bytes,
    dev.peak_allocated_ts_ns, dev.peak_allocated_ts_ns - (SELECT start_ns FROM r) AS peak_offset_ns,
    dev.peak_reserved_bytes, dev.peak_reserved_ts_ns,
    coalesce(live.n, 0) AS peak_live_allocations,
    CAST(coalesce(live.b, 0) AS BIGINT) AS peak_live_bytes,
    CAST(dev.peak_allocated_bytes - coalesce(live.b, 0) AS BIGINT) AS peak_before_trace_bytes,
    top.op_name AS top_op_name, CAST(top.live_bytes AS BIGINT) AS top_op_live_bytes,
    topm.module_path AS top_module_path, CAST(topm.live_bytes AS BIGINT) AS top_module_live_bytes,
    dev.unpaired_frees, dev.unpaired_freed_bytes, dev.live_at_end_allocations,
    dev.live_at_end_bytes
FROM dev
LEFT JOIN live ON live.device_kind = dev.device_kind AND live.device IS NOT DISTINCT FROM dev.device
LEFT JOIN top ON top.device_kind = dev.device_kind AND top.device IS NOT DISTINCT FROM dev.device
LEFT JOIN topm ON topm.device_kind = dev.device_kind AND topm.device IS NOT DISTINCT FROM dev.device
ORDER BY dev.peak_allocated_bytes DESC, dev.device_kind, dev.device;

CREATE OR REPLACE MACRO memory_peak_allocations(run, n := 20) AS TABLE
WITH live AS (
    SELECT *,
           row_number() OVER (PARTITION BY device_kind, device ORDER BY bytes DESC, seq) AS rank
    FROM memory_allocations(run, live_only := true)
)
SELECT
    device_type, device_kind, device, device_name, rank, event_index, ts_ns,
    ts_ns - (SELECT start_ns FROM runs WHERE run_id = run) AS offset_ns,
    bytes, addr, op_name, module_path, step, age_at_peak_ns, free_ts_ns, lifetime_ns,
    peak_allocated_ts_ns
FROM live
WHERE rank <= n
ORDER BY peak_allocated_bytes DESC, device_kind, device, rank;

CREATE OR REPLACE MACRO memory_steps_in(run_ids) AS TABLE
WITH ev AS MATERIALIZED (
    SELECT * FROM memory_events_in(run_ids)
),
w AS (
    SELECT run_id, step, min(ts_ns) AS s, max(ts_ns + dur_ns) AS e
    FROM steps
    WHERE run_id IN (SELECT unnest(run_ids)) AND ts_ns IS NOT NULL AND dur_ns IS NOT NULL
    GROUP BY run_id, step
),
devs AS (
    SELECT run_id, device_type, device_kind, device, device_name,
           first(allocated_bytes - bytes ORDER BY seq) AS base_allocated,
           first(reserved_bytes ORDER BY seq) AS base_reserved
    FROM ev
    GROUP BY run_id, device_type, device_kind, device, device_name
),
grid AS (
    SELECT w.step, w.s, w.e, d.* FROM w JOIN devs d ON d.run_id = w.run_id
),
-- the level after the last event at each (device, ts): what an ASOF lookup may land on
lvl AS (
    SELECT run_id, device_kind, device, ts_ns,
           last(allocated_bytes ORDER BY seq) AS allocated_bytes,
           last(reserved_bytes ORDER BY seq) AS reserved_bytes
    FROM ev
    GROUP BY run_id, device_kind, device, ts_ns
),
opening AS (
    SELECT g.run_id, g.step, g.device_kind, g.device,
           coalesce(l.allocated_bytes, g.base_allocated) AS start_allocated,
           CASE WHEN l.ts_ns IS NULL THEN g.base_reserved ELSE l.reserved_bytes END
               AS start_reserved
    FROM grid g
    ASOF LEFT JOIN lvl l
        ON l.run_id = g.run_id AND l.device_kind = g.device_kind
       AND l.device IS NOT DISTINCT FROM g.device AND g.s > l.ts_ns
),
placed AS (
    SELECT e.*, CASE WHEN e.ts_ns < w.e THEN w.step END AS step, w.e AS step_end
    FROM ev e ASOF JOIN w ON w.run_id = e.run_id AND e.ts_ns >= w.s
),
inside AS (
    SELECT run_id, step, device_kind, device,
           count(*) AS events,
           count(*) FILTER (WHERE kind = 'alloc') AS allocations,
           count(*) FILTER (WHERE kind = 'free') AS frees,
           coalesce(sum(bytes) FILTER (WHERE kind = 'alloc'), 0) AS allocated_bytes,
           coalesce(-sum(bytes) FILTER (WHERE kind = 'free'), 0) AS freed_bytes,
           last(allocated_bytes ORDER BY seq) AS end_allocated,
           max(allocated_bytes) AS max_allocated,
           first(ts_ns ORDER BY allocated_bytes DESC, seq) AS max_ts,
           max(reserved_bytes) AS max_reserved,
           count(*) FILTER (WHERE kind = 'alloc' AND (pair_ts_ns IS NULL OR pair_ts_ns >= step_end))
               AS retained_allocations,
           coalesce(sum(bytes) FILTER (
               WHERE kind = 'alloc' AND (pair_ts_ns IS NULL OR pair_ts_ns >= step_end)), 0)
               AS retained_bytes
    FROM placed
    WHERE step IS NOT NULL
    GROUP BY run_id, step, device_kind, device
),
j AS (
    SELECT
        g.run_id, g.step, g.device_type, g.device_kind, g.device, g.device_name,
        g.s AS start_ns, g.e - g.s AS wall_ns,
        o.start_allocated AS start_allocated_bytes,
        coalesce(i.end_allocated, o.start_allocated) AS end_allocated_bytes,
        greatest(o.start_allocated, coalesce(i.max_allocated, o.start_allocated))
            AS peak_allocated_bytes,
        CASE WHEN i.max_allocated > o.start_allocated THEN i.max_ts ELSE g.s END
            AS peak_allocated_ts_ns,
        CASE WHEN o.start_reserved IS NULL AND i.max_reserved IS NULL THEN NULL
             ELSE greatest(coalesce(o.start_reserved, i.max_reserved),
                           coalesce(i.max_reserved, o.start_reserved)) END
            AS peak_reserved_bytes,
        coalesce(i.events, 0) AS events,
        coalesce(i.allocations, 0) AS allocations,
        coalesce(i.frees, 0) AS frees,
        CAST(coalesce(i.allocated_bytes, 0) AS BIGINT) AS allocated_bytes,
        CAST(coalesce(i.freed_bytes, 0) AS BIGINT) AS freed_bytes,
        coalesce(i.retained_allocations, 0) AS retained_allocations,
        CAST(coalesce(i.retained_bytes, 0) AS BIGINT) AS retained_bytes
    FROM grid g
    JOIN opening o ON o.run_id = g.run_id AND o.step = g.step AND o.device_kind = g.device_kind
                  AND o.device IS NOT DISTINCT FROM g.device
    LEFT JOIN inside i ON i.run_id = g.run_id AND i.step = g.step
                      AND i.device_kind = g.device_kind AND i.device IS NOT DISTINCT FROM g.device
)
SELECT
    run_id, step, device_type, device_kind, device, device_name, start_ns, wall_ns,
    CAST(start_allocated_bytes AS BIGINT) AS start_allocated_bytes,
    CAST(end_allocated_bytes AS BIGINT) AS end_allocated_bytes,
    CAST(peak_allocated_bytes AS BIGINT) AS peak_allocated_bytes,
    peak_allocated_ts_ns,
    CAST(peak_reserved_bytes AS BIGINT) AS peak_reserved_bytes,
    events, allocations, frees, allocated_bytes, freed_bytes,
    CAST(end_allocated_bytes - start_allocated_bytes AS BIGINT) AS net_bytes,
    retained_allocations, retained_bytes,
    CAST(peak_allocated_bytes - lag(peak_allocated_bytes) OVER (
        PARTITION BY run_id, device_kind, device ORDER BY step) AS BIGINT) AS peak_growth_bytes
FROM j;

CREATE OR REPLACE MACRO memory_steps(run) AS TABLE
SELECT * EXCLUDE (run_id) FROM memory_steps_in([run])
ORDER BY step, device_kind, device;

CREATE OR REPLACE MACRO memory_leak_check(run) AS TABLE
WITH s AS (
    SELECT * FROM memory_steps(run)
)
SELECT
    device_type, device_kind, device, device_name,
    count(*) AS steps,
    first(peak_allocated_bytes ORDER BY step) AS first_peak_bytes,
    last(peak_allocated_bytes ORDER BY step) AS last_peak_bytes,
    (last(peak_allocated_bytes ORDER BY step) - first(peak_allocated_bytes ORDER BY step))
        / (count(*) - 1) AS growth_per_step_bytes,
    count(*) FILTER (WHERE peak_growth_bytes > 0) AS rising_steps,
    count(*) FILTER (WHERE opening_growth > 0) AS rising_openings,
    count(*) FILTER (WHERE net_bytes > 0) AS retaining_steps,
    count(*) >= 3
        AND count(*) FILTER (WHERE peak_growth_bytes > 0) = count(*) - 1
        AND count(*) FILTER (WHERE opening_growth > 0) = count(*) - 1 AS leak_suspect
FROM (
    SELECT *, start_allocated_bytes - lag(start_allocated_bytes) OVER (
        PARTITION BY device_kind, device ORDER BY step) AS opening_growth
    FROM s
)
GROUP BY device_type, device_kind, device, device_name
HAVING count(*) >= 2
ORDER BY device_kind, device;

CREATE OR REPLACE MACRO memory_timeline(run, buckets := 1000) AS TABLE
WITH ev AS (
    SELECT * FROM memory_events(run)
),
span AS (
    SELECT least(min(e.ts_ns), any_value(r.start_ns)) AS lo,
           greatest(max(e.ts_ns), any_value(r.end_ns)) AS hi
    FROM ev e LEFT JOIN (SELECT start_ns, end_ns FROM runs WHERE run_id = run) r ON true
),
b AS (
    SELECT e.*, span.lo, span.hi,
           CAST((CAST(e.ts_ns - span.lo AS HUGEINT) * buckets) // (span.hi - span.lo + 1) AS BIGINT)
               AS bucket
    FROM ev e CROSS JOIN span
)
SELECT
    device_type, device_kind, device, device_name, bucket,
    CAST(any_value(lo) + (CAST(any_value(hi) - any_value(lo) + 1 AS HUGEINT) * bucket) // buckets
         AS BIGINT) AS ts_ns,
    CAST(any_value(lo) + (CAST(any_value(hi) - any_value(lo) + 1 AS HUGEINT) * (bucket + 1)) // buckets
         AS BIGINT) AS end_ns,
    count(*) AS events,
    last(allocated_bytes ORDER BY seq) AS allocated_bytes,
    least(min(allocated_bytes), min(allocated_bytes - bytes)) AS min_allocated_bytes,
    greatest(max(allocated_bytes), max(allocated_bytes - bytes)) AS max_allocated_bytes,
    last(reserved_bytes ORDER BY seq) AS reserved_bytes,
    max(reserved_bytes) AS max_reserved_bytes
FROM b
GROUP BY device_type, device_kind, device, device_name, bucket
ORDER BY device_kind, device, bucket;

CREATE OR REPLACE MACRO run_memory_in(run_ids) AS TABLE
WITH ev AS (
    SELECT run_id, device_type, device_kind, device, device_name,
           count(*) AS events,
           max(allocated_bytes) AS peak_allocated_bytes,
           max(reserved_bytes) AS peak_reserved_bytes
    FROM memory_events_in(run_ids)
    GROUP BY run_id, device_type, device_kind, device, device_name
),
st AS (
    SELECT run_id, device_kind, device, count(*) AS n_steps,
           max(peak_allocated_bytes) AS step_peak,
           stddev_samp(peak_allocated_bytes) AS step_peak_sd
    FROM memory_steps_in(run_ids)
    GROUP BY run_id, device_kind, device
)
SELECT
    ev.run_id, ev.device_type, ev.device_kind, ev.device, ev.device_name, ev.events,
    ev.peak_allocated_bytes, ev.peak_reserved_bytes,
    coalesce(st.n_steps, 0) AS n_steps,
    coalesce(st.step_peak, ev.peak_allocated_bytes) AS peak_allocated_per_step_bytes,
    st.step_peak_sd AS step_peak_sd_bytes
FROM ev
LEFT JOIN st ON st.run_id = ev.run_id AND st.device_kind = ev.device_kind
            AND st.device IS NOT DISTINCT FROM ev.device;

CREATE OR REPLACE VIEW run_memory AS
SELECT * FROM run_memory_in((SELECT list(run_id) FROM runs));
