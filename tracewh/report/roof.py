"""The roofline chart and its report section: operators by arithmetic intensity and TFLOP/s.

Input is the frame of ``Warehouse.roofline`` (``roofline`` of ``sql/78_roofline.sql``): one
row per operator shape with ``intensity`` (FLOP/byte), ``tflops_per_s``, ``gpu_ns``,
``roof``, ``peak_tflops`` and ``peak_tbs``. The chart draws each modelled operator with
FLOPs (copies have none: no point on a log axis) and, for every roof its rows use, the
device's roof: min(peak_tflops, peak_tbs x intensity).
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from tracewh.report import vlspec as alt
from tracewh.report.charts import (
    MIDDLE_LABEL,
    WIDTH,
    AnyChart,
    Chart,
    chart_title,
    values,
)
from tracewh.report.tables import Column, Section, table

#: Operator rows drawn at most (largest GPU time first).
MAX_POINTS = 200


def _roof_lines(rows: pl.DataFrame, lo: float, hi: float) -> pl.DataFrame:
    """Points of each roof: intensity from lo to hi (log-spaced) and the roof at each one."""
    roofs = (
        rows.filter(pl.col("peak_tflops").is_not_null() & pl.col("peak_tbs").is_not_null())
        .group_by("roof")
        .agg(pl.col("peak_tflops").first(), pl.col("peak_tbs").first())
        .sort("roof")
    )
    out: list[dict[str, Any]] = []
    steps = 48
    for r in roofs.iter_rows(named=True):
        ridge = r["peak_tflops"] / r["peak_tbs"]
        xs = {lo * (hi / lo) ** (i / steps) for i in range(steps + 1)}
        if lo < ridge < hi:
            xs.add(ridge)  # the knee
        for x in sorted(xs):
            out.append({"roof": f"{r['roof']} roof", "intensity": x,
                        "tflops_per_s": min(r["peak_tflops"], r["peak_tbs"] * x)})
    return pl.DataFrame(out, schema={"roof": pl.String, "intensity": pl.Float64,
                                     "tflops_per_s": pl.Float64})


def roofline_chart(rows: pl.DataFrame, *, device: str | None = None) -> AnyChart | None:
    """Log-log scatter of operators (intensity vs achieved TFLOP/s) under the device's roofs."""
    need = {"intensity", "tflops_per_s", "gpu_ns", "op_name"}
    if rows.is_empty() or not need <= set(rows.columns):
        return None
    pts = (
        rows.filter((pl.col("intensity") > 0) & (pl.col("tflops_per_s") > 0) & (pl.col("gpu_ns") > 0))
        .sort("gpu_ns", descending=True)
        .head(MAX_POINTS)
        .select(
            "op_name", pl.col("params").fill_null(""), pl.col("family").fill_null("other"),
            "intensity", "tflops_per_s", (pl.col("gpu_ns") / 1e6).alias("gpu_ms"),
            pl.col("pct_of_peak").round(1), pl.col("bound").fill_null("unknown"),
        )
    )
    if pts.is_empty():
        return None
    lo = min(float(pts["intensity"].min()), 1.0) / 2  # type: ignore[arg-type]
    hi = max(float(pts["intensity"].max()), 1000.0) * 2  # type: ignore[arg-type]
    lines = _roof_lines(rows, lo, hi)
    x = alt.X("intensity:Q", title="arithmetic intensity (FLOP/byte)",
              scale=alt.Scale(type="log", domain=[lo, hi]))
    y = alt.Y("tflops_per_s:Q", title="achieved TFLOP/s", scale=alt.Scale(type="log"))
    dots = (
        Chart(values(pts))
        .mark_circle(opacity=0.75)
        .encode(
            x=x, y=y,
            size=alt.Size("gpu_ms:Q", title="GPU time (ms)", scale=alt.Scale(range=[20, 600])),
            color=alt.Color("family:N", title="family", legend=alt.Legend(labelExpr=MIDDLE_LABEL)),
            tooltip=[
                alt.Tooltip("op_name:N", title="operator"), alt.Tooltip("params:N"),
                alt.Tooltip("intensity:Q", format=",.2f"),
                alt.Tooltip("tflops_per_s:Q", title="TFLOP/s", format=",.2f"),
                alt.Tooltip("gpu_ms:Q", title="GPU time (ms)", format=",.3f"),
                alt.Tooltip("pct_of_peak:Q", title="% of peak"), alt.Tooltip("bound:N"),
            ],
        )
    )
    layers: list[Any] = [dots]
    if not lines.is_empty():
        ends = lines.group_by("roof", maintain_order=True).agg(pl.col("intensity").max(), pl.col("tflops_per_s").max())
        ends = ends.with_columns((pl.col("roof") + " " + pl.col("tflops_per_s").round(1).cast(pl.String)).alias("label"))
        layers.append(Chart(values(ends)).mark_text(align="right", dy=-7, fontSize=11, color="#333")
                      .encode(x=x, y=y, text="label:N"))
        layers.insert(0, Chart(values(lines)).mark_line(color="#555", strokeDash=[4, 3]).encode(
            x=x, y=y, detail="roof:N",
            tooltip=[alt.Tooltip("roof:N"), alt.Tooltip("tflops_per_s:Q", title="roof TFLOP/s",
                                                          format=",.1f")]))
    sub = (f"{device}: dashed lines are the roofs min(peak TFLOP/s, HBM TB/s × intensity)"
           if not lines.is_empty() else "unknown device: no roof (give --peak-tflops/--peak-tbs)")
    return alt.layer(*layers).properties(
        title=chart_title(f"Roofline: {pts.height} operator shapes", sub), width=WIDTH - 120, height=380)


