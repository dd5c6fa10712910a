"""The report's charts: frames in, Vega-Lite charts out (:mod:`tracewh.report.vlspec`).

Each builder takes the frame an analysis returned (durations in int64 ns, as
stored) and returns a chart, or ``None`` when there is nothing to draw
(the caller then says so in words). Builders only convert units for display
(ns -> ms or µs, stated in every axis title) and shape data for the marks; the
metrics themselves are defined once, in the SQL views.
"""

from __future__ import annotations

import math
from typing import Any, Final

import polars as pl

from tracewh.core.textsafe import escape_nested
from tracewh.report import vlspec as alt

#: Width of full-size charts, in CSS pixels.
WIDTH = 860  # readable at 1400 px; PNGs scale down (max-width 100%) in narrow windows
#: Room in pixels kept for the longest axis label (kernel names, trimmed to 44 characters).
LABEL_LIMIT = 260


def middle_trim(expr: str = "datum.label", keep: int = 44, head: int = 24) -> str:
    """A Vega expression: the text ``expr`` trimmed in the middle to at most ``keep`` characters.

    The cut is marked with "…" (kernel names differ at both ends); the tooltip carries the
    whole text. Labels are trimmed in their text, never by measuring them: a chart's spec
    sets no ``labelLimit`` (:data:`tracewh.report.render.LABELS_UNMEASURED`).
    """
    tail = keep - head - 1
    return (f"length({expr}) > {keep} ? slice({expr}, 0, {head}) + '…' + "
            f"slice({expr}, length({expr}) - {tail}) : {expr}")


#: Vega expression trimming an axis or legend label in the middle (:func:`middle_trim`).
MIDDLE_LABEL = middle_trim()

_CATEGORY_SCHEME: Final = "tableau10"

#: A chart (:mod:`tracewh.report.vlspec`: a unit chart, a layer, a vertical concatenation).
AnyChart = Any
#: A unit chart: ``Chart(values(df)).mark_bar().encode(x="total_ms:Q", ...)``.
Chart = alt.Chart


def values(df: pl.DataFrame) -> alt.Data:
    """Inline chart data (JSON-safe: dates and times as ISO text)."""
    temporal = [n for n, t in df.schema.items() if t.is_temporal()]
    if temporal:
        df = df.with_columns(pl.col(temporal).cast(pl.String))
    # names are data: a control character would make the SVG/PNG renderer panic (NonXmlChar)
    return alt.Data(values=escape_nested(df.to_dicts()))


def chart_title(text: str, subtitle: str | None = None) -> alt.TitleParams:
    return alt.TitleParams(text, subtitle=subtitle or "", anchor="start", fontSize=14)


def top_kernels(kernels: pl.DataFrame, *, top: int = 15) -> AnyChart | None:
    """Horizontal bars: GPU time per kernel (short name), largest first."""
    df = kernels.filter(pl.col("total_ns") > 0).head(top)
    if df.is_empty():
        return None
    df = df.select(
        pl.col("name").alias("kernel"),
        "calls",
        (pl.col("total_ns") / 1e6).alias("total_ms"),
        (pl.col("mean_ns") / 1e3).round(2).alias("mean_us"),
        pl.col("pct").round(1),
    )
    return (
        Chart(values(df))
        .mark_bar(color="#4c78a8")
        .encode(
            x=alt.X("total_ms:Q", title="GPU time (ms)"),
            y=alt.Y("kernel:N", sort="-x", title=None, axis=alt.Axis(labelExpr=MIDDLE_LABEL)),
            tooltip=[
                alt.Tooltip("kernel:N"),
                alt.Tooltip("calls:Q"),
                alt.Tooltip("total_ms:Q", title="total (ms)", format=",.3f"),
                alt.Tooltip("mean_us:Q", title="mean (µs)"),
                alt.Tooltip("pct:Q", title="share of GPU time (%)"),
            ],
        )
        .properties(title=chart_title(f"Top {df.height} kernels by GPU time"), width=WIDTH - LABEL_LIMIT)
    )


def categories(cats: pl.DataFrame) -> AnyChart | None:
    """Horizontal bars: GPU time per kernel category, with its share in %."""
    df = cats.filter(pl.col("total_ns") > 0)
    if df.is_empty():
        return None
    df = df.select(
        pl.col("name").fill_null("other").alias("category"),
        "calls",
        (pl.col("total_ns") / 1e6).alias("total_ms"),
        pl.col("pct").round(1),
    )
    base = Chart(values(df)).encode(
        y=alt.Y("category:N", sort="-x", title=None),
        x=alt.X("total_ms:Q", title="GPU time (ms)"),
    )
    bars = base.mark_bar().encode(
        color=alt.Color("category:N", legend=None, scale=alt.Scale(scheme=_CATEGORY_SCHEME)),
        tooltip=["category:N", "calls:Q", alt.Tooltip("total_ms:Q", title="total (ms)", format=",.3f"),
                 alt.Tooltip("pct:Q", title="share (%)")],
    )
    labels = base.mark_text(align="left", dx=3, fontSize=11).encode(
        text=alt.Text("pct:Q", format=".1f")
    )
    return (bars + labels).properties(
        title=chart_title("GPU time by kernel category", "label: share of GPU time (%)"), width=WIDTH - 140
    )


