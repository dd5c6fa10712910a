-- rows of `events` for each run of t_files (one row per file_no staged: run_id, ingest_id,
-- day, base_ns, lo_ns, hi_ns, ev_off = the offset added to its event indices when staged).
-- With --steps (t_kept: the kept steps of each file_no), a GPU op's row is kept when its step
-- (by launch, as in gpu_ops) is kept, any other row when it starts inside [lo_ns, hi_ns).
SELECT f.run_id, f.ingest_id, f.day,
       e.event_index - f.ev_off AS event_index, e.cat, e.name, e.pid, e.tid, e.pid_label, e.tid_label,
       e.ts_ns + f.base_ns AS ts_ns, e.dur_ns, e.correlation, e.external_id, e.stream, e.device,
       e.args_json
FROM s_ev e
JOIN t_files f ON f.file_no = e.file_no
LEFT JOIN (SELECT event_index, step, true AS gpu FROM t_gpu_link) p USING (event_index)
WHERE CASE WHEN p.gpu IS NULL THEN tw_keep(e.ts_ns, f.lo_ns, f.hi_ns)
           ELSE f.lo_ns IS NULL OR EXISTS (
               SELECT 1 FROM t_kept k WHERE k.file_no = e.file_no AND k.step = p.step) END
