-- 83_critical_path.sql: the events of one run's critical-path graph (HTA's event graph), by role.
--
-- The graph itself and its longest path are built by tracewh.analysis.critical_path from
-- these rows (numpy arrays, no per-event objects). A window [lo_ns, hi_ns] (NULL: the whole
-- run) keeps, as HTA's critical_path_analysis does: CPU events that start in it, and GPU ops
-- and CUDA sync events whose runtime call starts in it (always every Stream Wait Event).
-- Events of zero duration are left out (they break nesting), as in HTA. Timestamps exact ns.
--
-- cp_launch_names  (view)
--   grain: one row per runtime call name that enqueues work on a stream asynchronously (HTA's
--   runtime launch events: cudaLaunchKernel(ExC), cuLaunchKernel(Ex), cudaMemcpyAsync,
--   cudaMemsetAsync, hipLaunchKernel, hipExtModuleLaunchKernel, hipMemcpyAsync,
--   hipMemsetAsync, hipMemcpyWithStream, MTIA's runFunction).
--   columns: name
--
-- cp_step_windows(run_id)  (table macro)
--   grain: one row per step of the run (ProfilerStep#N), by step.
--   columns: step, lo_ns (the ProfilerStep#N span's start), hi_ns (its end)
--
-- cp_step_window(run_id, step)  (table macro)
--   grain: one row (none when the run has no such step): cp_step_windows' row of `step`.
--   columns: step, lo_ns, hi_ns
--
-- cp_cpu(run_id, lo_ns, hi_ns, loading := [])  (table macro)
--   grain: one row per CPU operator or runtime/driver call (cat cpu_op, cuda_runtime,
--   cuda_driver, hip_runtime) of the run with dur_ns > 0 starting in the window.
--   columns: event_index, pid, tid, ts_ns, dur_ns,
--            blocking (a call whose time is the GPU's: cudaDeviceSynchronize,
--            cudaStreamSynchronize, cudaEventQuery, cudaEventSynchronize, cudaMemcpy,
--            cudaMemcpyAsync; the edge into its end weighs 0),
--            lock (a call holding the CUDA runtime lock: cudaHostAlloc, cudaLaunchKernel,
--            cudaMemcpyAsync),
--            loading (its name matches one of the regular expressions of `loading`)
--
-- cp_names(run_id, lo_ns, hi_ns)  (table macro)
--   grain: one row per event of cp_cpu and of cp_gpu (the graph's events) of the window.
--   columns: event_index, name
--
-- cp_thread_merge(run_id, lo_ns, hi_ns)  (table macro)
--   grain: one row when the window has a backward thread to walk as part of the forward one
--   (HTA's merge: exactly one thread has CPU operators or annotations named *autograd*, exactly
--   one other has some named *forward*), else none.
--   columns: from_tid (the backward thread), to_tid (the forward thread)
--
-- cp_step_thread_merge(run_id, first_step, last_step)  (table macro)
--   grain: one row per step from `first_step` to `last_step` whose window (cp_step_windows)
--   has a backward thread to walk as part of the forward one (cp_thread_merge's rule, step by
--   step, in one query).
--   columns: step, from_tid, to_tid
--
-- cp_gpu(run_id, lo_ns, hi_ns)  (table macro)
--   grain: one row per GPU op linked to a runtime call (same correlation id) that starts in
--   the window with dur_ns > 0.
--   columns: event_index, device, stream, ts_ns, dur_ns, comm (tw_category =
--            communication), launch_index (event_index of the runtime call), launch_ts_ns,
--            q_launch, q_op: the stream's queue length (ops launched by a launch call of
--            cp_launch_names and not yet started: +1 at the launch, -1 when the op starts,
--            over the whole run, ties: launch first) right after its launch and right after
--            it started; NULL for an op not launched by such a call
--
-- cp_sync(run_id, lo_ns, hi_ns)  (table macro)
--   grain: one row per CUDA synchronisation event (cat cuda_sync) whose runtime call (same
--   correlation) or itself starts in the window, and every Stream Wait Event.
--   columns: event_index, kind (Context Sync | Stream Sync | Event Sync | Stream Wait Event),
--            device, stream, ts_ns, end_ns, runtime_index (the runtime call: cudaDeviceSynchronize,
--            cudaStreamSynchronize, cudaEventSynchronize, cudaStreamWaitEvent, ...),
--            src_op (Event Sync, Stream Wait Event: the GPU op launched last on the recorded
--            event's stream before the cudaEventRecord call whose correlation is the
--            event's wait_on_cuda_event_record_corr_id; NULL without one), dest_op (Stream
--            Wait Event: the GPU op of the next launch, on the cudaStreamWaitEvent call's
--            thread, onto the waiting stream), runtime_ts_ns (the runtime call's start; NULL
--            without one)

CREATE OR REPLACE VIEW cp_launch_names AS
SELECT * FROM (VALUES ('cudaLaunchKernel'), ('cudaLaunchKernelExC'), ('cuLaunchKernel'),
    ('cuLaunchKernelEx'), ('cudaMemcpyAsync'), ('cudaMemsetAsync'), ('hipLaunchKernel'),
    ('hipExtModuleLaunchKernel'), ('hipMemcpyAsync'), ('hipMemsetAsync'),
    ('hipMemcpyWithStream'), ('runFunction - job_prep_and_submit_for_execution')) AS t(name);

CREATE OR REPLACE MACRO cp_step_windows(run_id) AS TABLE
SELECT s.step, min(s.ts_ns) AS lo_ns, max(s.ts_ns + s.dur_ns) AS hi_ns
FROM steps s
JOIN runs r ON r.run_id = s.run_id AND r.ingest_id = s.ingest_id
WHERE s.run_id = run_id AND s.step IS NOT NULL
GROUP BY s.step
ORDER BY s.step;

CREATE OR REPLACE MACRO cp_step_window(run_id, step) AS TABLE
SELECT w.step, w.lo_ns, w.hi_ns FROM cp_step_windows(run_id) w WHERE w.step = step;

CREATE OR REPLACE MACRO cp_cpu(run_id, lo_ns, hi_ns, loading := []) AS TABLE
SELECT e.event_index, e.pid, e.tid, e.ts_ns, e.dur_ns,
       e.name IN ('cudaDeviceSynchronize', 'cudaStreamSynchronize', 'cudaEventQuery',
                  'cudaEventSynchronize', 'cudaMemcpy', 'cudaMemcpyAsync') AS blocking,
       e.name IN ('cudaHostAlloc', 'cudaLaunchKernel', 'cudaMemcpyAsync') AS lock,
       len(list_filter(CAST(loading AS VARCHAR[]), lambda p: regexp_matches(e.name, p))) > 0 AS loading
FROM events e
JOIN runs r ON r.run_id = e.run_id AND r.ingest_id = e.ingest_id
WHERE e.run_id = run_id AND e.cat IN ('cpu_op', 'cuda_runtime', 'cuda_driver', 'hip_runtime')
  AND e.dur_ns > 0
  AND (lo_ns IS NULL OR e.ts_ns >= lo_ns) AND (hi_ns IS NULL OR e.ts_ns <= hi_ns)
ORDER BY e.event_index;

CREATE OR REPLACE MACRO cp_thread_merge(run_id, lo_ns, hi_ns) AS TABLE
WITH w AS (
    SELECT e.name, e.tid
    FROM events e
    JOIN runs r ON r.run_id = e.run_id AND r.ingest_id = e.ingest_id
    WHERE e.run_id = run_id AND e.cat IN ('cpu_op', 'user_annotation') AND e.dur_ns > 0
      AND (lo_ns IS NULL OR e.ts_ns >= lo_ns) AND (hi_ns IS NULL OR e.ts_ns <= hi_ns)
),
f AS (SELECT CASE WHEN count(DISTINCT tid) = 1 THEN min(tid) END AS t FROM w
      WHERE contains(name, 'forward')),
b AS (SELECT CASE WHEN count(DISTINCT tid) = 1 THEN min(tid) END AS t FROM w
      WHERE contains(name, 'autograd'))
SELECT b.t AS from_tid, f.t AS to_tid FROM f, b
WHERE f.t IS NOT NULL AND b.t IS NOT NULL AND f.t <> b.t;

CREATE OR REPLACE MACRO cp_step_thread_merge(run_id, first_step, last_step) AS TABLE
WITH win AS (
    SELECT w.step, w.lo_ns, w.hi_ns FROM cp_step_windows(run_id) w
    WHERE w.step BETWEEN first_step AND last_step
),
w AS (
    SELECT win.step, e.name, e.tid
    FROM events e
    JOIN runs r ON r.run_id = e.run_id AND r.ingest_id = e.ingest_id
    JOIN win ON e.ts_ns >= win.lo_ns AND e.ts_ns <= win.hi_ns
    WHERE e.run_id = run_id AND e.cat IN ('cpu_op', 'user_annotation') AND e.dur_ns > 0
),
f AS (SELECT step, CASE WHEN count(DISTINCT tid) = 1 THEN min(tid) END AS t FROM w
      WHERE contains(name, 'forward') GROUP BY step),
b AS (SELECT step, CASE WHEN count(DISTINCT tid) = 1 THEN min(tid) END AS t FROM w
      WHERE contains(name, 'autograd') GROUP BY step)
SELECT f.step, b.t AS from_tid, f.t AS to_tid FROM f JOIN b USING (step)
WHERE f.t IS NOT NULL AND b.t IS NOT NULL AND f.t <> b.t
ORDER BY f.step;

CREATE OR REPLACE MACRO cp_names(run_id, lo_ns, hi_ns) AS TABLE
SELECT e.event_index, e.name
FROM events e
JOIN runs r ON r.run_id = e.run_id AND r.ingest_id = e.ingest_id
WHERE e.run_id = run_id AND e.cat IN ('cpu_op', 'cuda_runtime', 'cuda_driver', 'hip_runtime')
  AND e.dur_ns > 0
  AND (lo_ns IS NULL OR e.ts_ns >= lo_ns) AND (hi_ns IS NULL OR e.ts_ns <= hi_ns)
UNION ALL
SELECT g.event_index, g.name
FROM cp_gpu(run_id, lo_ns, hi_ns) x
JOIN gpu_ops g ON g.run_id = run_id AND g.event_index = x.event_index
JOIN runs r ON r.run_id = g.run_id AND r.ingest_id = g.ingest_id;

CREATE OR REPLACE MACRO cp_gpu(run_id, lo_ns, hi_ns) AS TABLE
WITH rt AS (
    SELECT e.correlation, min(e.event_index) AS launch_index, arg_min(e.ts_ns, e.event_index) AS ts_ns,
           arg_min(e.dur_ns, e.event_index) AS dur_ns, arg_min(e.name, e.event_index) AS name
    FROM events e
    JOIN runs r ON r.run_id = e.run_id AND r.ingest_id = e.ingest_id
    WHERE e.run_id = run_id AND e.correlation IS NOT NULL
      AND e.cat IN ('cuda_runtime', 'cuda_driver', 'hip_runtime')
    GROUP BY e.correlation
),
g AS (
    SELECT g.event_index, coalesce(g.device, g.pid) AS device, g.stream, g.ts_ns, g.dur_ns,
           g.name, g.category = 'communication' AS comm, rt.launch_index,
           rt.ts_ns AS launch_ts_ns, rt.dur_ns AS launch_dur_ns,
           rt.name IN (SELECT name FROM cp_launch_names) AS queued
    FROM gpu_ops g
    JOIN runs r ON r.run_id = g.run_id AND r.ingest_id = g.ingest_id
    JOIN rt ON rt.correlation = g.correlation
    WHERE g.run_id = run_id AND g.dur_ns IS NOT NULL
),
marks AS (
    SELECT event_index, device, stream, launch_ts_ns AS ts_ns, 1 AS delta FROM g WHERE queued
    UNION ALL
    SELECT event_index, device, stream, ts_ns, -1 FROM g WHERE queued
),
q AS (
    SELECT event_index, delta,
           sum(delta) OVER (PARTITION BY device, stream ORDER BY ts_ns, delta DESC, event_index
                            ROWS UNBOUNDED PRECEDING) AS q
    FROM marks
),
qq AS (
    SELECT event_index, max(q) FILTER (WHERE delta = 1) AS q_launch,
           max(q) FILTER (WHERE delta = -1) AS q_op
    FROM q GROUP BY event_index
)
SELECT g.event_index, g.device, g.stream, g.ts_ns, g.dur_ns, g.comm, g.launch_index,
       g.launch_ts_ns, qq.q_launch, qq.q_op
FROM g
LEFT JOIN qq USING (event_index)
WHERE g.launch_dur_ns > 0
  AND (lo_ns IS NULL OR g.launch_ts_ns >= lo_ns) AND (hi_ns IS NULL OR g.launch_ts_ns <= hi_ns)
ORDER BY g.event_index;

CREATE OR REPLACE MACRO cp_sync(run_id, lo_ns, hi_ns) AS TABLE
WITH rt AS (
    SELECT e.event_index, e.correlation, e.pid, e.tid, e.ts_ns, e.dur_ns, e.name
    FROM events e
    JOIN runs r ON r.run_id = e.run_id AND r.ingest_id = e.ingest_id
    WHERE e.run_id = run_id AND e.cat IN ('cuda_runtime', 'cuda_driver', 'hip_runtime')
),
launches AS (  -- launch calls with the stream and device of the op they launched
    SELECT rt.event_index AS launch_index, rt.pid, rt.tid, rt.ts_ns, g.event_index AS op,
           coalesce(g.device, g.pid) AS device, g.stream
    FROM rt
    JOIN gpu_ops g ON g.run_id = run_id AND g.correlation = rt.correlation
    JOIN runs r ON r.run_id = g.run_id AND r.ingest_id = g.ingest_id
    WHERE rt.name IN (SELECT name FROM cp_launch_names)
),
s AS (
    SELECT e.event_index, e.name AS kind, e.pid AS device, e.stream, e.ts_ns,
           e.ts_ns + e.dur_ns AS end_ns, e.correlation,
           TRY_CAST(json_extract_string(e.args_json, '$.wait_on_stream') AS BIGINT) AS wait_stream,
           TRY_CAST(json_extract_string(e.args_json, '$.wait_on_cuda_event_record_corr_id') AS BIGINT)
               AS record_corr
    FROM events e
    JOIN runs r ON r.run_id = e.run_id AND r.ingest_id = e.ingest_id
    WHERE e.run_id = run_id AND e.cat = 'cuda_sync'
),
sr AS (
    SELECT s.*, rt.event_index AS runtime_index, rt.ts_ns AS runtime_ts_ns, rt.pid AS call_pid,
           rt.tid AS call_tid, rec.ts_ns AS record_ts_ns
    FROM s
    LEFT JOIN (SELECT DISTINCT ON (correlation) * FROM rt ORDER BY correlation, event_index) rt
        ON rt.correlation = s.correlation
    LEFT JOIN (SELECT DISTINCT ON (correlation) correlation, ts_ns FROM rt
               WHERE name IN ('cudaEventRecord', 'hipEventRecord', 'cudaEventRecordWithFlags')
               ORDER BY correlation, event_index) rec
        ON rec.correlation = s.record_corr AND s.record_corr >= 0
),
src AS (
    SELECT sr.event_index, l.op AS src_op
    FROM sr
    ASOF JOIN launches l
        ON l.device = sr.device AND l.stream = sr.wait_stream AND sr.record_ts_ns >= l.ts_ns
    WHERE sr.record_ts_ns IS NOT NULL
),
dest AS (
    SELECT sr.event_index, l.op AS dest_op
    FROM sr
    ASOF JOIN launches l
        ON l.pid = sr.call_pid AND l.tid = sr.call_tid AND l.stream = sr.stream
       AND l.ts_ns >= sr.runtime_ts_ns
    WHERE sr.kind = 'Stream Wait Event' AND sr.runtime_ts_ns IS NOT NULL
)
SELECT sr.event_index, sr.kind, sr.device, sr.stream, sr.ts_ns, sr.end_ns, sr.runtime_index,
       src.src_op, dest.dest_op, sr.runtime_ts_ns
FROM sr
LEFT JOIN src USING (event_index)
LEFT JOIN dest USING (event_index)
WHERE sr.kind = 'Stream Wait Event'
   OR ((lo_ns IS NULL OR sr.runtime_ts_ns >= lo_ns OR sr.ts_ns >= lo_ns)
       AND (hi_ns IS NULL OR sr.runtime_ts_ns <= hi_ns OR sr.ts_ns <= hi_ns))
ORDER BY sr.event_index;
