-- 79_collectives.sql: the collectives of one job instance, matched across its ranks.
--
-- A job instance is a list of runs (run_list, VARCHAR[]): the traces of one distributed job,
-- distinct ranks of one workload (tracewh.history.workload picks them, as for 80_ranks.sql).
-- The communication kernels come from the `collectives` table (one row per kernel, written at
-- ingest by sql/ingest/34_out_collectives.sql); a rank is runs.rank (distributedInfo.rank).
-- Two kernels of two ranks are one collective when they have the same process group
-- (pg_name and pg_ranks as the trace writes them) and the same per-group sequence number
-- (seq: the trace's where present, else the ordinal of the kernel within its group on that
-- rank, in launch order).
--
-- collective_ops(run_list)  (table macro)
--   grain: one row per communication kernel of the runs of run_list.
--   columns: every column of `collectives`, rank, world_size, host, device_name (of the run)
--
-- collective_matches(run_list)  (table macro)
--   grain: one row per matched collective: (pg, pg_ranks, seq) over the runs.
--   columns: pg (process group name), pg_desc, pg_ranks, seq, collective (the most common
--            over its ranks; kinds > 1 flags ranks that disagree, i.e. a sequence mismatch),
--            kinds, dtype, msg_bytes (per-rank input bytes = in elements x dtype size, the
--            largest over its ranks), out_bytes, bw_bytes (the size nccl-tests divides by the
--            time: out_bytes for all_gather, msg_bytes otherwise), group_size ("Group size",
--            else the ranks matched), n_ranks (ranks matched), ranks (their ranks, sorted),
--            step (the lowest step of its kernels), first_start_ns, last_start_ns (earliest
--            and latest kernel start), skew_ns (last_start_ns - first_start_ns), last_rank
--            (the rank whose kernel started last; ties: the highest rank), last_end_ns
--            (latest kernel end), comm_ns (last_end_ns - last_start_ns: the transfer once
--            every rank had arrived), algbw_gbps (bw_bytes / comm_ns, GB/s = 1e9 bytes/s;
--            NULL when comm_ns <= 0), busbw_factor (nccl-tests: all_reduce 2(n-1)/n;
--            all_gather, reduce_scatter, all_to_all (n-1)/n; others 1; n = group_size),
--            busbw_gbps (algbw_gbps x busbw_factor), wait_ns (sum over its ranks of
--            last_start_ns - the rank's kernel start: time spent waiting for the last one)
--
-- collective_rank_waits(run_list)  (table macro)
--   grain: one row per rank (run) of run_list that has communication kernels.
--   columns: rank, run_id, collectives (matched collectives it took part in), late (those it
--            started last while skew_ns > 0), late_share (late / collectives), wait_ns (its
--            own waiting: sum of last_start_ns - its start), caused_wait_ns (sum of wait_ns
--            of the collectives it was late to: the others' waiting for it), kernel_ns (its
--            communication kernels' summed duration)
--
-- collective_arrival(run_list)  (table macro)
--   grain: one row per (step, rank) of the runs with matched collectives in that step
--   (the collective's step).
--   columns: step, rank, run_id, collectives, late, late_share, wait_ns, caused_wait_ns,
--            late_straggler (late in most collectives of the step: late > collectives / 2,
--            the step having at least 2 collectives with skew)
--
-- collective_holdups(run_list, run_id)  (table macro)
--   grain: one row per communication kernel of run run_id (one of run_list) whose matched
--   collective another rank arrived at last (skew_ns > 0).
--   columns: event_index (the kernel's, in run_id), pg, seq, collective, ts_ns (its start),
--            wait_ns (last_start_ns - its start: how long it waited), last_rank, last_run_id,
--            held_by (the last rank's latest GPU op, not communication, that ended on the
--            same device before its collective kernel started: what it was busy with),
--            held_by_op (the CPU operator that launched that op), held_by_end_ns

CREATE OR REPLACE MACRO collective_ops(run_list) AS TABLE
SELECT c.*, r.rank, r.world_size, r.host, r.device_name
FROM collectives c
JOIN runs r ON r.run_id = c.run_id AND r.ingest_id = c.ingest_id
WHERE list_contains(CAST(run_list AS VARCHAR[]), r.run_id);

CREATE OR REPLACE MACRO collective_matches(run_list) AS TABLE
WITH m AS (
    SELECT pg_name AS pg, any_value(pg_desc) AS pg_desc, pg_ranks, seq,
           mode(collective) AS collective, count(DISTINCT collective) AS kinds,
           mode(dtype) AS dtype, max(msg_bytes) AS msg_bytes, max(out_bytes) AS out_bytes,
           coalesce(max(pg_size), count(*)) AS group_size, count(*) AS n_ranks,
           list_sort(list(rank)) AS ranks, min(step) AS step,
           min(ts_ns) AS first_start_ns, max(ts_ns) AS last_start_ns,
           arg_max(rank, struct_pack(t := ts_ns, r := rank)) AS last_rank,
           max(ts_ns + dur_ns) AS last_end_ns, sum(ts_ns) AS sum_start_ns
    FROM collective_ops(run_list)
    GROUP BY pg_name, pg_ranks, seq
),
b AS (
    SELECT m.*,
           CASE WHEN collective = 'all_gather' THEN out_bytes ELSE msg_bytes END AS bw_bytes,
           last_end_ns - last_start_ns AS comm_ns,
           CASE WHEN collective = 'all_reduce' THEN 2.0 * (group_size - 1) / group_size
                WHEN collective IN ('all_gather', 'reduce_scatter', 'all_to_all')
                    THEN 1.0 * (group_size - 1) / group_size
                ELSE 1.0 END AS busbw_factor
    FROM m
)
SELECT pg, pg_desc, pg_ranks, seq, collective, kinds, dtype, msg_bytes, out_bytes, bw_bytes,
       group_size, n_ranks, ranks, step, first_start_ns, last_start_ns,
       last_start_ns - first_start_ns AS skew_ns, last_rank, last_end_ns, comm_ns,
       CASE WHEN comm_ns > 0 THEN bw_bytes / comm_ns END AS algbw_gbps,
       busbw_factor,
       CASE WHEN comm_ns > 0 THEN bw_bytes / comm_ns * busbw_factor END AS busbw_gbps,
       -- in HUGEINT (sum_start_ns is): n_ranks x a start in ns since 1970 passes int64 from 6 ranks on
       CAST(CAST(n_ranks AS HUGEINT) * last_start_ns - sum_start_ns AS BIGINT) AS wait_ns
FROM b
ORDER BY first_start_ns, pg, seq;

CREATE OR REPLACE MACRO collective_rank_waits(run_list) AS TABLE
WITH o AS (SELECT * FROM collective_ops(run_list)),
m AS (SELECT * FROM collective_matches(run_list))
SELECT o.rank, o.run_id, count(*) AS collectives,
       count(*) FILTER (WHERE m.last_rank IS NOT DISTINCT FROM o.rank AND m.skew_ns > 0) AS late,
       count(*) FILTER (WHERE m.last_rank IS NOT DISTINCT FROM o.rank AND m.skew_ns > 0)
           / count(*) AS late_share,
       CAST(sum(m.last_start_ns - o.ts_ns) AS BIGINT) AS wait_ns,
       CAST(coalesce(sum(m.wait_ns) FILTER (
           WHERE m.last_rank IS NOT DISTINCT FROM o.rank AND m.skew_ns > 0), 0) AS BIGINT)
           AS caused_wait_ns,
       CAST(sum(o.dur_ns) AS BIGINT) AS kernel_ns
FROM o
JOIN m ON m.pg IS NOT DISTINCT FROM o.pg_name AND m.pg_ranks IS NOT DISTINCT FROM o.pg_ranks
      AND m.seq IS NOT DISTINCT FROM o.seq
GROUP BY o.rank, o.run_id
ORDER BY wait_ns DESC, o.rank;

CREATE OR REPLACE MACRO collective_arrival(run_list) AS TABLE
WITH o AS (SELECT * FROM collective_ops(run_list)),
m AS (SELECT * FROM collective_matches(run_list)),
per AS (
    SELECT m.step, o.rank, o.run_id, count(*) AS collectives,
           count(*) FILTER (WHERE m.last_rank IS NOT DISTINCT FROM o.rank AND m.skew_ns > 0)
               AS late,
           CAST(sum(m.last_start_ns - o.ts_ns) AS BIGINT) AS wait_ns,
           CAST(coalesce(sum(m.wait_ns) FILTER (
               WHERE m.last_rank IS NOT DISTINCT FROM o.rank AND m.skew_ns > 0), 0) AS BIGINT)
               AS caused_wait_ns
    FROM o
    JOIN m ON m.pg IS NOT DISTINCT FROM o.pg_name AND m.pg_ranks IS NOT DISTINCT FROM o.pg_ranks
          AND m.seq IS NOT DISTINCT FROM o.seq
    GROUP BY m.step, o.rank, o.run_id
),
skewed AS (
    SELECT step, count(*) FILTER (WHERE skew_ns > 0) AS n_skewed FROM m GROUP BY step
)
SELECT per.step, per.rank, per.run_id, per.collectives, per.late,
       per.late / per.collectives AS late_share, per.wait_ns, per.caused_wait_ns,
       coalesce(s.n_skewed >= 2 AND per.late > per.collectives / 2, false) AS late_straggler
FROM per
LEFT JOIN skewed s ON s.step IS NOT DISTINCT FROM per.step
ORDER BY per.step NULLS LAST, per.rank;

CREATE OR REPLACE MACRO collective_holdups(run_list, run_id) AS TABLE
WITH o AS (SELECT * FROM collective_ops(run_list)),
m AS (SELECT * FROM collective_matches(run_list)),
mine AS (
    SELECT o.event_index, o.ts_ns, m.pg, m.pg_ranks, m.seq, m.collective, m.last_rank,
           m.last_start_ns
    FROM o
    JOIN m ON m.pg IS NOT DISTINCT FROM o.pg_name AND m.pg_ranks IS NOT DISTINCT FROM o.pg_ranks
          AND m.seq IS NOT DISTINCT FROM o.seq
    WHERE o.run_id = run_id AND m.skew_ns > 0 AND m.last_rank IS DISTINCT FROM o.rank
),
lastk AS (
    SELECT mine.event_index, l.run_id AS last_run_id, l.device, l.ts_ns AS last_ts_ns
    FROM mine
    JOIN o l ON l.rank = mine.last_rank AND l.pg_name IS NOT DISTINCT FROM mine.pg
            AND l.pg_ranks IS NOT DISTINCT FROM mine.pg_ranks AND l.seq = mine.seq
),
busy AS (
    SELECT g.run_id, g.device, g.ts_ns + g.dur_ns AS end_ns, g.name, g.op_name
    FROM gpu_ops g
    JOIN runs r ON r.run_id = g.run_id AND r.ingest_id = g.ingest_id
    WHERE list_contains(CAST(run_list AS VARCHAR[]), g.run_id) AND g.dur_ns IS NOT NULL
      AND g.category IS DISTINCT FROM 'communication'
),
held AS (
    SELECT lastk.event_index, lastk.last_run_id, b.name AS held_by, b.op_name AS held_by_op,
           b.end_ns AS held_by_end_ns
    FROM lastk
    ASOF LEFT JOIN busy b
        ON b.run_id = lastk.last_run_id AND b.device IS NOT DISTINCT FROM lastk.device
       AND lastk.last_ts_ns >= b.end_ns
)
SELECT mine.event_index, mine.pg, mine.seq, mine.collective, mine.ts_ns,
       mine.last_start_ns - mine.ts_ns AS wait_ns, mine.last_rank, held.last_run_id,
       held.held_by, held.held_by_op, held.held_by_end_ns
FROM mine
LEFT JOIN held USING (event_index)
ORDER BY mine.ts_ns;
