"""`tracewh collectives`: collectives matched across the ranks of a job (skew, bus bandwidth, waits)."""

from __future__ import annotations

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
    top_option,
    warehouse_option,
)
from tracewh.cli.output import show
from tracewh.query.options import COLLECTIVE_VIEWS, CollectivesOptions

#: Columns of the terminal table (CSV, JSON and --out carry every column).
TABLE_COLUMNS = {
    "collective": (
        "pg", "seq", "collective", "msg_bytes", "n_ranks", "step", "skew_ns", "last_rank",
        "comm_ns", "algbw_gbps", "busbw_gbps", "pct_of_link_peak", "wait_ns",
    ),
    "rank": ("rank", "collectives", "late", "late_share", "wait_ns", "caused_wait_ns", "kernel_ns"),
}


@app.command()
def collectives(
    runs: list[str] | None = typer.Argument(None, metavar="[RUN]...", help="One run (a run_id prefix, KEY=VALUE, latest): its job instance; or several runs: exactly those ranks. Default: the latest run's job instance.", show_default=False),
    warehouse: str = warehouse_option(),
    by: str = typer.Option(CollectivesOptions.by, "--by", metavar="|".join(COLLECTIVE_VIEWS), help="One row per matched collective, or per rank (collectives, times late, its own wait)."),
    link: str | None = typer.Option(CollectivesOptions.link, "--link", metavar="NAME", help="The link the collectives ran over (a link_peaks name: nvlink4, xgmi-mi300x, pcie5, ib-ndr, ...) instead of the device's."),
    link_peak_gbps: float | None = typer.Option(CollectivesOptions.link_peak_gbps, "--link-peak-gbps", metavar="GBPS", help="The link's peak bandwidth per direction in GB/s instead of the table's."),
    top: int | None = top_option(CollectivesOptions.top),
    fmt: str = format_option(),
    out: Path | None = out_option(),
) -> None:
    """Collectives matched across the ranks of a job by (process group, sequence), largest wait first.

    Per collective: skew (last start - first start), the rank that arrived last, the transfer
    once all had arrived (comm), algorithm and bus bandwidth (nccl-tests factors) and % of
    the link's peak, and the time the others waited. --by rank: how often each rank arrived
    last and how long it waited.

    Example: tracewh collectives --by rank
    """
    with handle_errors():
        check_format(fmt)
        check_top(top)
        wh = open_warehouse(warehouse)
        ids = wh.job_runs(runs or [])
        df = wh.collectives(ids, by=by, link=link, link_peak_gbps=link_peak_gbps)
        shown = df.select([c for c in TABLE_COLUMNS[by] if c in df.columns]) if fmt in ("table", "markdown") else df
        notes = [f"{len(ids)} rank(s) of one job instance; by wait, largest first"]
        if by == "collective" and df.height and df["link"].null_count() == df.height and link_peak_gbps is None:
            notes.append("link peak unknown for this device (give --link NAME or --link-peak-gbps N)")
        empty = "no communication kernels in these runs" if df.is_empty() else None
        show(shown, fmt, title=f"collectives by {by}", top=top, out=out, notes=notes, empty=empty)
