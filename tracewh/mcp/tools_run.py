"""The tools of one run: runs, kernels, gaps, launches, queue, steps, ops, modules, memory, roofline.

Each is the command of the same name with ``--format json``: the same library call
(:mod:`tracewh.query.macros` and :meth:`~tracewh.api.Warehouse.macro_relation`, or the facade's
method), the same options and defaults (:mod:`tracewh.query.options`; a default ``top`` of ``None``,
all rows, is the tools' 0), ``top`` applied the same way; the rows come back as
``{"result": [row, ...]}`` (the CLI's JSON list under ``result``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from tracewh.api import Warehouse
from tracewh.mcp.calls import Calls, rows_result
from tracewh.mcp.params import READ_ONLY, Run, ThresholdUs, Top, Where
from tracewh.query import macros
from tracewh.query.graphalign import match_note
from tracewh.query.options import (
    KERNEL_WAIT_THRESHOLD_US,
    GapsOptions,
    KernelsOptions,
    LaunchesOptions,
    MemoryOptions,
    ModulesOptions,
    OpsOptions,
    RooflineOptions,
    StepsOptions,
    threshold_ns,
)
from tracewh.results import json_rows

if TYPE_CHECKING:
    import polars as pl

__all__ = ["Rows", "RowsResult", "register"]


class Rows(BaseModel):
    """A result frame: one JSON object per row, keyed by column name (``--format json``)."""

    result: list[dict[str, Any]] = Field(description="The rows, exact values as stored; units in the column names (*_ns: nanoseconds, bytes, *_gbps).")


RowsResult = Annotated[CallToolResult, Rows]


def _graph_note(wh: Warehouse, ref: Any) -> str | None:
    """How the run's graph replays map to their capture (match quality), as the CLI says it
    beside operators, modules and the roofline; None without graph replays."""
    return match_note(wh.graph_match(ref))


async def _macro(
    calls: Calls, call: macros.MacroCall, run: str, top: int | None, *, graph: bool = False
) -> CallToolResult:
    """A per-run macro's rows (``Warehouse.macro_relation``, as the CLI's commands call it);
    ``graph``: the rows are attributed through graph captures (a note gives the match quality)."""

    def work(wh: Warehouse) -> CallToolResult:
        ref, df = wh.macro_relation(call.name, run, **call.params).fetch("polars")
        frame = cast("pl.DataFrame", df)
        note = _graph_note(wh, ref) if graph else None
        return rows_result(json_rows(frame, top=top), total=frame.height, note=note)

    return await calls.run(work)


def register(server: FastMCP[Any], calls: Calls) -> None:
    """Add the per-run tools to ``server``."""

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def runs(where: Where = None, top: Top = 0) -> RowsResult:
        """List the runs (one row per ingested trace), latest ingest first: the first row is what run='latest' selects.

        Columns include run_id, file_name, day, start_ns (ns since the epoch), rank,
        world_size, device_name, backend, kind, n_steps, n_gpu_ops, workload, unusable (why a
        run is left out of comparisons), labels_json, job. Call this first to find run ids,
        labels and days; then pass a run_id prefix or KEY=VALUE terms as `run` to the other
        tools.
        """

        def work(wh: Warehouse) -> CallToolResult:
            df = wh.runs(where=where)
            return rows_result(json_rows(df, top=top), total=df.height)

        return await calls.run(work)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def kernels(
        run: Run = "latest",
        cat: Annotated[list[str] | None, Field(description="Trace categories to keep (exact, case-sensitive), e.g. ['kernel', 'gpu_memcpy']; default: every GPU op.")] = None,
        group_by: Annotated[Literal["name", "short_name", "category"], Field(description="Group GPU ops by full name, short name, or kernel category (gemm, attention, communication, ...).")] = KernelsOptions.group_by,  # type: ignore[assignment]
        by: Annotated[Literal["total", "mean", "max", "calls"], Field(description="Rank by total, mean or max time, or by calls.")] = KernelsOptions.by,  # type: ignore[assignment]
        top: Top = KernelsOptions.top or 0,
    ) -> RowsResult:
        """Rank the GPU kernels (and copies/memsets) of one run by time: where the GPU time goes.

        One row per group: name, calls, total_ns, mean_ns, min_ns, median_ns, p95_ns, max_ns,
        std_ns (nanoseconds), pct (share of the GPU time listed, %). Next: `ops` for the CPU
        operators that launched them, `history` (kernel=...) for a kernel over time, `diff`
        to compare with another run.
        """
        call = macros.kernels(cats=cat, group_by=group_by, by=by)
        return await _macro(calls, call, run, top)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def gaps(
        run: Run = "latest",
        largest: Annotated[int | None, Field(ge=1, description="Instead: the N largest gaps, each with the ops on either side.")] = None,
        breakdown: Annotated[bool, Field(description="Instead: idle time by kind per stream and per device (level 'stream' or 'device').")] = False,
        threshold_us: ThresholdUs = KERNEL_WAIT_THRESHOLD_US,
        top: Top = GapsOptions.top or 0,
    ) -> RowsResult:
        """GPU idle gaps of one run per (device, stream), split by cause: is the GPU starved, and why?

        Default: one row per stream with ops, busy_ns, window_ns, gap_ns, idle_fraction (0-1),
        p50/p95/max_gap_ns, and gap_ns split into host_wait_ns (the CPU launched the next op
        only after the gap began: CPU-bound), kernel_wait_ns (short gaps: launch overhead)
        and other_wait_ns (syncs, events, communication). Next: `steps` for the split per
        step, `launches` for launch latency, `queue` for the launch queue depth.
        """
        ns = threshold_ns(threshold_us)
        if largest is not None:
            call = macros.largest_gaps(n=largest, threshold_ns=ns)
        elif breakdown:
            call = macros.idle_breakdown(threshold_ns=ns)
        else:
            call = macros.gaps(threshold_ns=ns)
        return await _macro(calls, call, run, top)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def launches(
        run: Run = "latest",
        by: Annotated[Literal["kernel", "step", "op", "linkage", "graph"], Field(description="kernel (per kernel name), step, op (one row per launch), linkage (how ops were linked to launch calls) or graph (one row per CUDA/HIP graph launch).")] = LaunchesOptions.by,  # type: ignore[assignment]
        top: Top = LaunchesOptions.top or 0,
    ) -> RowsResult:
        """Launch latency of one run: runtime-call time and queueing from the launch call to the GPU start (ns).

        A CUDA/HIP graph launch is one launch, measured to its first replayed kernel. Next:
        `queue` for how many ops were outstanding, `gaps` for the idle time it causes.
        """
        return await _macro(calls, macros.launches(by=by), run, top)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def queue(run: Run = "latest", top: Top = 0) -> RowsResult:
        """Launch-queue depth per stream of one run: time-weighted mean and max outstanding GPU ops, time (ns) at >= 1024 outstanding.

        A deep queue means the CPU runs ahead (GPU-bound); a queue near 0 with host waits in
        `gaps` means the CPU is the bottleneck.
        """
        return await _macro(calls, macros.queue_depth(), run, top)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def steps(
        run: Run = "latest", threshold_us: ThresholdUs = KERNEL_WAIT_THRESHOLD_US,
        top: Top = StepsOptions.top or 0,
    ) -> RowsResult:
        """Per training/inference step (ProfilerStep#N) of one run: wall time, GPU busy, GPU idle split by cause, top kernel, bound.

        One row per (step, device): start_ns, wall_ns, gpu_busy_ns, gpu_idle_ns = lead_ns +
        host_wait_ns + kernel_wait_ns + other_wait_ns + trail_ns, gpu_tail_ns (GPU work past
        the step's CPU end), ops, top_kernel, top_kernel_ns, bound ('cpu' or 'gpu'). A step
        owns the GPU ops it launched. Next: `kernels` for the heaviest kernels, `gaps` for
        the idle time per stream.
        """
        call = macros.steps(threshold_ns=threshold_ns(threshold_us))
        return await _macro(calls, call, run, top)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def ops(
        run: Run = "latest",
        cpu: Annotated[bool, Field(description="CPU-side operator time (self and total, ns) instead of GPU time.")] = OpsOptions.cpu,
        top: Top = OpsOptions.top or 0,
    ) -> RowsResult:
        """GPU time per CPU operator (aten op) and input shapes of one run: which framework op launched the expensive kernels.

        A kernel is attributed to the innermost CPU operator enclosing its launch (a graph
        replay's kernel: through its capture; a note gives the match quality). Next:
        `roofline` for the achieved TFLOP/s of these operators, `modules` for time per
        nn.Module.
        """
        return await _macro(calls, macros.ops(cpu=cpu), run, top, graph=not cpu)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def modules(
        run: Run = "latest",
        depth: Annotated[int | None, Field(ge=1, description="Cut module paths after N names (default: full paths).")] = ModulesOptions.depth,
        top: Annotated[int, Field(ge=0, description="The N heaviest nodes of the tree, with their ancestors (0: all).")] = ModulesOptions.top or 0,
    ) -> RowsResult:
        """GPU time per nn.Module of one run, as a tree (depth first, heaviest child first).

        One row per node: module_path, name, depth, calls, kernels, gpu_ns (inclusive: the
        node and below), self_gpu_ns (kernels launched directly in it), pct. Needs traces
        recorded with with_stack/with_modules. Next: `ops` for the operators inside.
        """

        def work(wh: Warehouse) -> CallToolResult:
            ref = wh.resolve_run(run)
            return rows_result(json_rows(wh.modules(ref, depth=depth, top=top or None)),
                               note=_graph_note(wh, ref))

        return await calls.run(work)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def memory(
        run: Run = "latest",
        device: Annotated[str | None, Field(description="cpu, gpu, a device id (0, 1, ...; -1 the CPU) or a name such as cuda:0.")] = MemoryOptions.device,
        view: Annotated[Literal["summary", "peak", "modules", "allocations", "steps", "leaks", "timeline"], Field(description="summary (one row per device), peak (live set at the peak by module and CPU operator), modules, allocations (largest live at the peak), steps, leaks (per-step peak growth), timeline.")] = MemoryOptions.view,  # type: ignore[assignment]
        top: Annotated[int, Field(ge=0, description="peak, modules, allocations: the N largest per device (0: the default 20); other views: the N first rows (0: all).")] = MemoryOptions.top or 0,
        buckets: Annotated[int, Field(ge=1, description="Time buckets of view 'timeline'.")] = MemoryOptions.buckets,
    ) -> RowsResult:
        """Device memory of one run from profile_memory events: peak allocated/reserved (bytes) per device and who holds it.

        Next: view='peak' to see which modules and operators hold the peak, view='leaks' to
        check whether the per-step peak keeps rising.
        """
        def work(wh: Warehouse) -> CallToolResult:
            ref = wh.resolve_run(run)
            df = wh.memory(ref, view=view, device=device, top=top or None, buckets=buckets)
            return rows_result(json_rows(df))

        return await calls.run(work)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def roofline(
        run: Run = "latest",
        op: Annotated[str | None, Field(description="Operator name pattern (case-insensitive; glob with * ? [, else substring), e.g. 'addmm'.")] = RooflineOptions.op,
        top: Annotated[int, Field(ge=0, description="The N operators with the most GPU time (0: all).")] = RooflineOptions.top or 0,
        peak_tflops: Annotated[str | None, Field(description="Compute roof in TFLOP/s instead of the device table's: one number, or ROOF=N pairs (vector, fp32, tf32, fp16, bf16, fp8, int8), e.g. 'bf16=989,vector=67'.")] = RooflineOptions.peak_tflops,
        peak_tbs: Annotated[float | None, Field(gt=0, description="Memory roof in TB/s instead of the device table's HBM bandwidth.")] = RooflineOptions.peak_tbs,
    ) -> RowsResult:
        """FLOPs and bytes per call of each CPU operator of one run, achieved TFLOP/s and TB/s, % of the device's roof.

        One row per (operator, input dims, dtype, params) by GPU time: calls, flops, bytes,
        gpu_ns, tflops_per_s, tb_per_s, intensity (FLOP/byte), pct_of_peak, bound ('compute'
        or 'memory'); operators whose work cannot be computed carry the reason in `note`.
        Next: `history` with op=... for an operator's achieved rate over time.
        """
        from tracewh.analysis.roofline import parse_peak_tflops

        def work(wh: Warehouse) -> CallToolResult:
            peaks = parse_peak_tflops(peak_tflops) if peak_tflops is not None else None
            ref = wh.resolve_run(run)
            df = wh.roofline(ref.run_id, op=op, peak_tflops=peaks, peak_tbs=peak_tbs)
            return rows_result(json_rows(df, top=top), total=df.height, note=_graph_note(wh, ref))

        return await calls.run(work)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def breakdown(run: Run = "latest", top: Top = 0) -> RowsResult:
        """GPU time per device of one run: computation, communication (overlapped/exposed), memcpy, idle (ns)."""
        return await _macro(calls, macros.breakdown(), run, top)

    @server.tool(annotations=READ_ONLY, structured_output=True)
    async def memcpy(run: Run = "latest", top: Top = 0) -> RowsResult:
        """Memory copies per kind (HtoD, DtoH, DtoD, PtoP) of one run: count, bytes, time (ns), GB/s."""
        return await _macro(calls, macros.memcpy(), run, top)
