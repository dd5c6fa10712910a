"""Ingest many tiny traces together: their linkage and output SQL run once per group.

A tiny trace's ingest is ~100 DuckDB statements (the linkage ``sql/ingest/10_link.sql``,
the summary, the anomalies and one ``COPY`` per table), each costing a few ms of
planning whatever the rows: most of its CPU time. A :class:`TinyGroup` (one per
:class:`~tracewh.ingest.batchcommit.CommitBatch`) takes each tiny trace once it is
staged (every file is still hashed, locked, checked and staged alone, so a bad file
fails alone with its own error) and runs the statements once for all of them: the
group's traces are staged side by side in one connection, each with its ``file_no``
and its event indices offset, the ingest SQL keys every match on a trace's values by
``file_no``, and each output ``COPY`` writes one file per run
(:func:`~tracewh.ingest.commit.copy_runs`). The rows are those of the one-file path
(``tests/ingest/test_group.py`` compares every table). When the grouped SQL fails
for any reason, each file of the group goes through the one-file path alone, so a
file can only fail for its own reasons.

Commits are the batch's: a grouped run is visible when the batch's ``runs`` commit is,
its locks held until then; the group runs before the batch flushes.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from tracewh.core.errors import TraceFormatError
from tracewh.ingest.batchcommit import CommitBatch
from tracewh.ingest.commit import copy_runs
from tracewh.ingest.derive import empty_outputs, run_row, write_alone
from tracewh.ingest.fingerprint import minhash_table
from tracewh.ingest.link import (
    INGEST_SQL,
    OUT_TABLES,
    category_counts,
    link_setup,
    parquet_files,
    plan_runs,
    set_files,
    step_warnings,
)
from tracewh.ingest.memory import parse_size
from tracewh.ingest.options import FileJob, FileResult, IngestOptions, error_result
from tracewh.ingest.parts import Staged, stage_file, write_held
from tracewh.ingest.rows import I64_MAX
from tracewh.ingest.schemafiles import copy_schema_files
from tracewh.ingest.shred import (
    STAGING_TABLES,
    StageConnections,
    empty_folder,
    stager_for,
)
from tracewh.storage.store import Store

#: A staged trace of at most this many events (in one part) joins the group (medium traces
#: too: the nightly folder of 120 real traces, 2 processes, 0.96x the time and +25 MB of
#: PSS summed over the tree with 120,000 / 250,000 against 20,000 / 100,000).
TINY_EVENTS = 120_000
#: The group runs once it holds this many files or this many events.
GROUP_FILES = 32
GROUP_EVENTS = 250_000
#: ... or once its members hold this many bytes of staged buffers in memory (``Staged.held``)
GROUP_HELD_BYTES = 64 << 20
#: Share of the group's ``memory_limit`` (read as MiB; DuckDB's MB are 10^6 bytes, so ~63%)
#: kept by DuckDB's block allocator
#: (``block_allocator_memory``: taken as used, never given back while the group's database
#: is open). A group's tables and sorts overflow its limit and are read back; without it
#: each evicted block's memory went back to the system and faulted in again when reused
#: (the nightly folder: 1.19 M minor page faults; 0.89 M with it; paired 0.95x the time,
#: the tree's PSS +0-15 MB at 0.6, +40-50 MB and over 400 MB at 1.0: docs/performance.md).
GROUP_BLOCK_SHARE = 0.6


#: A run of a group with at least this many rows of one of :data:`BIG_TABLES` is written by
#: a ``COPY`` of its own (:func:`~tracewh.ingest.commit.copy_runs`): the partitioned ``COPY``
#: of the others costs ~1.4 us a row more than a plain one (its sort by run), a statement of
#: its own ~4 ms.
BIG_RUN_ROWS = 20_000
#: Output tables whose rows come from one staged table keyed by ``file_no`` (its name).
BIG_TABLES = {"events": "s_ev", "flows": "s_flow", "python": "s_py"}


@dataclass
class Member:
    """A staged tiny trace waiting for its group (what ``ingest_file`` knew of it)."""

    job: FileJob
    staged: Staged
    staging: Path
    labels: dict[str, str]
    check: Callable[[], None]  # the file is still the one hashed (raises otherwise)
    #: its held chunks were let go once its group read them: staged again if it must be
    #: written alone (its group failed)
    released: bool = False


@dataclass
class TinyGroup:
    """Tiny traces staged for one batch, linked and written together (module docstring).

    The link strategy of a batch (:class:`~tracewh.ingest.pipeline.Linker`): a tiny trace
    joins the group, a bigger one is written alone at once.
    """

    store: Store
    options: IngestOptions
    batch: CommitBatch
    members: list[Member] = field(default_factory=list)
    #: the staging connection the batch's small files share (tracewh.ingest.shred)
    connections: StageConnections = field(default_factory=StageConnections)

    def __post_init__(self) -> None:
        # the batch runs the group before it commits: no run of it is ever left out
        self.batch.before_flush = self.run

    def close(self) -> None:
        """The batch is done: close the shared staging connection."""
        self.connections.close()

    @property
    def run_ids(self) -> set[str]:
        return {m.job.run_id for m in self.members}

    def write(self, job: FileJob, staged: Staged, staging: Path, labels: dict[str, str],
              check: Callable[[], None]) -> FileResult | None:
        """A tiny trace joins the group (None: its result comes through the batch, and its
        ``staging`` folder is the group's); a bigger one is written alone now."""
        if len(staged.parts) != 1 or staged.events > TINY_EVENTS:
            write_held(staged, self.connections.writer)
            return write_alone(self.store, self.options, self.batch, job, staged, staging,
                               labels, check)
        self.members.append(Member(job, staged, staging, labels, check))
        if (len(self.members) >= GROUP_FILES
                or sum(m.staged.events for m in self.members) >= GROUP_EVENTS
                or sum(m.staged.held.nbytes for m in self.members if m.staged.held)
                >= GROUP_HELD_BYTES):
            self.run()
        return None

    def run(self) -> None:
        """Link and write the waiting traces; each one's result goes to the batch."""
        members, self.members = self.members, []
        if not members:
            return
        try:
            if len(members) == 1 and members[0].staged.held is None:
                self._alone(members[0])  # read from its files, its gpu_ops in slices
                return
            try:
                results = self._together(members)
            except BaseException as exc:
                # the grouped SQL failed (or delta-rs panicked: pyo3's PanicException is a
                # BaseException): every file on its own, for its own error
                if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
                    raise
                for m in members:
                    self.batch.drop(m.job.ingest_id)
                for m in members:
                    self._alone(m)
                return
            for m, result in zip(members, results, strict=True):
                self._finish(m, result)
        finally:
            for m in members:
                self.store.remove_staging(m.staging)

    def _alone(self, m: Member) -> None:
        """The one-file path over ``m``'s staged folder (the linkage, outputs, runs row)."""
        try:
            if m.released:  # its group read its held chunks and let them go: staged again
                empty_folder(m.staging)
                m.staged = stage_file(
                    m.job.path, m.staging, skip_python=self.options.skip_python,
                    memory_limit=self.options.stage_memory_limit, stager=stager_for(True),
                )
                m.released = False
                if m.staged.file_sha256 is not None and m.staged.file_sha256 != m.job.sha:
                    raise TraceFormatError(m.job.path, (
                        f"the file changed while it was read ({m.staged.file_bytes} bytes "
                        "parsed again): ingest it again once it is complete"))
                m.check()
            write_held(m.staged, self.connections.writer)  # held in memory: to files first
            result = write_alone(self.store, self.options, self.batch, m.job, m.staged,
                                 m.staging, m.labels, m.check)
        except BaseException as exc:
            self.batch.drop(m.job.ingest_id)
            failed = error_result(exc, m.job.path, m.job.run_id, m.job.size, m.job.t0)
            if failed is None:
                raise
            result = failed
        self._finish(m, result)

    def _finish(self, m: Member, result: FileResult) -> None:
        self.batch.finish(result, ingest_id=m.job.ingest_id if result.outcome != "failed" else None,
                          sha=m.job.sha, started=m.job.started)

    def _together(self, members: list[Member]) -> list[FileResult]:
        """Stage, link and write ``members`` in one connection; their results (per file)."""
        options = self.options
        work = members[0].staging / "group"  # locked by that ingest: cleanup leaves it alone
        (work / "duckdb_tmp").mkdir(parents=True, exist_ok=True)
        con = _connect(options, keep_blocks=len(members) > 1)
        try:
            con.execute("SET temp_directory = ?", [str(work / "duckdb_tmp")])
            con.execute("SET preserve_insertion_order = false")
            offsets, total = [], 0
            for m in members:
                offsets.append(total)
                total += m.staged.events
            _stage_tables(con, members, offsets, work)
            for m in members:  # their rows are in the s_* tables: the chunks' memory goes
                if m.staged.held is not None:
                    m.staged.held, m.released = None, True
            link_setup(con, options)
            # the linkage sweep in one window partition (sql/ingest/10_link.sql, t_sweep)
            con.execute("SET VARIABLE tw_one_window = true")
            con.execute((INGEST_SQL / "10_link.sql").read_text(encoding="utf-8"))
            con.execute("CREATE TEMP VIEW t_gpu_link AS SELECT * FROM t_gpu_link1")
            # 21_out_gpu_ops.sql over everything at once (the one-file path slices it)
            con.execute("CREATE TEMP VIEW s_gev_slice AS SELECT * FROM s_gev")
            con.execute("CREATE TEMP VIEW s_gpu_slice AS SELECT * FROM s_gpu")
            con.execute("CREATE TEMP VIEW s_op_slice AS SELECT * FROM t_op")
            set_files(con, [(k, m.job.run_id, m.job.ingest_id, None, 0, None, None, offsets[k])
                            for k, m in enumerate(members)])
            plans = plan_runs(
                con, {k: m.staged.metadata for k, m in enumerate(members)},
                {k: m.staged.anomalies for k, m in enumerate(members)}, options,
            )
            set_files(con, [
                (k, m.job.run_id, m.job.ingest_id, plans[k].day, plans[k].base_ns, *plans[k].window,
                 offsets[k]) for k, m in enumerate(members)
            ])
            runs = {m.job.ingest_id: (plans[k].day, m.job.run_id) for k, m in enumerate(members)}
            written: dict[str, dict[str, int]] = {m.job.ingest_id: {} for m in members}
            empty = empty_outputs(con)
            alone = _big_runs(con, members, empty)
            for table, sql_file in OUT_TABLES:
                if table in empty:
                    for ingest_id in written:
                        written[ingest_id][table] = 0
                    continue
                if table == "fingerprints":
                    minhash_table(con)
                query = (INGEST_SQL / sql_file).read_text(encoding="utf-8")
                params = {"slice_lo": 0, "slice_hi": I64_MAX} if "$slice_lo" in query else {}
                counts = copy_runs(self.store, con, table, query, params, runs, work, self.batch,
                                   alone=alone.get(table, ()))
                for ingest_id, n in counts.items():
                    written[ingest_id][table] = n
            cats = category_counts(con)
        finally:
            con.close()
            shutil.rmtree(work, ignore_errors=True)
        results = []
        for k, m in enumerate(members):
            try:
                row = run_row(
                    m.staged.metadata, options, plans[k], written[m.job.ingest_id], cats.get(k, {}),
                    run_id=m.job.run_id, ingest_id=m.job.ingest_id, path=m.job.path, size=m.job.size,
                    sha=m.job.sha, labels=m.labels, n_events=m.staged.events,
                )
                m.check()  # the file is still the one hashed: else nothing of it is committed
                self.batch.add_run(m.job.ingest_id, row, replace=m.job.replace, check=m.check)
                warnings = step_warnings(options, int(plans[k].summary["n_steps"] or 0))
                results.append(m.job.written(m.staged.events, plans[k].anomalies, row, warnings))
            except Exception as exc:  # this file alone (it changed since it was hashed...)
                self.batch.drop(m.job.ingest_id)
                failed = error_result(exc, m.job.path, m.job.run_id, m.job.size, m.job.t0)
                assert failed is not None
                results.append(failed)
        return results


def _connect(options: IngestOptions, *, keep_blocks: bool = True) -> Any:
    """The group's DuckDB: its ``memory_limit``, one thread and, with ``keep_blocks`` (a
    group of several files), :data:`GROUP_BLOCK_SHARE` of it kept by the block allocator
    (where this DuckDB has one). A group of one file goes without: the kept blocks raised a
    small trace's ingest peak by ~20 MB (115 -> 137 MB) once no other DuckDB was open before
    it, and a 109,000-event trace alone faulted as often with them as without (4 runs)."""
    config: dict[str, str | bool | int | float | list[str]] = {
        "memory_limit": options.memory_limit, "threads": 1,
    }
    if not keep_blocks:
        return duckdb.connect(config=config)
    block = int(parse_size(options.memory_limit) * GROUP_BLOCK_SHARE)
    try:
        return duckdb.connect(config={**config, "block_allocator_memory": f"{block}B"})
    except duckdb.InvalidInputException:  # no such setting: the allocator's default
        return duckdb.connect(config=config)


def _big_runs(con: Any, members: list[Member], empty: frozenset[str]) -> dict[str, list[str]]:
    """The runs of a group whose rows of a big table get a ``COPY`` of their own.

    For the tables whose rows come from one staged table keyed by ``file_no``
    (:data:`BIG_TABLES`), the runs with at least :data:`BIG_RUN_ROWS` staged rows: their
    own ``COPY`` reads only their rows (the filter reaches the staged table's scan) and
    spares the partitioned ``COPY`` sorting them. (A group of one run is always written so.)
    """
    if len(members) < 2:
        return {}
    out: dict[str, list[str]] = {}
    for table, staged in BIG_TABLES.items():
        if table in empty:
            continue
        rows = con.execute(f"SELECT file_no FROM {staged} GROUP BY file_no HAVING count(*) >= ?",
                           [BIG_RUN_ROWS]).fetchall()
        out[table] = [members[int(k)].job.ingest_id for (k,) in rows]
    return out


def _stage_tables(con: Any, members: list[Member], offsets: list[int], work: Path) -> None:
    """``s_*`` tables of every member's staged rows: ``file_no`` = its position, indices offset.

    A member held in memory (``Staged.held``) is read from its Arrow chunks, registered on
    ``con`` for the statement. A member whose table holds only its empty ``schema.parquet``
    adds no rows and is not read (each file opened costs ~1 ms; a tiny trace leaves several
    tables empty); a table empty in every member reads one of those files for its columns,
    or a schema file written into ``work``.
    """
    for name in STAGING_TABLES:
        # s_ev (every `ph: X` row but python_function, the GPU ops' included): a view over
        # s_ev_own and s_gev, the GPU ops' rows held once (their long names and args)
        tables = (name,)
        selects, registered = [], []
        empty: Path | None = None
        for k, m in enumerate(members):
            shift = "" if name == "thr" else f" REPLACE (event_index + {int(offsets[k])} AS event_index)"
            if m.staged.held is not None:
                for seq, chunk in enumerate(c[t] for c in m.staged.held for t in tables if t in c):
                    view = f"tw_held_{k}_{name}_{seq}"
                    con.register(view, chunk)
                    registered.append(view)
                    selects.append(f"SELECT *{shift}, CAST({k} AS INTEGER) AS file_no FROM {view}")
                continue
            folder = Path(m.staged.parts[0][0])
            files = [p for t in tables for p in (folder / t).glob("*.parquet")]
            rows = [p for p in files if p.name != "schema.parquet"]
            if not rows:
                empty = empty or (files[0] if files else None)
                continue
            rel = parquet_files(rows)
            selects.append(f"SELECT *{shift}, CAST({k} AS INTEGER) AS file_no FROM {rel}")
        if not selects:  # no member has rows: the columns, from an empty file
            if empty is None:  # every member held in memory
                (work / "schema").mkdir(exist_ok=True)
                copy_schema_files(work / "schema")
                empty = work / "schema" / tables[0] / "schema.parquet"
            selects.append(f"SELECT *, CAST(0 AS INTEGER) AS file_no FROM {parquet_files([empty])}")
        try:
            table = "s_ev_own" if name == "ev" else f"s_{name}"
            con.execute(f"CREATE TEMP TABLE {table} AS {' UNION ALL '.join(selects)}")
        finally:
            for view in registered:
                con.unregister(view)
    con.execute("CREATE TEMP VIEW s_ev AS SELECT * FROM s_ev_own UNION ALL SELECT * FROM s_gev")


__all__ = ["GROUP_EVENTS", "GROUP_FILES", "GROUP_HELD_BYTES", "TINY_EVENTS", "Member", "TinyGroup"]
