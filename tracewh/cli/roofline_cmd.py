"""`tracewh roofline`: achieved TFLOP/s and TB/s per operator against the device's roof."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tracewh.cli.common import (
    app,
    check_format,
    check_top,
    format_option,
    graph_notes,
    handle_errors,
    open_warehouse,
    out_option,
    run_option,
    selector,
    top_option,
    warehouse_option,
)
from tracewh.cli.output import show, write_out
from tracewh.query.options import RooflineOptions

if TYPE_CHECKING:  # the roofline module (Polars) loads when the command runs
    import polars as pl

    from tracewh.analysis.roofline import PeakTflops

_OUT_HELP = "Also write the rows shown to PATH (.csv, .json or .parquet), every column."
_PEAK_HELP = (
    "Compute roof in TFLOP/s instead of the device table's: one number for every row, or "
    "ROOF=N pairs (roofs: vector, fp32, tf32, fp16, bf16, fp8, int8), e.g. bf16=989,vector=67."
)

#: Columns shown in the terminal table (CSV, JSON and --out carry every column).
TABLE_COLUMNS = (
    "op_name", "input_dims", "dtype", "calls", "flops", "bytes", "gpu_ns", "tflops_per_s",
    "tb_per_s", "intensity", "pct_of_peak", "bound", "non_contiguous", "note",
)


def _title(df: pl.DataFrame) -> str:
    devices = [d for d in df["device"].unique().to_list() if d] if "device" in df.columns else []
    device = devices[0] if devices else "unknown device (no peaks: rates only)"
    return f"roofline on {device}"


@app.command()
def roofline(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option(),
    op: str | None = typer.Option(RooflineOptions.op, "--op", metavar="PATTERN", help="Operator name pattern (case-insensitive; glob with * ? [, else substring)."),
    top: int | None = top_option(RooflineOptions.top, "Show the N operators with the most GPU time (0: all)."),
    peak_tflops: str | None = typer.Option(RooflineOptions.peak_tflops, "--peak-tflops", metavar="N|ROOF=N,...", help=_PEAK_HELP),
    peak_tbs: float | None = typer.Option(RooflineOptions.peak_tbs, "--peak-tbs", metavar="TBS", help="Memory roof in TB/s instead of the device table's HBM bandwidth."),
    fmt: str = format_option(),
    out: Path | None = out_option(_OUT_HELP),
) -> None:
    """FLOPs and bytes per call of each CPU operator, achieved TFLOP/s and TB/s, % of the roof.

    One row per operator name, Input Dims and dtype (and params: e.g. causal or not), by GPU
    time. Operators whose work cannot be computed are listed with the reason in `note`.

    Example: tracewh roofline --op addmm --top 10 --peak-tflops bf16=989
    """
    with handle_errors():
        check_format(fmt)
        check_top(top)
        from tracewh.analysis.roofline import parse_peak_tflops

        peaks: PeakTflops | None = parse_peak_tflops(peak_tflops) if peak_tflops is not None else None
        wh = open_warehouse(warehouse)
        ref = wh.resolve_run(selector(run))
        df = wh.roofline(ref.run_id, op=op, peak_tflops=peaks, peak_tbs=peak_tbs)
        title = _title(df)
        shown = df.head(top) if top else df
        if out is not None:
            write_out(shown, out)
        above = int(shown["above_peak"].sum()) if "above_peak" in shown.columns else 0
        if fmt in ("table", "markdown"):
            from tracewh.analysis.roofline import flag_above_peak

            shown = flag_above_peak(shown.select([c for c in TABLE_COLUMNS if c in shown.columns]))
        empty = (f"no CPU operator matches {op!r} in run {ref.short_id}" if op
                 else f"no CPU operator with GPU time in run {ref.short_id}")
        rows = df.height
        notes = [f"showing {shown.height} of {rows} operators (--top N to change, --top 0: all)"] if shown.height < rows else []
        if above:
            notes.append(f"{above} row(s) above 100% of peak (flagged '! above peak'): no device "
                         "achieves that; the note column gives the likely cause")
        notes += graph_notes(wh, ref)
        show(shown, fmt, title=title, run=ref, notes=notes, empty=empty)