def timeline(ops: pl.DataFrame, *, note: str = "") -> AnyChart | None:
    """Gantt chart: GPU ops per (device, stream) lane over time, coloured by category."""
    if ops.is_empty():
        return None
    t0 = ops["start_ns"].min()
    df = ops.select(
        "lane",
        pl.col("short_name").alias("kernel"),
        "category",
        "step",
        ((pl.col("start_ns") - t0) / 1e6).alias("start_ms"),
        ((pl.col("end_ns") - t0) / 1e6).alias("end_ms"),
        (pl.col("end_ns") - pl.col("start_ns")).truediv(1e3).round(2).alias("dur_us"),
    )
    lanes = df["lane"].n_unique()
    return (
        Chart(values(df))
        .mark_bar(height={"band": 0.8}, clip=True)
        .encode(
            x=alt.X("start_ms:Q", title="time since window start (ms)"),
            x2="end_ms:Q",
            y=alt.Y("lane:N", title=None, axis=alt.Axis(labelExpr=MIDDLE_LABEL)),
            color=alt.Color("category:N", title="category", scale=alt.Scale(scheme=_CATEGORY_SCHEME)),
            tooltip=["kernel:N", "category:N", "step:Q", "lane:N",
                     alt.Tooltip("start_ms:Q", title="start (ms)", format=",.3f"),
                     alt.Tooltip("dur_us:Q", title="duration (µs)")],
        )
        .properties(
            title=chart_title("GPU timeline per stream", note),
            width=WIDTH - 120,
            height=max(60, 34 * lanes),
        )
    )


_IDLE_KINDS = {
    "host_wait_ns": "host wait (CPU launch-bound)",
    "kernel_wait_ns": "kernel wait (launch overhead)",
    "other_wait_ns": "other (sync, dependencies)",
}


def idle_breakdown(idle: pl.DataFrame) -> AnyChart | None:
    """Stacked horizontal bars: idle time per stream split by gap kind."""
    if idle.is_empty() or not idle["gap_ns"].fill_null(0).sum():
        return None
    df = (
        idle.select(
            pl.format("GPU {} · stream {}", pl.col("device"), pl.col("stream")).alias("lane"),
            *_IDLE_KINDS,
        )
        .unpivot(index="lane", variable_name="kind", value_name="ns")
        .with_columns(
            pl.col("kind").replace_strict(_IDLE_KINDS),
            (pl.col("ns").fill_null(0) / 1e6).alias("idle_ms"),
        )
        .drop("ns")
    )
    return (
        Chart(values(df))
        .mark_bar()
        .encode(
            x=alt.X("sum(idle_ms):Q", title="idle time (ms)"),
            y=alt.Y("lane:N", title=None),
            color=alt.Color("kind:N", title="gap kind", sort=list(_IDLE_KINDS.values()),
                            scale=alt.Scale(range=["#e45756", "#f58518", "#bab0ac"])),
            tooltip=["lane:N", "kind:N", alt.Tooltip("idle_ms:Q", title="idle (ms)", format=",.3f")],
        )
        .properties(title=chart_title("GPU idle time per stream, by cause"), width=WIDTH - 150,
                    height=max(40, 28 * df["lane"].n_unique()))
    )


def _log_bins(series: pl.Series, *, per_decade: int = 4) -> pl.DataFrame:
    """Counts of values (µs) in log-spaced bins; values below 0.1 µs go to the first bin."""
    us = series.drop_nulls().cast(pl.Float64) / 1e3
    floor = 0.1
    k = (us.clip(lower_bound=floor).log10() * per_decade).floor().cast(pl.Int64)
    counts = k.value_counts().sort(k.name)
    lo = [10 ** (int(i) / per_decade) for i in counts[k.name]]
    hi = [10 ** ((int(i) + 1) / per_decade) for i in counts[k.name]]
    return pl.DataFrame({"lo_us": lo, "hi_us": hi, "ops": counts["count"]})


