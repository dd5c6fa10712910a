-- 30_launches.sql: launch latency, linkage coverage and queue depth.
--
-- tw_is_launch_call(name)  (scalar macro) -> BOOLEAN
--   true for the runtime calls that enqueue GPU work: CUDA cudaLaunchKernel,
--   cudaLaunchKernelExC, cudaLaunchCooperativeKernel, cuLaunchKernel, cuLaunchKernelEx,
--   cudaMemcpyAsync, cudaMemsetAsync, cudaGraphLaunch; HIP hipLaunchKernel,
--   hipExtModuleLaunchKernel, hipModuleLaunchKernel, hipMemcpyAsync, hipMemsetAsync,
--   hipMemcpyWithStream, hipGraphLaunch; MTIA mtia*Launch*/mtia*Enqueue* calls; a version
--   suffix (_v11060, _ptsz) is ignored.
--
-- A launch is one runtime call: a CUDA/HIP graph launch (gpu_ops.launch_kind 'graph')
-- replays many GPU ops but is one launch, measured from the call to its first replayed op
-- (graph_position 1); the other replayed ops are not launches.
--
-- launch_latency(run)  (table macro)
--   grain: one row per launch of run `run`: each linked GPU op (launch_ts_ns not NULL) but
--          the replayed ops of a graph launch after its first (graph_position > 1).
--   columns: event_index, name, short_name, device, stream, step, launch_name, launch_kind,
--            is_launch_call, api_ns (duration of the runtime call), queue_ns (GPU start -
--            end of the runtime call; negative values are set to 0), negative_queue (true
--            where the raw value was negative), launch_to_start_ns (GPU start - start of the
--            runtime call)
--
-- launch_latency_by_kernel(run)  (table macro)
--   grain: one row per GPU op name of run `run` with at least one launch, and one per graph
--          launch call name (name = launch_name, short_name 'graph': its launches).
--   columns: name, short_name, ops, mean_api_ns, p50_api_ns, p95_api_ns, mean_queue_ns,
--            p50_queue_ns, p95_queue_ns, max_queue_ns, mean_launch_to_start_ns,
--            p95_launch_to_start_ns, negative_queue_ops
--
-- launch_latency_by_step(run)  (table macro)
--   grain: one row per step N (gpu_ops.step; NULL: ops outside any ProfilerStep).
--   columns: step, ops, mean_api_ns, p50_api_ns, p95_api_ns, mean_queue_ns, p50_queue_ns,
--            p95_queue_ns, max_queue_ns, mean_launch_to_start_ns, negative_queue_ops
--
-- launch_linkage(run)  (table macro)
--   grain: one row (the run).
--   columns: gpu_ops, linked_ops, unlinked_ops, unlinked_fraction (unlinked_ops / gpu_ops),
--            by_correlation, by_flow, by_external_id (linked ops per link_method),
--            negative_queue_ops, graph_launches (graph launch calls), graph_ops (GPU ops they
--            replayed)
--
-- queue_depth(run, full_depth := 1024)  (table macro)
--   grain: one row per (device, stream) of run `run` with linked ops.
--   columns: device, stream, ops, window_ns (first launch start to last GPU start),
--            mean_depth (time-weighted mean of outstanding ops over window_ns), max_depth,
--            full_ns (time with >= full_depth ops outstanding: the launch queue is full),
--            full_fraction (full_ns / window_ns)
--   Outstanding ops: +1 at the start of the op's launch call, -1 when the op starts on the
--   GPU (at the launch start if the GPU start is earlier: clock skew never makes it negative);
--   at equal times the -1 comes first. Launches only (as launch_latency): a graph launch is
--   one outstanding entry, until its first replayed op starts.

CREATE OR REPLACE MACRO tw_is_launch_call(name) AS
    regexp_matches(
        coalesce(name, ''),
        '^(?:cudaLaunchKernel|cudaLaunchKernelExC|cudaLaunchCooperativeKernel|cuLaunchKernel|cuLaunchKernelEx|cudaMemcpyAsync|cudaMemsetAsync|cudaGraphLaunch|hipLaunchKernel|hipExtModuleLaunchKernel|hipModuleLaunchKernel|hipMemcpyAsync|hipMemsetAsync|hipMemcpyWithStream|hipGraphLaunch|mtia\w*(?:Launch|Enqueue)\w*)(?:_v\d+|_ptsz|_spt)?$');

CREATE OR REPLACE MACRO launch_latency(run) AS TABLE
SELECT
    event_index, name, short_name, device, stream, step, launch_name, launch_kind,
    tw_is_launch_call(launch_name) AS is_launch_call,
    launch_dur_ns AS api_ns,
    greatest(ts_ns - (launch_ts_ns + launch_dur_ns), 0) AS queue_ns,
    ts_ns - (launch_ts_ns + launch_dur_ns) < 0 AS negative_queue,
    ts_ns - launch_ts_ns AS launch_to_start_ns
FROM gpu_ops
WHERE run_id = run AND launch_ts_ns IS NOT NULL AND ts_ns IS NOT NULL
  AND coalesce(graph_position, 1) = 1;

