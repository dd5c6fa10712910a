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

import json
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from tracewh.ingest.batchcommit import CommitBatch
from tracewh.ingest.commit import copy_runs
from tracewh.ingest.derive import derive_and_commit, finish, run_row
from tracewh.ingest.link import (
    INGEST_SQL,
    OUT_TABLES,
    category_counts,
    connect_staging,
    link_setup,
    parquet_files,
    plan_runs,
    set_files,
    step_warnings,
)
from tracewh.ingest.options import FileResult, IngestOptions, error_result
from tracewh.ingest.parts import Staged
from tracewh.ingest.rows import I64_MAX
from tracewh.ingest.shred import STAGING_TABLES, StageConnections
from tracewh.storage.store import Store

#: A staged trace of at most this many events (in one part) joins the group.
TINY_EVENTS = 20_000
#: The group runs once it holds this many files or this many events.
GROUP_FILES = 32
GROUP_EVENTS = 100_000


@dataclass
class Member:
    """A staged tiny trace waiting for its group (what ``ingest_file`` knew of it)."""

    path: Path
    run_id: str
    ingest_id: str
    sha: str
    size: int
    replace: bool
    started: datetime
    t0: float
    staged: Staged
    staging: Path
    labels: dict[str, str]
    check: Callable[[], None]  # the file is still the one hashed (raises otherwise)


@dataclass
class TinyGroup:
    """Tiny traces staged for one batch, linked and written together (module docstring)."""

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
        return {m.run_id for m in self.members}

    def taker(self, **known: Any) -> Callable[[Staged, Path, dict[str, str], Callable[[], None]], bool]:
        """For ``ingest_file``: takes its staged trace into the group if tiny (True), else False."""

        def take(staged: Staged, staging: Path, labels: dict[str, str],
                 check: Callable[[], None]) -> bool:
            if len(staged.parts) != 1 or staged.events > TINY_EVENTS:
                return False
            self.members.append(Member(
                staged=staged, staging=staging, labels=labels, check=check, **known))
            if (len(self.members) >= GROUP_FILES
                    or sum(m.staged.events for m in self.members) >= GROUP_EVENTS):
                self.run()
            return True

        return take

    def run(self) -> None:
        """Link and write the waiting traces; each one's result goes to the batch."""
        members, self.members = self.members, []
        if not members:
            return
        try:
            if len(members) == 1:
                self._alone(members[0])
                return
            try:
                results = self._together(members)
            except BaseException as exc:
                # the grouped SQL failed (or delta-rs panicked: pyo3's PanicException is a
                # BaseException): every file on its own, for its own error
                if not isinstance(exc, Exception) and type(exc).__name__ != "PanicException":
                    raise
                for m in members:
                    self.batch.drop(m.ingest_id)
                for m in members:
                    self._alone(m)
                return
            for m, result in zip(members, results, strict=True):
                finish(self.store, self.batch, result, m.ingest_id if result.outcome != "failed"
                       else None, m.sha, m.started)
        finally:
            for m in members:
                self.store.remove_staging(m.staging)

    def _alone(self, m: Member) -> None:
        """The one-file path over ``m``'s staged folder (the linkage, outputs, runs row)."""
        try:
            con = connect_staging(m.staging, m.staged, self.options)
            try:
                row, warnings = derive_and_commit(
                    self.store, con, m.staged.metadata, self.options,
                    run_id=m.run_id, ingest_id=m.ingest_id, replace=m.replace,
                    base=dict(path=m.path, sha=m.sha, size=m.size, labels=m.labels,
                              n_events=m.staged.events, anomalies=m.staged.anomalies),
                    parts=m.staged.parts, batch=self.batch, before_commit=m.check,
                )
            finally:
                con.close()
            result = _result(m, row, warnings, m.staged.anomalies)
        except BaseException as exc:
            self.batch.drop(m.ingest_id)
            failed = error_result(exc, m.path, m.run_id, m.size, m.t0)
            if failed is None:
                raise
            result = failed
        finish(self.store, self.batch, result,
               m.ingest_id if result.outcome != "failed" else None, m.sha, m.started)

    def _together(self, members: list[Member]) -> list[FileResult]:
        """Stage, link and write ``members`` in one connection; their results (per file)."""
        options = self.options
        work = members[0].staging / "group"  # locked by that ingest: cleanup leaves it alone
        (work / "duckdb_tmp").mkdir(parents=True, exist_ok=True)
        con = duckdb.connect(config={"memory_limit": options.memory_limit, "threads": 1})
        try:
            con.execute("SET temp_directory = ?", [str(work / "duckdb_tmp")])
            con.execute("SET preserve_insertion_order = false")
            offsets, total = [], 0
            for m in members:
                offsets.append(total)
                total += m.staged.events
            _stage_tables(con, members, offsets)
            link_setup(con, options)
            con.execute((INGEST_SQL / "10_link.sql").read_text(encoding="utf-8"))
            con.execute("CREATE TEMP VIEW t_gpu_link AS SELECT * FROM t_gpu_link1")
            # 21_out_gpu_ops.sql over everything at once (the one-file path slices it)
            con.execute("CREATE TEMP VIEW s_gev_slice AS SELECT * FROM s_gev")
            con.execute("CREATE TEMP VIEW s_gpu_slice AS SELECT * FROM s_gpu")
            con.execute("CREATE TEMP VIEW s_op_slice AS SELECT * FROM t_op")
            set_files(con, [(k, m.run_id, m.ingest_id, None, 0, None, None, offsets[k])
                            for k, m in enumerate(members)])
            plans = plan_runs(
                con, {k: m.staged.metadata for k, m in enumerate(members)},
                {k: m.staged.anomalies for k, m in enumerate(members)}, options,
            )
            set_files(con, [
                (k, m.run_id, m.ingest_id, plans[k].day, plans[k].base_ns, *plans[k].window,
                 offsets[k]) for k, m in enumerate(members)
            ])
            runs = {m.ingest_id: (plans[k].day, m.run_id) for k, m in enumerate(members)}
            written: dict[str, dict[str, int]] = {m.ingest_id: {} for m in members}
            for table, sql_file in OUT_TABLES:
                query = (INGEST_SQL / sql_file).read_text(encoding="utf-8")
                params = {"slice_lo": 0, "slice_hi": I64_MAX} if "$slice_lo" in query else {}
                counts = copy_runs(self.store, con, table, query, params, runs, work, self.batch)
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
                    m.staged.metadata, options, plans[k], written[m.ingest_id], cats.get(k, {}),
                    run_id=m.run_id, ingest_id=m.ingest_id, path=m.path, size=m.size,
                    sha=m.sha, labels=m.labels, n_events=m.staged.events,
                )
                m.check()  # the file is still the one hashed: else nothing of it is committed
                self.batch.add_run(m.ingest_id, row, replace=m.replace, check=m.check)
                warnings = step_warnings(options, int(plans[k].summary["n_steps"] or 0))
                results.append(_result(m, row, warnings, plans[k].anomalies))
            except Exception as exc:  # this file alone (it changed since it was hashed...)
                self.batch.drop(m.ingest_id)
                failed = error_result(exc, m.path, m.run_id, m.size, m.t0)
                assert failed is not None
                results.append(failed)
        return results


