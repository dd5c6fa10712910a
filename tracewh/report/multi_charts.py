"""Charts of many runs or ranks: the per-rank heatmap, trends over runs, a diff's bars.

Built like the per-run charts of :mod:`tracewh.report.charts` (same sizes, data and
label helpers, :mod:`tracewh.report.vlspec` specs).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from tracewh.report import vlspec as alt
from tracewh.report.charts import (
    LABEL_LIMIT,
    MIDDLE_LABEL,
    WIDTH,
    AnyChart,
    Chart,
    chart_title,
    values,
)


def rank_heatmap(rank_kernels: pl.DataFrame, *, top: int = 12) -> AnyChart | None:
    """Heatmap: per kernel and rank, GPU time relative to the kernel's median over ranks."""
    if rank_kernels.is_empty() or rank_kernels["rank"].n_unique() < 2:
        return None
    label = "short_name" if "short_name" in rank_kernels.columns else "name"
    totals = (
        # ties broken by name: the same kernels and order every time the report is made
        rank_kernels.group_by(label).agg(pl.col("total_ns").sum())
        .sort(["total_ns", label], descending=[True, False]).head(top)
    )
    df = (
        rank_kernels.filter(pl.col(label).is_in(totals[label].implode()))
        .group_by(label, "rank")
        .agg(pl.col("total_ns").sum())
        .with_columns(
            (pl.col("total_ns") / pl.col("total_ns").median().over(label)).round(3).alias("ratio"),
            (pl.col("total_ns") / 1e6).alias("total_ms"),
        )
        .rename({label: "kernel"})
        .drop("total_ns")
        .sort("kernel", "rank")
    )
    order = totals[label].to_list()
    base = Chart(values(df)).encode(
        x=alt.X("rank:O", title="rank", axis=alt.Axis(labelAngle=0, orient="top")),
        y=alt.Y("kernel:N", sort=order, title=None, axis=alt.Axis(labelExpr=MIDDLE_LABEL)),
    )
    cells = base.mark_rect().encode(
        color=alt.Color("ratio:Q", title="× median rank",
                        scale=alt.Scale(scheme="redblue", reverse=True, domain=[0, 2], clamp=True)),
        tooltip=["kernel:N", "rank:O", alt.Tooltip("total_ms:Q", title="GPU time (ms)", format=",.3f"),
                 alt.Tooltip("ratio:Q", title="× median rank")],
    )
    text = base.mark_text(fontSize=10).encode(text=alt.Text("ratio:Q", format=".2f"))
    n_ranks = df["rank"].n_unique()
    return (cells + text).properties(
        title=chart_title("Per-rank imbalance", "GPU time of each kernel on each rank ÷ its median over ranks"
                     " (colour clamped to 0–2)"),
        width=min(WIDTH - LABEL_LIMIT, 48 * n_ranks), height=22 * len(order),
    )


def trend(history: pl.DataFrame, *, x: str, y: str, series: str | None = None,
          flag: str | None = None, title: str = "History",
          y_title: str = "GPU time (ms)", marks: pl.DataFrame | None = None,
          max_points: int | None = None) -> AnyChart | None:
    """Line chart of a metric over runs; points flagged as regressions drawn as red rings.

    ``y`` holds ns and is drawn in ms; ``flag`` names a boolean column marking regressions;
    ``marks`` (``time``, ``label``) are change points, drawn as dashed rules with their label.
    Each run is a point on its line while no line has more than ``max_points`` runs (``None``:
    always); beyond that the points would overlap into a band (a static image has no tooltip to
    show for them) and the line is drawn alone, the regressions' rings still drawn.
    """
    if history.is_empty() or x not in history.columns or y not in history.columns:
        return None
    cols: list[Any] = [pl.col(x).alias("x"), (pl.col(y) / 1e6).alias("ms")]
    if series:
        cols.append(pl.col(series).cast(pl.String).fill_null("-").alias("series"))
    if flag:
        cols.append(pl.col(flag).fill_null(False).alias("regression"))
    df = history.select(cols)
    x_type = "T" if history.schema[x].is_temporal() else ("Q" if history.schema[x].is_numeric() else "O")
    enc: dict[str, Any] = {
        "x": alt.X(f"x:{x_type}", title="run start (UTC)" if x_type == "T" else x),
        "y": alt.Y("ms:Q", title=y_title, scale=alt.Scale(zero=False)),
    }
    if series:
        enc["color"] = alt.Color("series:N", title=series, legend=alt.Legend(labelExpr=MIDDLE_LABEL))
    base = Chart(values(df)).encode(**enc)
    tips = [alt.Tooltip(f"x:{x_type}", title="run start"), alt.Tooltip("ms:Q", title=y_title, format=",.3f")]
    longest = df.group_by("series").len()["len"].max() if series else df.height
    pointed = max_points is None or (isinstance(longest, int) and longest <= max_points)
    line = base.mark_line(point=pointed).encode(tooltip=tips)
    layers: list[Any] = [line]
    flagged = bool(flag) and bool(df["regression"].any())
    if flagged:
        # the flagged rows alone (not every row again behind a filter: at 3,000 runs that
        # doubled the spec and the renderer's parsing of its dates)
        rings = Chart(values(df.filter(pl.col("regression")))).encode(**enc)
        layers.append(rings.mark_point(
            size=220, shape="circle", filled=False, strokeWidth=2.5).encode(color=alt.value("#d62728")))
    marked = marks is not None and not marks.is_empty() and x_type == "T"
    if marked and marks is not None:
        m = Chart(values(marks.select(pl.col("time").alias("x"), "label")))
        layers.append(m.mark_rule(strokeDash=[4, 3], color="#555").encode(x="x:T"))
        layers.append(m.mark_text(align="left", dx=3, dy=-4, fontSize=10, color="#555").encode(
            x="x:T", y=alt.value(8), text="label:N"))
    # the axis is zoomed to the values (zero=False): say so on the chart, so that a 1% step
    # does not read as a cliff
    low = df["ms"].min()
    zoomed = isinstance(low, int | float) and low > 0
    notes = [n for n in ("red rings: runs in the regression" if flagged else None,
                         "dashed: change points (alert group)" if marked else None,
                         "y axis not zero-based" if zoomed else None) if n]
    return alt.layer(*layers).properties(
        title=chart_title(title, "; ".join(notes) or None), width=WIDTH - 160
    )


def diverging(diff: pl.DataFrame, *, label: str, delta: str, top: int = 15) -> AnyChart | None:
    """Diverging bars: change in GPU time per kernel between two runs (``delta`` in ns)."""
    if diff.is_empty() or label not in diff.columns or delta not in diff.columns:
        return None
    df = (
        diff.select(pl.col(label).alias("kernel"), (pl.col(delta) / 1e6).alias("delta_ms"))
        .drop_nulls()
        .sort(pl.col("delta_ms").abs(), descending=True)
        .head(top)
    )
    if df.is_empty():
        return None
    return (
        Chart(values(df))
        .mark_bar()
        .encode(
            x=alt.X("delta_ms:Q", title="change in GPU time per step (ms, B − A)"),
            y=alt.Y("kernel:N", sort="-x", title=None, axis=alt.Axis(labelExpr=MIDDLE_LABEL)),
            color=alt.condition("datum.delta_ms > 0", alt.value("#e45756"), alt.value("#54a24b")),
            tooltip=["kernel:N", alt.Tooltip("delta_ms:Q", title="Δ (ms)", format="+,.3f")],
        )
        .properties(title=chart_title("Largest changes between the runs"), width=WIDTH - LABEL_LIMIT)
    )