CREATE OR REPLACE MACRO launch_latency_by_kernel(run) AS TABLE
SELECT
    name,
    any_value(short_name) AS short_name,
    count(*) AS ops,
    avg(api_ns) AS mean_api_ns,
    quantile_cont(api_ns, 0.5) AS p50_api_ns,
    quantile_cont(api_ns, 0.95) AS p95_api_ns,
    avg(queue_ns) AS mean_queue_ns,
    quantile_cont(queue_ns, 0.5) AS p50_queue_ns,
    quantile_cont(queue_ns, 0.95) AS p95_queue_ns,
    max(queue_ns) AS max_queue_ns,
    avg(launch_to_start_ns) AS mean_launch_to_start_ns,
    quantile_cont(launch_to_start_ns, 0.95) AS p95_launch_to_start_ns,
    count(*) FILTER (WHERE negative_queue) AS negative_queue_ops
FROM (
    SELECT * REPLACE (
        CASE WHEN launch_kind = 'graph' THEN launch_name ELSE name END AS name,
        CASE WHEN launch_kind = 'graph' THEN 'graph' ELSE short_name END AS short_name)
    FROM launch_latency(run)
)
GROUP BY name
ORDER BY mean_queue_ns DESC, name;

CREATE OR REPLACE MACRO launch_latency_by_step(run) AS TABLE
SELECT
    step,
    count(*) AS ops,
    avg(api_ns) AS mean_api_ns,
    quantile_cont(api_ns, 0.5) AS p50_api_ns,
    quantile_cont(api_ns, 0.95) AS p95_api_ns,
    avg(queue_ns) AS mean_queue_ns,
    quantile_cont(queue_ns, 0.5) AS p50_queue_ns,
    quantile_cont(queue_ns, 0.95) AS p95_queue_ns,
    max(queue_ns) AS max_queue_ns,
    avg(launch_to_start_ns) AS mean_launch_to_start_ns,
    count(*) FILTER (WHERE negative_queue) AS negative_queue_ops
FROM launch_latency(run)
GROUP BY step
ORDER BY step NULLS LAST;

CREATE OR REPLACE MACRO launch_linkage(run) AS TABLE
SELECT
    count(*) AS gpu_ops,
    count(launch_ts_ns) AS linked_ops,
    count(*) - count(launch_ts_ns) AS unlinked_ops,
    CASE WHEN count(*) > 0 THEN (count(*) - count(launch_ts_ns)) / count(*) END AS unlinked_fraction,
    count(*) FILTER (WHERE launch_ts_ns IS NOT NULL AND link_method = 'correlation') AS by_correlation,
    count(*) FILTER (WHERE launch_ts_ns IS NOT NULL AND link_method = 'flow') AS by_flow,
    count(*) FILTER (WHERE launch_ts_ns IS NOT NULL AND link_method = 'external_id') AS by_external_id,
    count(*) FILTER (WHERE ts_ns < launch_ts_ns + launch_dur_ns) AS negative_queue_ops,
    count(*) FILTER (WHERE graph_position = 1) AS graph_launches,
    count(graph_position) AS graph_ops
FROM gpu_ops
WHERE run_id = run;

CREATE OR REPLACE MACRO queue_depth(run, full_depth := 1024) AS TABLE
WITH linked AS (
    SELECT device, stream, launch_ts_ns AS t_in, greatest(ts_ns, launch_ts_ns) AS t_out
    FROM gpu_ops
    WHERE run_id = run AND launch_ts_ns IS NOT NULL AND ts_ns IS NOT NULL
      AND coalesce(graph_position, 1) = 1
),
pts AS (
    SELECT device, stream, t_in AS t, 1 AS d FROM linked
    UNION ALL
    SELECT device, stream, t_out AS t, -1 AS d FROM linked
),
deltas AS (
    -- -1 and +1 at one time collapse into one point; the depth after it is what lasts
    SELECT device, stream, t, sum(d) AS d
    FROM pts
    GROUP BY device, stream, t
),
swept AS (
    SELECT
        device, stream, t,
        sum(d) OVER w AS depth,
        lead(t) OVER w - t AS dt
    FROM deltas
    WINDOW w AS (PARTITION BY device, stream ORDER BY t)
),
ops AS (
    SELECT device, stream, count(*) AS ops FROM linked GROUP BY device, stream
)
SELECT
    s.device, s.stream, any_value(o.ops) AS ops,
    max(s.t) - min(s.t) AS window_ns,
    CASE WHEN max(s.t) > min(s.t) THEN sum(s.depth * s.dt) / (max(s.t) - min(s.t)) ELSE 0 END
        AS mean_depth,
    CAST(max(s.depth) AS BIGINT) AS max_depth,
    CAST(coalesce(sum(s.dt) FILTER (WHERE s.depth >= full_depth), 0) AS BIGINT) AS full_ns,
    CASE WHEN max(s.t) > min(s.t)
        THEN coalesce(sum(s.dt) FILTER (WHERE s.depth >= full_depth), 0) / (max(s.t) - min(s.t))
        ELSE 0 END AS full_fraction
FROM swept s
JOIN ops o ON s.device IS NOT DISTINCT FROM o.device AND s.stream IS NOT DISTINCT FROM o.stream
GROUP BY s.device, s.stream
ORDER BY s.device, s.stream;
