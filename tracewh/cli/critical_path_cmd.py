"""`tracewh critical-path`: the critical path of a run or a step, by what bounds it (HTA's graph)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from tracewh.cli.common import (
    app,
    check_format,
    check_top,
    format_option,
    handle_errors,
    open_warehouse,
    out_option,
    parse_pairs,
    run_option,
    selector,
    top_option,
    warehouse_option,
    where_option,
)
from tracewh.cli.output import note, show


@app.command("critical-path")
def critical_path(
    run: str | None = typer.Argument(None, metavar="[RUN]", help="The run: a run_id prefix, KEY=VALUE, latest (default).", show_default=False),
    run_opt: list[str] | None = run_option("The run, as --run SEL (the same as RUN; terms combine)."),
    warehouse: str = warehouse_option(),
    step: int | None = typer.Option(None, "--step", metavar="N", help="Only step N (ProfilerStep#N): CPU events starting in it, GPU ops launched in it. Default: the whole run."),
    by: str = typer.Option("bound", "--by", metavar="bound|step|edge|run", help="bound: time by what bounds the path; step: one row per step (every step's own path); edge: the path's edges, longest first; run: one row per run matching --where, oldest first (a series of one step's shares)."),
    where: list[str] | None = where_option("With --by run: KEY=VALUE on a label or run field (repeatable; all must match)."),
    step_index: int = typer.Option(0, "--step-index", metavar="K", help="With --by run: each run's K-th step (0: the first; a run without steps: the whole run)."),
    data_loading: list[str] | None = typer.Option(None, "--data-loading", metavar="REGEX", help="CPU events whose name matches count as data_loading (repeatable)."),
    top: int | None = top_option(20),
    fmt: str = format_option(),
    out: Path | None = out_option(),
) -> None:
    """The critical path of a run (HTA's event graph): its length and what bounds it.

    --format json prints one object: run_id, rank, step, total_ns, by_bound (cpu_bound,
    data_loading, gpu_compute_bound, gpu_communication_bound, gpu_kernel_kernel_overhead,
    gpu_kernel_launch_overhead, dependency; ns) and edges (kind, bound, name, ts_ns, dur_ns in
    path order). --by step: one row per step with its path's time by bound.

    Example: tracewh critical-path --step 3 --format json
    """
    with handle_errors():
        check_format(fmt)
        check_top(top)
        if by not in ("bound", "step", "edge", "run"):
            from tracewh.core.errors import UsageError

            raise UsageError(f"--by must be bound, step, edge or run, not {by!r}")
        wh = open_warehouse(warehouse)
        if by == "run":
            df = wh.critical_path_history(where=parse_pairs(where), step_index=step_index,
                                          data_loading=tuple(data_loading or ()))
            show(df, fmt, title="critical path per run (shares by bound, %)", top=top, out=out,
                 absolute=True, empty="no run matches --where")
            return
        ref = wh.resolve_run(selector(run, run_opt))
        patterns = tuple(data_loading or ())
        if by == "step":
            df = wh.critical_path_steps(ref, data_loading=patterns)
            show(df, fmt, title="critical path per step", run=ref, top=top, out=out,
                 empty=f"run {ref.short_id} has no steps (ProfilerStep#N)")
            return
        path = wh.critical_path(ref, step=step, data_loading=patterns)
        import polars as pl

        if fmt == "json" and by == "bound":
            from tracewh.results import critical_path_document

            obj = critical_path_document(ref, path, step=step)
            text = json.dumps(obj)
            if out is not None:
                from tracewh.core.atomic import atomic_file

                with atomic_file(out) as tmp:
                    Path(tmp).write_text(text, encoding="utf-8")
            typer.echo(text)
            note(f"critical path: {path.total_ns / 1e6:.3f} ms, {path.edges.height} edges")
            return
        if by == "edge":
            from tracewh.results import critical_path_edges

            df = critical_path_edges(path)
        else:
            total = path.total_ns or 1
            df = pl.DataFrame({
                "bound": list(path.by_bound), "time_ns": list(path.by_bound.values()),
                "share_pct": [100.0 * v / total for v in path.by_bound.values()],
            }).sort("time_ns", descending=True)
        window = f"step {step}" if step is not None else "the whole run"
        show(df, fmt, title=f"critical path of {window}", run=ref, top=top, out=out,
             notes=[f"length {path.total_ns / 1e6:.3f} ms over {path.edges.height} edges "
                    f"(graph: {path.nodes} nodes, {path.graph_edges} edges)"],
             empty="no CPU operators or GPU ops in this window")