def launch_latency(launch_ops: pl.DataFrame) -> AnyChart | None:
    """Histograms (log time axis): launch call duration and queueing before the GPU start."""
    parts = []
    for col, label in (("api_ns", "launch call (CPU runtime API)"),
                       ("queue_ns", "queue (launch end → GPU start)")):
        if col in launch_ops.columns and launch_ops[col].drop_nulls().len():
            parts.append(_log_bins(launch_ops[col]).with_columns(pl.lit(label).alias("measure")))
    if not parts:
        return None
    df = pl.concat(parts)
    return (
        Chart(values(df))
        .mark_bar(stroke="white", strokeWidth=0.5)
        .encode(
            x=alt.X("lo_us:Q", title="latency (µs, log scale; < 0.1 µs in the first bin)",
                    scale=alt.Scale(type="log")),
            x2="hi_us:Q",
            y=alt.Y("ops:Q", title="GPU ops"),
            y2=alt.datum(0),
            color=alt.Color("measure:N", legend=None),
            row=alt.Row("measure:N", title=None, header=alt.Header(labelOrient="top", labelAnchor="start",
                                                                    labelFontSize=12, labelFontWeight="bold")),
            tooltip=["measure:N", alt.Tooltip("lo_us:Q", title="from (µs)", format=",.2f"),
                     alt.Tooltip("hi_us:Q", title="to (µs)", format=",.2f"), "ops:Q"],
        )
        .properties(width=WIDTH - 80, height=110)
        .resolve_scale(y="independent")
        .properties(title=chart_title("Launch latency distribution"))
    )


def step_times(steps: pl.DataFrame) -> AnyChart | None:
    """Stacked bars per step: GPU busy and idle time of the GPU work the step launched.

    Their sum is the step's GPU span: its wall time plus the GPU tail past its CPU end.
    """
    if steps.is_empty():
        return None
    df = (
        steps.group_by("step")
        .agg(pl.col("gpu_busy_ns").max(), pl.col("gpu_idle_ns").max(), pl.col("wall_ns").max())
        .sort("step")
        .unpivot(index=["step", "wall_ns"], variable_name="part", value_name="ns")
        .with_columns(
            pl.col("part").replace_strict({"gpu_busy_ns": "GPU busy", "gpu_idle_ns": "GPU idle"}),
            (pl.col("ns").fill_null(0) / 1e6).alias("ms"),
            (pl.col("wall_ns") / 1e6).alias("wall_ms"),
        )
        .drop("ns", "wall_ns")
    )
    return (
        Chart(values(df))
        .mark_bar()
        .encode(
            x=alt.X("step:O", title="step", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("ms:Q", title="time (ms)", stack="zero"),
            color=alt.Color("part:N", title=None, sort=["GPU busy", "GPU idle"],
                            scale=alt.Scale(range=["#4c78a8", "#e45756"])),
            order=alt.Order("part:N"),
            tooltip=["step:O", "part:N", alt.Tooltip("ms:Q", title="time (ms)", format=",.3f"),
                     alt.Tooltip("wall_ms:Q", title="step wall (ms)", format=",.3f")],
        )
        .properties(title=chart_title("Step times", "by launch: bar height = step wall time + GPU tail "
                                 "past the step's CPU end (max over devices)"),
                    width=min(WIDTH - 100, max(120, 40 * df["step"].n_unique())))
    )


def sparkline(steps: pl.DataFrame) -> AnyChart | None:
    """A tiny line of step wall time (ms) per step, for the site index, from 0 ms up.

    None with fewer than two steps (the index says so)."""
    if steps.is_empty():
        return None
    df = (
        steps.group_by("step").agg((pl.col("wall_ns").max() / 1e6).alias("wall_ms")).sort("step")
    )
    if df.height < 2 or any(math.isnan(v) for v in df["wall_ms"].fill_null(0.0)):
        return None
    return (
        Chart(values(df))
        .mark_line(strokeWidth=1.5, point=alt.OverlayMarkDef(size=12))
        .encode(
            x=alt.X("step:O", axis=None),
            # zero-based: a 2% wobble must not look like a cliff
            y=alt.Y("wall_ms:Q", axis=None, scale=alt.Scale(zero=True)),
            tooltip=["step:O", alt.Tooltip("wall_ms:Q", title="step wall (ms)", format=",.2f")],
        )
        .properties(width=140, height=28)
        .configure_view(strokeWidth=0)
    )


def critical_path_steps(steps: pl.DataFrame) -> AnyChart | None:
    """Stacked bars per step: the step's critical path split by what bounds it (HTA's bounds)."""
    if steps.is_empty() or "total_ns" not in steps.columns:
        return None
    parts = [c for c in steps.columns if c.endswith("_ns") and c != "total_ns"]
    df = (
        steps.select("step", *parts)
        .unpivot(index="step", variable_name="bound", value_name="ns")
        .filter(pl.col("ns") > 0)
        .with_columns(pl.col("bound").str.strip_suffix("_ns"), (pl.col("ns") / 1e6).alias("ms"))
        .drop("ns")
    )
    if df.is_empty():
        return None
    return (
        Chart(values(df))
        .mark_bar()
        .encode(
            x=alt.X("step:O", title="step", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("ms:Q", title="critical path (ms)", stack="zero"),
            color=alt.Color("bound:N", title=None),
            order=alt.Order("bound:N"),
            tooltip=["step:O", "bound:N", alt.Tooltip("ms:Q", title="time (ms)", format=",.3f")],
        )
        .properties(title=chart_title("Critical path per step", "HTA's event graph: the longest "
                                 "chain of CPU work, launches, GPU work and syncs, by bound"),
                    width=min(WIDTH - 100, max(120, 40 * df["step"].n_unique())))
    )
