"""The tools over many runs: diff, history, changes, check, ranks, collectives, critical_path.

Each is the command of the same name with ``--format json``, through the same library
functions (:mod:`tracewh.results`): ``diff``, ``check`` and ``critical_path`` (by bound)
return the CLI's JSON object as it is, ``history``, ``changes``, ``ranks``, ``collectives``
and ``critical_path`` by step, edge or run its list under ``result``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from tracewh import results
from tracewh.api import Warehouse
from tracewh.mcp.calls import Calls, document_result, rows_result
from tracewh.mcp.params import READ_ONLY, Run, Since, Top, Where
from tracewh.mcp.tools_run import RowsResult
from tracewh.query.options import CollectivesOptions, RanksOptions

__all__ = ["register"]

_Pct = Annotated[str, Field(description="A relative change as a percentage, e.g. '10%'.")]


class Diff(BaseModel):
    """``tracewh diff --format json``."""

    runs: list[dict[str, Any]] = Field(description="One row per run-level metric: metric, value_a, value_b, delta (B - A), ratio (B / A); *_ns metrics in ns per step, *_fraction 0-1.")
    groups: list[dict[str, Any]] = Field(description="One row per kernel / short_name / category / op: calls and time per step in A and B (time_per_step_a_ns, time_per_step_b_ns), delta_per_step_ns, ratio, status (added, removed, slower, faster, unchanged), by absolute impact.")


class CriticalPathResult(BaseModel):
    """``tracewh critical-path --format json``: the object (by bound), or rows under ``result``."""

    total_ns: int | None = Field(None, description="by='bound': the path's length in ns (the sum of by_bound).")
    by_bound: dict[str, int] | None = Field(None, description="by='bound': ns of the path per bound: cpu_bound, data_loading, gpu_compute_bound, gpu_communication_bound, gpu_kernel_kernel_overhead, gpu_kernel_launch_overhead, dependency.")
    edges: list[dict[str, Any]] | None = Field(None, description="by='bound': the path's edges in path order: kind, bound, event_index, name, ts_ns, dur_ns.")
    result: list[dict[str, Any]] | None = Field(None, description="by='step', 'edge' or 'run': the rows.")
    model_config = {"extra": "allow"}


class Check(BaseModel):
    """``tracewh check --format json``."""

    status: str = Field(description="'regression', 'ok' or 'insufficient_baseline' (too few comparable earlier runs).")
    model_config = {"extra": "allow"}


def register(server: FastMCP[Any], calls: Calls) -> None:
    """Add the multi-run tools to ``server``."""

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def diff(
        a: Annotated[str, Field(description="Run A, the reference: a selector (run_id prefix, 'latest', KEY=VALUE terms joined by commas).")],
        b: Annotated[str, Field(description="Run B, compared with A: a selector.")],
        level: Annotated[Literal["kernel", "short_name", "category", "op"], Field(description="Compare per kernel (GPU op name), short_name, category, or op (CPU operator and input shapes: across hardware, where kernel names differ).")] = "kernel",
        tolerance: Annotated[float, Field(ge=0, description="Changes within this many percent count as unchanged.")] = 5.0,
        top: Annotated[int, Field(ge=0, description="The N groups with the largest impact (0: all).")] = 20,
    ) -> Annotated[CallToolResult, Diff]:
        """Compare two runs per step: what got slower or faster between A and B, and by how much.

        Returns run-level metrics side by side (step time, GPU busy/idle per step, idle by
        cause) and one row per group with calls and time per step in each run, delta (ns per
        step), ratio and status. Times are per step, so runs with different step counts
        compare. Next: `kernels` on run B for the full ranking, `history` for a group over
        time.
        """
        def work(wh: Warehouse) -> CallToolResult:
            result = results.diff(wh, a, b, level=level, tolerance=tolerance / 100.0)
            return document_result(result.document(top=top))

        return await calls.run(work)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def history(
        kernel: Annotated[str | None, Field(description="GPU op name pattern (case-insensitive; glob with * ? [, else substring), e.g. 'flash_fwd'.")] = None,
        category: Annotated[str | None, Field(description="A kernel category: gemm, attention, communication, elementwise, ...")] = None,
        op: Annotated[str | None, Field(description="Instead: CPU operators matching this pattern, their achieved TFLOP/s, TB/s and % of peak per run (see `roofline`).")] = None,
        kernel_key: Annotated[str | None, Field(description="A kernel key (the `key` of a kernel change from `changes`): every op name under it.")] = None,
        critical_path: Annotated[bool, Field(description="Instead: each run's critical-path share by bound (<bound>_share, 0-1, of the paths of its first steps); computes those paths, so slower.")] = False,
        since: Since = None,
        where: Where = None,
        top: Annotated[int, Field(ge=0, description="The N first rows, oldest first (0: all).")] = 0,
    ) -> RowsResult:
        """Time series, one row per run (oldest first): step time, GPU idle fraction, and time per step of the chosen ops.

        Columns: day, start_ns, run_id, job, rank, labels_json, n_steps, step_ns (ns per
        step), gpu_idle_fraction (0-1), kernels, calls, calls_per_step, time_per_step_ns,
        mean_ns. Give at most one of kernel, category, op. Use it to see when a metric moved;
        `changes` finds the change points for you.
        """

        def work(wh: Warehouse) -> CallToolResult:
            df = results.history(wh, kernel=kernel, category=category, op=op,
                                 kernel_key=kernel_key, since=since, where=where,
                                 critical_path=critical_path).frame  # fmt: skip
            note = results.graph_runs_note(wh, df["run_id"].to_list()) if op is not None else None
            return rows_result(results.json_rows(df, top=top), total=df.height, note=note)

        return await calls.run(work)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def changes(
        run: Annotated[str | None, Field(description="Only the series of this run (its workload and rank): a selector. Default: every series.")] = None,
        since: Annotated[str, Field(description="Window: '90d', '12w' (counted back from the latest run's day), YYYY-MM-DD, or 'all'.")] = "90d",
        kernel: Annotated[str | None, Field(description="Only GPU ops matching this pattern (glob with * ? [, else substring).")] = None,
        category: Annotated[str | None, Field(description="Only GPU ops of this category.")] = None,
        module: Annotated[str | None, Field(description="Only GPU ops under this module path (Root/child/...).")] = None,
        op: Annotated[str | None, Field(description="Instead: the achieved TFLOP/s of the CPU operators matching this pattern (a drop is the regression).")] = None,
        where: Where = None,
        alpha: Annotated[float, Field(gt=0, lt=1, description="Significance of a change (per split, after the correction for the search).")] = 0.01,
        min_change: _Pct = "0%",
        min_ms: Annotated[float, Field(ge=0, description="Analyse kernels, categories and modules reaching this many ms per step.")] = 0.1,
        include_unusable: Annotated[bool, Field(description="Keep runs flagged unusable for comparison (capture-only, truncated, far-out timestamps, duplicated events).")] = False,
        critical_path: Annotated[bool, Field(description="Instead: the critical path's shares by bound (metric 'critical_path', key the bound, before/after 0-1): where the path shifted, e.g. from GPU compute to CPU. Computes the paths of every run's first steps: slower.")] = False,
        top: Annotated[int, Field(ge=0, description="The first N changes, largest groups and contributors first (0: all).")] = 0,
    ) -> RowsResult:
        """Where each metric changed over its whole history: change points, grouped into alerts.

        Series: step time, GPU idle fraction, each kernel category, kernel key and top-level
        module (ms per step), per workload, device and rank. One row per change: metric, key,
        name, run_id and day where it started, commit, before/after (ms per step; idle: a
        fraction; memory: bytes; op: TFLOP/s; critical_path: the share 0-1), unit, change_pct,
        p_value, noise_pct, runs_before/runs_after, group (changes starting together),
        workload, rank. Next:
        `diff` between a run before and the run where it started, then `kernels`.
        """
        from tracewh.history import parse_threshold

        def work(wh: Warehouse) -> CallToolResult:
            mc = 0.0 if min_change.strip() in ("0", "0%") else parse_threshold(min_change)
            result = results.changes(
                wh, run=run, top=top, since=since, kernel=kernel, category=category,
                module=module, op=op, where=where, alpha=alpha, min_change=mc, min_ms=min_ms,
                include_unusable=include_unusable, critical_path=critical_path,
            )  # fmt: skip
            note = results.changes_runs_note(wh, op, since=since, where=where, run=result.run) if op else None
            return rows_result(result.rows, note=note)

        return await calls.run(work)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def check(
        run: Run = "latest",
        baseline: Annotated[int | None, Field(ge=1, description="Baseline: at most the N last runs of the segment before the change (default: all of it).")] = None,
        threshold: _Pct = "10%",
        min_ms: Annotated[float, Field(ge=0, description="Check kernels, categories and modules of at least this many ms per step.")] = 0.1,
        k_mad: Annotated[float, Field(ge=0, description="A change must also exceed K x the noise the change-point test measured.")] = 3.0,
        min_runs: Annotated[int, Field(ge=1, description="Fewest comparable earlier runs to check at all.")] = 3,
        alpha: Annotated[float, Field(gt=0, lt=1, description="Significance of a change point.")] = 0.01,
        key: Annotated[list[str] | None, Field(description="Labels that name a workload (default ['model', 'branch']).")] = None,
        include_unusable: Annotated[bool, Field(description="Keep runs flagged unusable for comparison in the baselines.")] = False,
        op: Annotated[str | None, Field(description="Also check the achieved TFLOP/s of the CPU operators matching this pattern.")] = None,
        critical_path: Annotated[bool, Field(description="Also check the critical path's shares by bound (a rising share of anything but GPU compute is a regression). Computes the paths of the compared runs' first steps: slower.")] = False,
    ) -> Annotated[CallToolResult, Check]:
        """Did this run (default: the latest, with the other ranks of its job) regress against its history? Start here.

        status 'regression' lists the metrics that got worse (slower step, kernel, category
        or module time per step, more memory, fewer TFLOP/s) with the baseline, the change
        in %, the run where the change began (since_run_id, since_day, since_commit) and a
        p-value; improvements and ops that appeared or vanished are listed too.
        'insufficient_baseline': too few comparable earlier runs. Next: `changes` for the
        whole history, `diff` between since_run_id's predecessor and the run.
        """
        from tracewh.history import parse_threshold

        def work(wh: Warehouse) -> CallToolResult:
            report = wh.check(
                run, baseline=baseline, threshold=parse_threshold(threshold), min_ms=min_ms,
                k_mad=k_mad, min_runs=min_runs, alpha=alpha,
                keys=tuple(key) if key else ("model", "branch"), include_unusable=include_unusable,
                op=op, critical_path=critical_path,
            )  # fmt: skip
            note = results.check_runs_note(wh, report) if op is not None else None
            return document_result(results.check_document(report), note=note)

        return await calls.run(work)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def ranks(
        run: Annotated[str | None, Field(description="Compare the ranks of this run's job instance (default: the latest run): a selector.")] = None,
        job: Annotated[str | None, Field(description="A job name (runs.job) instead of run: its latest instance.")] = None,
        view: Annotated[Literal["imbalance", "kernels", "stragglers"], Field(description="imbalance (per kernel across ranks), kernels (per rank), stragglers (per step: ranks above their peers' median by > 3 x 1.4826 x MAD and 2%).")] = RanksOptions.view,  # type: ignore[assignment]
        top: Top = RanksOptions.top or 0,
    ) -> RowsResult:
        """The same kernels across the ranks of one distributed job instance: load imbalance and stragglers.

        The instance is the distinct ranks of one workload in the job. Next: `kernels` on
        the slow rank (run='<job selector>,rank=N').
        """

        def work(wh: Warehouse) -> CallToolResult:
            result = results.ranks(wh, run=run, job=job, view=view)
            return rows_result(results.json_rows(result.frame, top=top), total=result.frame.height)

        return await calls.run(work)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def collectives(
        runs: Annotated[list[str] | None, Field(description="One run (a selector): its job instance; or several runs: exactly those ranks. Default: the latest run's job instance.")] = None,
        by: Annotated[Literal["collective", "rank"], Field(description="One row per matched collective, or per rank (collectives, times late, its own wait).")] = CollectivesOptions.by,  # type: ignore[assignment]
        link: Annotated[str | None, Field(description="The link the collectives ran over (a link_peaks name: nvlink4, xgmi-mi300x, pcie5, ib-ndr, ...) instead of the device's.")] = CollectivesOptions.link,
        link_peak_gbps: Annotated[float | None, Field(gt=0, description="The link's peak bandwidth per direction in GB/s instead of the table's.")] = CollectivesOptions.link_peak_gbps,
        top: Top = CollectivesOptions.top or 0,
    ) -> RowsResult:
        """Collectives (NCCL/RCCL) matched across the ranks of a job by (process group, sequence), largest wait first: who arrives late, how fast the transfer ran.

        Per collective: skew_ns (last start - first start), last_rank, comm_ns (the transfer
        once all had arrived), algbw_gbps and busbw_gbps (GB/s, nccl-tests factors),
        pct_of_link_peak, wait_ns (time the others waited). by='rank': how often each rank
        arrived last and how long it waited. Next: `ranks` view='stragglers', `kernels` on
        the late rank.
        """

        def work(wh: Warehouse) -> CallToolResult:
            df = wh.collectives(runs or [], by=by, link=link, link_peak_gbps=link_peak_gbps)
            return rows_result(results.json_rows(df, top=top), total=df.height)

        return await calls.run(work)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def critical_path(
        run: Run = "latest",
        step: Annotated[int | None, Field(description="Only step N (ProfilerStep#N): CPU events starting in it, GPU ops launched in it. Default: the whole run.")] = None,
        by: Annotated[Literal["bound", "step", "edge", "run"], Field(description="bound: one object, the path's length, time by bound and its edges; step: one row per step (each step's own path, ns by bound); edge: the path's edges, longest first; run: one row per run matching `where`, oldest first (shares by bound, %, of each run's step_index-th step).")] = "bound",
        where: Where = None,
        step_index: Annotated[int, Field(ge=0, description="by='run': each run's K-th step (0: the first; a run without steps: the whole run).")] = 0,
        data_loading: Annotated[list[str] | None, Field(description="Regular expressions: CPU events whose name matches count as data_loading.")] = None,
        top: Annotated[int, Field(ge=0, description="by step, edge or run: the N first rows (0: all).")] = 20,
    ) -> Annotated[CallToolResult, CriticalPathResult]:
        """The critical path of one run or step (HTA's event graph): its length and what bounds it, in ns.

        by='bound' returns run_id, rank, step, window_ns, total_ns, by_bound (ns per bound,
        summing to total_ns) and edges (kind, bound, name, ts_ns, dur_ns in path order); on
        a rank of a multi-rank job also cross_rank (whom its collectives on the path waited
        for). A large gpu_communication_bound share: call `collectives`; cpu_bound or
        launch overhead: `launches`, `ops`. by='run' shows a shift of the path over runs;
        `changes` with critical_path=true finds where it shifted.
        """

        def work(wh: Warehouse) -> CallToolResult:
            patterns = tuple(data_loading or ())
            if by == "run":
                df = wh.critical_path_history(where=where, step_index=step_index, data_loading=patterns)
                return rows_result(results.json_rows(df, top=top), total=df.height)
            ref = wh.resolve_run(run)
            if by == "step":
                df = wh.critical_path_steps(ref, data_loading=patterns)
                return rows_result(results.json_rows(df, top=top), total=df.height)
            path = wh.critical_path(ref, step=step, data_loading=patterns)
            if by == "edge":
                df = results.critical_path_edges(path)
                return rows_result(results.json_rows(df, top=top), total=df.height)
            return document_result(results.critical_path_document(ref, path, step=step))

        return await calls.run(work)