def _stage_tables(con: Any, members: list[Member], offsets: list[int]) -> None:
    """``s_*`` tables of every member's staged rows: ``file_no`` = its position, indices offset."""
    for name in STAGING_TABLES:
        # s_ev: every `ph: X` row but python_function, the GPU ops' (gev) included
        tables = ("ev", "gev") if name == "ev" else (name,)
        selects = []
        for k, m in enumerate(members):
            folder = Path(m.staged.parts[0][0])
            rel = parquet_files([p for t in tables for p in (folder / t).glob("*.parquet")])
            shift = "" if name == "thr" else f" REPLACE (event_index + {int(offsets[k])} AS event_index)"
            selects.append(f"SELECT *{shift}, CAST({k} AS INTEGER) AS file_no FROM {rel}")
        con.execute(f"CREATE TEMP TABLE s_{name} AS {' UNION ALL '.join(selects)}")


def _result(m: Member, row: dict[str, Any], warnings: list[str],
            anomalies: Counter[str]) -> FileResult:
    """The final :class:`FileResult` of a written member (as ``ingest_file`` makes it)."""
    return FileResult(
        str(m.path), "replaced" if m.replace else "ingested", m.run_id,
        events=m.staged.events, bytes=m.size, seconds=time.perf_counter() - m.t0,
        anomalies=dict(anomalies), steps_found=row["n_steps"],
        steps_kept=json.loads(row["rows_json"]).get("steps", 0),
        dropped=row["n_dropped"], warnings=tuple(warnings),
    )


__all__ = ["GROUP_EVENTS", "GROUP_FILES", "TINY_EVENTS", "Member", "TinyGroup"]
