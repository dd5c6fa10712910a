"""The tracewh Python API: :class:`Warehouse`, a thin facade over the layers.

Its query layer is ``Warehouse.catalog`` (:class:`tracewh.query.session.Session`), with the
methods of :class:`tracewh.query.methods.QueryMethods`; each other method calls the module
that defines its analysis. SQL runs one way, :meth:`Warehouse.relation` (to
Polars, Arrow or rows), a per-run macro one way, :meth:`Warehouse.macro_relation`;
:meth:`~Warehouse.sql`, :meth:`~Warehouse.macro` and :meth:`~Warehouse.call` return frames.

>>> wh = Warehouse("warehouse"); wh.ingest(["traces/"]); wh.kernels(top=10)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracewh.analysis import memory as _mem
from tracewh.history.options import ChangesOptions, CheckOptions
from tracewh.ingest.options import DEFAULT_JOBS, IngestOptions
from tracewh.query import macros
from tracewh.query import options as opts
from tracewh.query.methods import QueryMethods
from tracewh.query.runs import LATEST_FIRST
from tracewh.query.runsel import RunFilter, RunRef, RunSelector, days_of
from tracewh.query.session import Session
from tracewh.query.settings import DEFAULT_MEMORY_LIMIT, QuerySettings
from tracewh.storage.store import Store

# Polars, the ingest pipeline (pyarrow, deltalake), history, changes and check are imported
# where they are used: a command that prints a query's rows loads none of them
if TYPE_CHECKING:
    import polars as pl

    from tracewh.analysis import critical_path as _cp
    from tracewh.analysis import roofline as _roof
    from tracewh.history import alerts as _alerts
    from tracewh.history import check as _check
    from tracewh.history.runseries import MigrateReport
    from tracewh.ingest.batch import Executor, IngestReport
    from tracewh.ingest.maintenance import CompactReport, VerifyReport
    from tracewh.ingest.options import FileResult

__all__ = ["LATEST_FIRST", "RunRef", "RunSelector", "Warehouse"]


class Warehouse(QueryMethods):
    """A tracewh warehouse: Delta tables under ``root`` plus the SQL views over them.

    Parameters
    ----------
    root
        The warehouse directory, or an object-store URL such as ``s3://bucket/prefix``.
    storage_options
        Object-store settings (``aws_endpoint_url``, ``aws_region``, credentials...) for
        delta-rs, Polars and DuckDB's file system; empty: the standard ``AWS_*`` environment.
    memory_limit
        DuckDB's memory limit for this warehouse's queries (``"2GB"``, ``"512MiB"``); a query
        needing more spills to disk (:mod:`tracewh.query.settings`).
    temp_directory
        Where the private spill folders are made (default: the system's temporary folder);
        each is this process's alone and removed afterwards.
    """

    def __init__(
        self, root: str | Path, *, storage_options: Mapping[str, str] | None = None,
        memory_limit: str = DEFAULT_MEMORY_LIMIT, temp_directory: str | Path | None = None,
    ) -> None:
        self.store = Store(root, storage_options=dict(storage_options or {}))
        self.root: Path | str = self.store.root
        #: DuckDB's memory limit and spill folder of every connection (query.settings).
        self.settings = QuerySettings(memory_limit, temp_directory)
        #: The query layer: connections, snapshots and sessions of this warehouse.
        self.catalog = Session(self.store, settings=self.settings)

    def __repr__(self) -> str:
        return f"Warehouse({str(self.root)!r})"

    # ------------------------------------------------------ ingest, maintenance
    def ingest(
        self,
        paths: Iterable[str | Path],
        *,
        labels: Mapping[str, str] | None = None,
        jobs: int | str = DEFAULT_JOBS,
        steps: int | None = IngestOptions.steps,
        step_marker: str | None = IngestOptions.step_marker,
        skip_python: bool = IngestOptions.skip_python,
        force: bool = IngestOptions.force,
        job: str | None = IngestOptions.job,
        executor: Executor | None = None,
        on_result: Callable[[FileResult], None] | None = None,
    ) -> IngestReport:
        """Ingest trace files and directories (recursive ``*.json``/``*.json.gz``).

        ``jobs``: processes, or ``"auto"`` (see :func:`tracewh.ingest.batch.resolve_jobs`).
        Returns an :class:`~tracewh.ingest.batch.IngestReport`; a bad file is a failed
        result, never an exception. The options are :class:`~tracewh.ingest.options.IngestOptions`.
        """
        from tracewh.history.runseries import write_series
        from tracewh.ingest.batch import ingest_paths
        options = IngestOptions.checked(labels=dict(labels or {}), steps=steps, step_marker=step_marker,
                                        skip_python=skip_python, force=force, job=job,
                                        derive=write_series)
        return ingest_paths(self.store, paths, options, jobs=jobs, executor=executor,
                            on_result=on_result)

    def verify(self) -> VerifyReport:
        """Check that every visible run is complete and every data file is intact."""
        from tracewh.ingest.maintenance import verify
        self.store.require()
        return verify(self.store)

    def compact(self, *, retain_hours: int = 168) -> CompactReport:
        """Store missing fingerprints, remove leftovers, merge small files, vacuum old files.

        Runs ingested before the ``fingerprints`` table existed get theirs first
        (:meth:`backfill_fingerprints`); then leftovers are removed, small files merged and
        files older than ``retain_hours`` vacuumed.
        """
        import dataclasses

        from tracewh.ingest.maintenance import compact
        self.store.require()
        added = self.backfill_fingerprints()
        report = compact(self.store, retain_hours=retain_hours)
        return dataclasses.replace(report, fingerprints_added=added)

    def migrate(self, *, batch: int = 64) -> MigrateReport:
        """Bring a warehouse written by an older tracewh up to date; safe to repeat or kill.

        Adds the tables it lacks, stores the ``run_series`` rows (each run's history series,
        :mod:`tracewh.history.runseries`) and the fingerprints of the runs ingested before
        those tables, ``batch`` runs of whole days per query and commit, then merges the
        ``run_series`` table's small files and checkpoints it. Idempotent: a second call
        finds nothing to do. Killed at any point, every commit is whole and the next call
        finishes the work; until then history commands compute the missing values from the
        runs' tables (the same values, slower).
        """
        from tracewh.history.runseries import MigrateReport, migrate_series
        from tracewh.ingest.compaction import compact_table
        self.store.require()
        self.store.check_writable()
        series = migrate_series(self, self.store, batch=batch)
        fingerprints = self.backfill_fingerprints(batch=batch)
        merged = compact_table(self.store, "run_series", max_files=1)
        self.store.table("run_series").create_checkpoint()  # history opens one file
        return MigrateReport(series, fingerprints, merged.files_before, merged.files_after)

    def backfill_fingerprints(self, *, batch: int = 64) -> int:
        """Store the fingerprint of every visible run without one; how many were added.

        See :func:`tracewh.ingest.backfill.backfill` (visibility, concurrency).
        """
        from tracewh.ingest.backfill import backfill
        self.store.require()
        return backfill(self.store, self.sql, batch=batch)

    def frame(self, name: str, run: RunSelector = "latest", /, **options: Any) -> pl.LazyFrame:
        """Per-run analysis ``name`` as a LazyFrame, by its Polars definition (:func:`tracewh.analysis.frames.frame`)."""
        from tracewh.analysis.frames import frame
        ref = self.resolve_run(run)
        return frame(name, self.scan("gpu_ops", days=ref.days), ref.run_id, **options)

    # ------------------------------------------------------------------- runs
    def runs(self, *, where: Mapping[str, str] | None = None) -> pl.DataFrame:
        """Every visible run, latest first, filtered by labels/fields, with ``workload``,
        ``workload_by`` and ``unusable`` (:func:`tracewh.history.instances.with_workload`)."""
        from tracewh.history.instances import with_workload
        clauses, params = RunFilter(dict(where or {})).sql()
        query = f"SELECT * EXCLUDE (metadata_json) FROM runs WHERE {clauses} ORDER BY {LATEST_FIRST}"
        return with_workload(self, self.catalog.fetch_own(query, params, only="runs"))

    # --------------------------------------------------------------- analyses
    def _analysis(self, call: macros.MacroCall, run: RunSelector) -> pl.DataFrame:
        return self.macro(call.name, run, **call.params)

    def kernels(
        self, run: RunSelector = "latest", *, cats: Sequence[str] | None = opts.KernelsOptions.cats,
        group_by: str = opts.KernelsOptions.group_by, by: str = opts.KernelsOptions.by, top: int | None = None,
    ) -> pl.DataFrame:
        """Kernel ranking of a run (see ``sql/10_kernels.sql``; options: :class:`~tracewh.query.options.KernelsOptions`)."""
        df = self._analysis(macros.kernels(cats=cats, group_by=group_by, by=by), run)
        return df.head(top) if top else df

    def gaps(self, run: RunSelector = "latest", *, threshold_ns: int = opts.GapsOptions.threshold_ns) -> pl.DataFrame:
        """Stream gaps and idle breakdown per (device, stream) (``stream_gaps``)."""
        return self._analysis(macros.gaps(threshold_ns=threshold_ns), run)

    def largest_gaps(
        self, run: RunSelector = "latest", *, n: int = opts.GapsOptions.largest,
        threshold_ns: int = opts.GapsOptions.threshold_ns,
    ) -> pl.DataFrame:
        """The ``n`` largest gaps with the ops on either side (``largest_gaps``)."""
        return self._analysis(macros.largest_gaps(n=n, threshold_ns=threshold_ns), run)

    def idle_breakdown(self, run: RunSelector = "latest", *, threshold_ns: int = opts.GapsOptions.threshold_ns) -> pl.DataFrame:
        """Idle time by kind per stream and per device (``idle_breakdown``)."""
        return self._analysis(macros.idle_breakdown(threshold_ns=threshold_ns), run)

    def launches(self, run: RunSelector = "latest", *, by: str = opts.LaunchesOptions.by) -> pl.DataFrame:
        """Launch latency per kernel name, step, launch, the linkage, or graph launch (:func:`tracewh.query.macros.launches`)."""
        return self._analysis(macros.launches(by=by), run)

    def queue_depth(self, run: RunSelector = "latest") -> pl.DataFrame:
        """Outstanding GPU ops per stream over time (``queue_depth``)."""
        return self._analysis(macros.queue_depth(), run)

    def steps(self, run: RunSelector = "latest", *, threshold_ns: int = opts.StepsOptions.threshold_ns) -> pl.DataFrame:
        """Per step, by launch: wall, GPU busy/idle/tail, idle parts, top kernel (``step_summary``)."""
        return self._analysis(macros.steps(threshold_ns=threshold_ns), run)

    def ops(self, run: RunSelector = "latest", *, cpu: bool = opts.OpsOptions.cpu) -> pl.DataFrame:
        """GPU time per CPU operator and input shapes, or CPU-side op time with ``cpu``."""
        return self._analysis(macros.ops(cpu=cpu), run)

    def modules(
        self, run: RunSelector = "latest", *, depth: int | None = opts.ModulesOptions.depth,
        top: int | None = None,
    ) -> pl.DataFrame:
        """GPU time per nn.Module as a tree (:func:`tracewh.query.macros.modules`)."""
        return self._analysis(macros.modules(depth=depth, top=top), run)

    def annotations(
        self, run: RunSelector = "latest", *, gpu: bool = opts.AnnotationsOptions.gpu,
        depth: int | None = opts.AnnotationsOptions.depth, top: int | None = None,
    ) -> pl.DataFrame:
        """GPU time per user annotation as a tree (:func:`tracewh.query.macros.annotation_tree`)."""
        return self._analysis(macros.annotation_tree(gpu=gpu, depth=depth, top=top), run)

    def graph_launches(self, run: RunSelector = "latest") -> pl.DataFrame:
        """One row per CUDA/HIP graph launch: its ops, latency, the capture it maps to."""
        return self._analysis(macros.launches(by="graph"), run)

    def graph_match(self, run: RunSelector = "latest") -> dict[str, Any]:
        """How the run's graph replays map to captures, one row as a dict (``graph_match``)."""
        rows = self.macro_relation(macros.graph_match().name, run).rows()
        return dict(zip(rows.columns, rows.rows[0], strict=True))

    def memcpy(self, run: RunSelector = "latest") -> pl.DataFrame:
        """Memory copies per kind: count, bytes, time, GB/s (``memcpy_summary``)."""
        return self._analysis(macros.memcpy(), run)

    def breakdown(self, run: RunSelector = "latest") -> pl.DataFrame:
        """GPU time per device: compute, communication, memcpy, idle (``gpu_time_breakdown``)."""
        return self._analysis(macros.breakdown(), run)

    def memory(
        self, run: RunSelector = "latest", *, view: str = opts.MemoryOptions.view,
        device: str | None = opts.MemoryOptions.device, top: int | None = opts.MemoryOptions.top,
        buckets: int = opts.MemoryOptions.buckets, memory_limit: int = _mem.QUERY_MEMORY_LIMIT,
    ) -> pl.DataFrame:
        """Device memory of a run: peak, holders, steps, leaks, timeline (:func:`tracewh.analysis.memory.memory`)."""
        return _mem.memory(self, run, view=view, device=device, top=top, buckets=buckets,
                           memory_limit=memory_limit)

    def ranks(
        self, job: str | None = None, *, view: str = opts.RanksOptions.view, run: RunSelector | None = None
    ) -> pl.DataFrame:
        """Multi-rank comparison within the job instance of ``run`` (else the latest of ``job``, else
        the latest run's): ``rank_<view>`` of ``sql/80_ranks.sql``, ``imbalance``/``kernels``/``stragglers``."""
        macros.check_choice("view", view, opts.RANK_VIEWS)
        ids = self.rank_runs(job, run=run)
        return self.call(f"rank_{view}", ids, days=days_of(self, ids))

    def job_runs(self, runs: Sequence[RunSelector] = ()) -> list[str]:
        """The runs of a multi-rank question: the job instance of one run (or ``latest``), or
        exactly the runs given (distinct ranks). Lowest rank first."""
        from tracewh.history.instances import distinct_ranks
        if len(runs) <= 1:
            return self.rank_runs(run=runs[0] if runs else "latest")
        return distinct_ranks([self.resolve_run(r) for r in runs])

    def collectives(
        self, runs: Sequence[RunSelector] = (), *, by: str = opts.CollectivesOptions.by,
        link: str | None = opts.CollectivesOptions.link,
        link_peak_gbps: float | None = opts.CollectivesOptions.link_peak_gbps,
    ) -> pl.DataFrame:
        """Collectives matched across the ranks of a job (:func:`tracewh.analysis.collectives.collectives`)."""
        from tracewh.analysis import collectives as _coll
        _coll.check_by(by)
        return _coll.collectives(self, self.job_runs(runs), by=by, link=link,
                                 link_peak_gbps=link_peak_gbps)

    def critical_path(
        self, run: RunSelector = "latest", *, step: int | None = None, data_loading: Sequence[str] = ()
    ) -> _cp.CriticalPath:
        """The critical path of a run or of its step ``step`` (:func:`tracewh.analysis.critical_run.run_critical_path`)."""
        from tracewh.analysis.critical_run import run_critical_path
        ref = self.resolve_run(run)
        return run_critical_path(self, ref, step=step, data_loading=data_loading,
                                 ranks=self.rank_runs(run=ref))

    def critical_path_steps(
        self, run: RunSelector = "latest", *, data_loading: Sequence[str] = (),
        max_steps: int | None = None,
    ) -> pl.DataFrame:
        """The critical path of every step of a run (:func:`tracewh.analysis.critical_run.step_critical_paths`)."""
        from tracewh.analysis.critical_run import step_critical_paths
        ref = self.resolve_run(run)
        return step_critical_paths(self, ref, data_loading=data_loading, max_steps=max_steps)

    def critical_path_history(
        self, *, where: Mapping[str, str] | None = None, step_index: int = 0,
        data_loading: Sequence[str] = (),
    ) -> pl.DataFrame:
        """The critical path's shares by bound, one row per run matching ``where``, oldest first
        (:func:`tracewh.analysis.critical_run.critical_path_history`)."""
        from tracewh.analysis.critical_run import critical_path_history
        ids = self.runs(where=where)["run_id"].to_list()[::-1]
        return critical_path_history(self, [self.resolve_run(i) for i in ids],
                                     step_index=step_index, data_loading=data_loading)

    def rank_runs(self, job: str | None = None, *, run: RunSelector | None = None) -> list[str]:
        """The run ids of a job instance (see :meth:`ranks`), lowest rank first."""
        from tracewh.history.instances import instance_runs
        if run is not None or job is None or job in ("", "latest") or "=" in job:
            ref = self.resolve_run(run if run is not None else (job or "latest"))
        else:
            hits = self.catalog.fetch_own(f"SELECT run_id FROM runs WHERE job = $j ORDER BY {LATEST_FIRST}",
                                          {"j": job}, only="runs")
            ref = self.resolve_run(hits["run_id"][0] if hits.height else job)
        return instance_runs(self, ref)

    def roofline(
        self, run: RunSelector = "latest", *, op: str | None = opts.RooflineOptions.op, top: int | None = None,
        peak_tflops: _roof.PeakTflops | None = None, peak_tbs: float | None = opts.RooflineOptions.peak_tbs,
    ) -> pl.DataFrame:
        """FLOPs, bytes, achieved TFLOP/s and TB/s per CPU operator against the peaks (:func:`tracewh.analysis.roofline.roofline`)."""
        from tracewh.analysis import roofline as _roof
        return _roof.roofline(self, run, op=op, top=top, peak_tflops=peak_tflops, peak_tbs=peak_tbs)

    def roofline_runs(self, runs: Sequence[RunSelector]) -> dict[str, pl.DataFrame]:
        """:meth:`roofline` of each run, by run_id, in one query (:func:`tracewh.analysis.roofline.roofline_runs`)."""
        from tracewh.analysis import roofline as _roof
        return _roof.roofline_runs(self, runs)

    def roofline_history(
        self, *, op: str | None = None, since: str | date | None = None,
        where: Mapping[str, str] | None = None, peak_tflops: _roof.PeakTflops | None = None,
        peak_tbs: float | None = None,
    ) -> pl.DataFrame:
        """Achieved TFLOP/s and TB/s of the matched operators per run (:func:`tracewh.analysis.roofline.roofline_history`)."""
        from tracewh.analysis import roofline as _roof
        return _roof.roofline_history(self, op=op, since=since, where=where, peak_tflops=peak_tflops,
                                      peak_tbs=peak_tbs)

    # ---------------------------------------------------------------- history
    def diff(
        self, a: RunSelector, b: RunSelector, *, level: str = "kernel", tolerance: float = 0.05
    ) -> pl.DataFrame:
        """Compare runs ``a`` and ``b`` per kernel, short name, category or op (:func:`tracewh.history.series.diff`)."""
        from tracewh.history import series as _hist
        return _hist.diff(self, a, b, level=level, tolerance=tolerance)

    def compare(self, a: RunSelector, b: RunSelector) -> pl.DataFrame:
        """Run-level metrics of runs ``a`` and ``b`` side by side (:func:`tracewh.history.series.compare`)."""
        from tracewh.history import series as _hist
        return _hist.compare(self, a, b)

    def history(
        self, *, kernel: str | None = None, category: str | None = None,
        since: str | date | None = None, where: Mapping[str, str] | None = None,
        kernel_key: str | None = None,
    ) -> pl.DataFrame:
        """Time series, one row per run (oldest first): :func:`tracewh.history.series.history`."""
        from tracewh.history import series as _hist
        return _hist.history(self, kernel=kernel, category=category, since=since, where=where,
                             kernel_key=kernel_key)  # fmt: skip

    def changes(
        self, *, since: str | date | None = ChangesOptions.since, kernel: str | None = None,
        category: str | None = None, module: str | None = None, op: str | None = None,
        where: Mapping[str, str] | None = None, alpha: float | None = None,
        min_change: float = ChangesOptions.min_change, min_ms: float = ChangesOptions.min_ms, floor_ms: float = ChangesOptions.floor_ms,
        keys: Sequence[str] | None = None, include_unusable: bool = ChangesOptions.include_unusable,
        critical_path: bool = ChangesOptions.critical_path,
    ) -> _alerts.ChangesReport:
        """Change points over the whole history of every comparable series (:func:`tracewh.history.alerts.changes`)."""
        from tracewh.history import alerts as _alerts
        # one snapshot and one connection for the runs, their fingerprints and the values
        with self.session():
            return _alerts.changes(
                self, since=since, kernel=kernel, category=category, module=module, op=op,
                where=where, alpha=_alerts.DEFAULT_ALPHA if alpha is None else alpha,
                min_change=min_change, min_ms=min_ms, floor_ms=floor_ms,
                keys=_alerts.DEFAULT_KEYS if keys is None else keys,
                include_unusable=include_unusable, critical_path=critical_path,
            )  # fmt: skip

    def check(
        self, run: RunSelector = "latest", *, baseline: int | None = CheckOptions.baseline,
        threshold: float = CheckOptions.threshold, min_ms: float = CheckOptions.min_ms, k_mad: float = CheckOptions.k_mad, floor_ms: float = CheckOptions.floor_ms,
        min_runs: int = CheckOptions.min_runs, alpha: float | None = None, keys: Sequence[str] | None = None,
        all_ranks: bool = CheckOptions.all_ranks, include_unusable: bool = CheckOptions.include_unusable, op: str | None = CheckOptions.op,
        critical_path: bool = CheckOptions.critical_path,
    ) -> _check.CheckReport:
        """Check a run, and the other ranks of its job instance, for regressions in force (:func:`tracewh.history.check.check`)."""
        from tracewh.history import alerts as _alerts
        from tracewh.history import check as _check
        with self.session():  # one snapshot and one connection for every query of the check
            return _check.check(
                self, run, baseline=baseline, threshold=threshold, min_ms=min_ms, k_mad=k_mad,
                floor_ms=floor_ms, min_runs=min_runs,
                alpha=_alerts.DEFAULT_ALPHA if alpha is None else alpha,
                keys=_alerts.DEFAULT_KEYS if keys is None else keys,
                all_ranks=all_ranks, include_unusable=include_unusable, op=op,
                critical_path=critical_path,
            )  # fmt: skip
