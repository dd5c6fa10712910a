"""The report's memory section: allocated and reserved over time per device, and who holds the peak.

Every number comes from ``Warehouse.memory`` (the ``sql/65_memory.sql`` macros); this
module only draws them: per device a step line of the highest allocated and reserved
level in each time bucket (so the peak is never smoothed away), the ProfilerSteps shaded
behind it and the peak marked, then tables of the peak's holders and the per-step peaks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from tracewh.core.errors import TracewhError
from tracewh.report import vlspec as alt
from tracewh.report.charts import WIDTH, AnyChart, Chart, values
from tracewh.report.tables import Column, Section, table

#: Time buckets of the memory timeline (each keeps its highest level).
TIMELINE_BUCKETS = 600


@dataclass(frozen=True)
class MemoryData:
    """A run's memory frames (all of them ``summary``, empty: no ``[memory]`` events)."""

    summary: pl.DataFrame  # memory_summary
    timeline: pl.DataFrame  # memory_timeline
    steps: pl.DataFrame  # memory_steps
    holders: pl.DataFrame  # memory_peak_holders (top 10 per device)
    leaks: pl.DataFrame  # memory_leak_check


def collect_memory(wh: Any, run_id: Any, *, buckets: int = TIMELINE_BUCKETS) -> MemoryData | None:
    """The memory frames of ``run_id`` (or a resolved RunRef); ``None`` without ``memory``."""
    method = getattr(wh, "memory", None)
    if method is None:
        return None
    try:
        summary = method(run_id)
        if summary.is_empty():  # no [memory] events: every other view is empty too
            return MemoryData(summary, summary, summary, summary, summary)
        return MemoryData(
            summary=summary,
            timeline=method(run_id, view="timeline", buckets=buckets),
            steps=method(run_id, view="steps"),
            holders=method(run_id, view="peak", top=10),
            leaks=method(run_id, view="leaks"),
        )
    except TracewhError:
        return None


def _unit(peak: float) -> tuple[str, float]:
    """The unit that shows ``peak`` bytes with a few digits before the point."""
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if peak >= div:
            return unit, div
    return "bytes", 1.0


def _amount(nbytes: float) -> str:
    unit, div = _unit(nbytes)
    return f"{nbytes / div:,.2f} {unit}" if div > 1 else f"{nbytes:,.0f} bytes"


def memory_chart(data: MemoryData) -> AnyChart | None:
    """Per device: allocated and reserved over time, steps shaded, the peak marked."""
    if data.summary.is_empty() or data.timeline.is_empty():
        return None
    panels = []
    for dev in data.summary.iter_rows(named=True):
        name = dev["device_name"]
        t0 = dev["peak_allocated_ts_ns"] - dev["peak_offset_ns"]  # the run's start
        unit, div = _unit(float(max(dev["peak_allocated_bytes"], dev["peak_reserved_bytes"] or 0)))
        tl = data.timeline.filter(pl.col("device_name") == name).sort("bucket")
        lines = pl.concat([
            tl.select(((pl.col("ts_ns") - t0) / 1e6).alias("t_ms"),
                      (pl.col(col) / div).alias("value"), pl.lit(label).alias("series"))
            for col, label in (("max_allocated_bytes", "allocated"), ("max_reserved_bytes", "reserved"))
        ]).drop_nulls("value")
        y = alt.Y("value:Q", title=f"{name} ({unit})", scale=alt.Scale(zero=True))
        layers: list[Any] = []
        steps = data.steps.filter(pl.col("device_name") == name)
        if not steps.is_empty():
            shade = steps.sort("step").with_row_index("k").select(
                "step", ((pl.col("start_ns") - t0) / 1e6).alias("s_ms"),
                ((pl.col("start_ns") + pl.col("wall_ns") - t0) / 1e6).alias("e_ms"),
                (pl.col("peak_allocated_bytes") / div).alias("step_peak"),
                pl.when(pl.col("k") % 2 == 0).then(0.16).otherwise(0.07).alias("shade"),
            )
            band = Chart(values(shade)).encode(x="s_ms:Q")
            layers.append(band.mark_rect(color="#7f7f7f").encode(
                x2="e_ms:Q", opacity=alt.Opacity("shade:Q", legend=None, scale=None),
                tooltip=[alt.Tooltip("step:O", title="ProfilerStep"),
                         alt.Tooltip("step_peak:Q", title=f"step peak ({unit})", format=",.3f")]))
            if shade.height <= 40:
                layers.append(band.mark_text(align="left", baseline="top", dx=3, dy=3, fontSize=9,
                                             color="#555").encode(y=alt.value(0), text="step:O"))
        layers.append(Chart(values(lines)).mark_line(interpolate="step-after", strokeWidth=1.5).encode(
            x=alt.X("t_ms:Q", title="time since run start (ms)"), y=y,
            color=alt.Color("series:N", title=None, sort=["allocated", "reserved"],
                            scale=alt.Scale(domain=["allocated", "reserved"], range=["#4c78a8", "#f58518"])),
            tooltip=["series:N", alt.Tooltip("t_ms:Q", title="time (ms)", format=",.3f"),
                     alt.Tooltip("value:Q", title=unit, format=",.3f")]))
        peak = pl.DataFrame({"t_ms": [dev["peak_offset_ns"] / 1e6],
                             "value": [dev["peak_allocated_bytes"] / div],
                             "label": [f"peak {_amount(dev['peak_allocated_bytes'])}"]})
        mark = Chart(values(peak)).encode(x="t_ms:Q", y="value:Q")
        layers.append(mark.mark_point(shape="triangle-down", size=90, filled=True, color="#d62728", yOffset=-6))
        layers.append(mark.mark_text(align="left", dx=6, dy=-10, fontSize=11, color="#d62728").encode(text="label:N"))
        panels.append(alt.layer(*layers).properties(width=WIDTH - 120, height=150))
    chart = panels[0] if len(panels) == 1 else alt.vconcat(*panels).resolve_scale(color="shared", x="shared")
    return chart.properties(title=alt.TitleParams(
        "Device memory over time", anchor="start", fontSize=14,
        subtitle="highest level per time bucket; grey bands: ProfilerSteps (numbered); ▼ the peak allocated"))