def roofline_section(rows: pl.DataFrame | None, *, prefix: str = "", graph_note: str = "") -> Any:
    """The report section: the chart and the operators with the most GPU time.

    ``graph_note``: how the run's graph replays map to their captures (match quality,
    :func:`tracewh.query.graphalign.match_note`); said beside the operators, whose GPU time
    comes through the capture for replayed ops (as ``tracewh roofline`` says it).
    """
    key = f"{prefix}roofline"
    if rows is None:
        return Section(key, "Roofline", None, "no roofline data (the warehouse has no roofline)")
    devices = [d for d in rows["device"].unique().to_list() if d] if "device" in rows.columns else []
    device = devices[0] if devices else None
    ops = rows.filter(pl.col("op_name").is_not_null()) if "op_name" in rows.columns else rows
    modelled = ops.filter(pl.col("flops").is_not_null()) if "flops" in ops.columns else ops
    total = float(ops["gpu_ns"].sum()) if "gpu_ns" in ops.columns and ops.height else 0.0
    share = float(modelled["gpu_ns"].sum()) / total if total else math.nan
    text = (f"Operators with computable work cover {100 * share:.1f} % of the GPU time of the "
            "operators; the others are listed with the reason." if total else "")
    above = int(rows["above_peak"].sum()) if "above_peak" in rows.columns else 0
    if above:
        text += (f" {above} row(s) above 100 % of peak are flagged (no device achieves that); "
                 "their note gives the likely cause.")
    if graph_note:
        text = f"{text} {graph_note[:1].upper()}{graph_note[1:]}.".strip()
    from tracewh.analysis.roofline import flag_above_peak

    return Section(
        key, "Roofline", roofline_chart(rows, device=device),
        "no operator with computable FLOPs and GPU time (record_shapes off, or no GPU ops)",
        text=text,
        tables=[table("Operators by GPU time", flag_above_peak(rows), [
            Column("op_name", "operator"), Column("params", "shape"), Column("dtype", "dtype"),
            Column("calls", "calls"), Column("gpu_ns", "GPU time", "ms"),
            Column("tflops_per_s", "TFLOP/s"), Column("tb_per_s", "TB/s"),
            Column("intensity", "FLOP/byte"), Column("pct_of_peak", "of peak (%)"),
            Column("bound", "bound"), Column("non_contiguous", "non-contiguous"),
            Column("note", "note"),
        ], limit=20)],
    )
