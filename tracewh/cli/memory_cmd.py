"""`tracewh memory`: device memory of a run (peak, who holds it, steps, leaks, timeline)."""

from __future__ import annotations

from pathlib import Path

import typer

from tracewh.analysis.memory import VIEWS
from tracewh.cli.common import (
    app,
    check_format,
    format_option,
    handle_errors,
    open_warehouse,
    out_option,
    run_option,
    selector,
    top_option,
    warehouse_option,
)
from tracewh.cli.output import show
from tracewh.query.options import MemoryOptions

_TITLES = {
    "summary": "memory per device",
    "peak": "who holds the peak (live allocations by module and CPU operator)",
    "modules": "who holds the peak (live allocations by module)",
    "allocations": "largest allocations live at the peak",
    "steps": "memory per step",
    "leaks": "per-step peak growth (leak check)",
    "timeline": "allocated and reserved over time",
}
_EMPTY = {
    "summary": "no [memory] events in this run (record with torch.profiler(profile_memory=True))",
    "steps": "no [memory] events or no ProfilerStep in this run",
    "leaks": "no [memory] events or fewer than 2 ProfilerSteps in this run",
}


@app.command()
def memory(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option(),
    device: str | None = typer.Option(MemoryOptions.device, "--device", "-d", metavar="DEVICE", help="cpu, gpu, a device id (0, 1, ...; -1 the CPU) or a name such as cuda:0."),
    view: str = typer.Option(MemoryOptions.view, "--view", metavar="|".join(VIEWS), help=f"{', '.join(VIEWS)}."),
    top: int | None = top_option(MemoryOptions.top, "peak, modules, allocations: the N largest per device (default 20); other views: the N first rows."),
    buckets: int = typer.Option(MemoryOptions.buckets, "--buckets", metavar="N", help="Time buckets of --view timeline."),
    fmt: str = format_option(),
    out: Path | None = out_option(),
) -> None:
    """Device memory from profile_memory events: peak allocated/reserved per device and who holds it.

    Views: summary (one row per device), peak (the live set at the peak by module and CPU
    operator, plus memory allocated before the trace), modules (the same by module),
    allocations (the largest allocations live at
    the peak), steps (per ProfilerStep), leaks (does the per-step peak rise steadily?),
    timeline (allocated and reserved over time).

    Example: tracewh memory --view peak --device gpu --top 10
    """
    with handle_errors():
        check_format(fmt)
        wh = open_warehouse(warehouse)
        ref = wh.resolve_run(selector(run))
        df = wh.memory(ref, view=view, device=device, top=top or None, buckets=buckets)
        empty = _EMPTY.get(view, _EMPTY["summary"])
        if device is not None:
            empty += f" (on devices {device!r})"
        show(df, fmt, title=_TITLES[view], run=ref, out=out, empty=empty)