def _sentences(data: MemoryData) -> str:
    parts = []
    for dev in data.summary.iter_rows(named=True):
        text = (f"{dev['device_name']} peaks at {_amount(dev['peak_allocated_bytes'])} allocated"
                f" {dev['peak_offset_ns'] / 1e6:,.1f} ms after the run starts")
        if dev["peak_reserved_bytes"]:
            text += f" ({_amount(dev['peak_reserved_bytes'])} reserved at most)"
        if dev["peak_before_trace_bytes"]:
            text += f"; {_amount(dev['peak_before_trace_bytes'])} of it was allocated before the trace"
        if dev["top_op_name"]:
            text += f"; {dev['top_op_name']} holds the most of the rest ({_amount(dev['top_op_live_bytes'])})"
        if dev.get("top_module_path"):
            text += f", module {dev['top_module_path']} ({_amount(dev['top_module_live_bytes'])})"
        parts.append(text + ".")
    for leak in data.leaks.iter_rows(named=True):
        if leak["leak_suspect"]:
            parts.append(f"Leak suspect on {leak['device_name']}: the per-step peak rises every step, by "
                         f"{_amount(leak['growth_per_step_bytes'])} per step on average.")
    return " ".join(parts)


def memory_section(data: MemoryData | None, *, prefix: str = "") -> Section:
    """The memory section of a run's report (or why there is none)."""
    key = f"{prefix}memory"
    empty = "no [memory] events in this trace (record with profile_memory=True)"
    if data is None or data.summary.is_empty():
        return Section(key, "Device memory", None, empty)
    summary = table("Memory per device", data.summary, [
        Column("device_name", "device"), Column("peak_allocated_bytes", "peak allocated", "mb"),
        Column("peak_offset_ns", "peak at", "ms"), Column("peak_reserved_bytes", "peak reserved", "mb"),
        Column("peak_before_trace_bytes", "from before the trace", "mb"),
        Column("allocations", "allocations"), Column("allocated_bytes", "allocated in total", "mb"),
        Column("live_at_end_bytes", "never freed", "mb"),
    ], limit=None)
    holders = table("Who holds the peak (live allocations by module and CPU operator)", data.holders, [
        Column("device_name", "device"), Column("origin", "origin"), Column("module_path", "module"),
        Column("op_name", "operator"),
        Column("allocations", "allocations"), Column("live_bytes", "live", "mb"),
        Column("share_of_peak", "share of the peak", "ratio_pct"), Column("largest_bytes", "largest", "mb"),
    ], limit=None)
    steps = table("Per step", data.steps, [
        Column("step", "step"), Column("device_name", "device"),
        Column("start_allocated_bytes", "opening", "mb"), Column("peak_allocated_bytes", "peak", "mb"),
        Column("end_allocated_bytes", "closing", "mb"), Column("peak_growth_bytes", "peak growth", "mb"),
        Column("retained_bytes", "kept by the step", "mb"),
    ], limit=50)
    return Section(key, "Device memory", memory_chart(data), empty, text=_sentences(data),
                   tables=[summary, holders, steps])


__all__ = ["MemoryData", "collect_memory", "memory_chart", "memory_section"]
