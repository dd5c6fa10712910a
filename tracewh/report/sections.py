"""The sections of a report: a chart (or why there is none) and tables with units."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from tracewh.report import charts, multi_charts
from tracewh.report.roof import roofline_section
from tracewh.report.source import RunData
from tracewh.report.tables import Column, Section, Table, table
from tracewh.report.trends import Trend

#: The run sections drawn from what :func:`tracewh.report.source.collect_across` gathers.
ACROSS_KEYS = ("critical_path", "ranks")


def run_sections(data: RunData, *, prefix: str = "") -> list[Section]:
    """The sections of one run: kernels, categories, timeline, idle, launches, steps, ranks,
    and the roofline when it was collected."""
    p = prefix
    note = data.extra.get("graph_note")  # the graph replays' match quality, where collected
    roof = ([roofline_section(data.roofline, prefix=p, graph_note=note if isinstance(note, str) else "")]
            if data.roofline is not None else [])
    found = data.extra.get("critical_path")
    cpath = found if isinstance(found, pl.DataFrame) else pl.DataFrame()
    return [
        Section(
            f"{p}top_kernels", "Top kernels", charts.top_kernels(data.kernels),
            "no GPU kernels in this run",
            tables=[table("Kernel ranking (by short name)", data.kernels, [
                Column("name", "kernel"), Column("calls", "calls"),
                Column("total_ns", "total", "ms"), Column("mean_ns", "mean", "us"),
                Column("p95_ns", "p95", "us"), Column("max_ns", "max", "us"),
                Column("pct", "share", "pct"),
            ])],
        ),
        Section(
            f"{p}categories", "Time by category", charts.categories(data.categories),
            "no GPU ops in this run",
            tables=[table("GPU time per category", data.categories, [
                Column("name", "category"), Column("calls", "calls"),
                Column("total_ns", "total", "ms"), Column("pct", "share", "pct"),
            ])],
        ),
        Section(
            f"{p}timeline", "GPU timeline", charts.timeline(data.timeline, note=data.timeline_note),
            "no GPU ops with timestamps in this run",
            text=f"Window: {data.timeline_note}." if not data.timeline.is_empty() else "",
        ),
        Section(
            f"{p}idle", "Idle breakdown per stream", charts.idle_breakdown(data.idle),
            "no idle gaps between GPU ops (or no GPU ops)",
            tables=[
                table("Stream gaps", data.gaps, [
                    Column("device", "device"), Column("stream", "stream"), Column("ops", "ops"),
                    Column("busy_ns", "busy", "ms"), Column("gap_ns", "idle", "ms"),
                    Column("idle_fraction", "idle", "ratio_pct"),
                    Column("host_wait_ns", "host wait", "ms"),
                    Column("kernel_wait_ns", "kernel wait", "ms"),
                    Column("other_wait_ns", "other", "ms"), Column("max_gap_ns", "largest gap", "us"),
                ]),
                table("Largest gaps", data.largest_gaps, [
                    Column("device", "device"), Column("stream", "stream"),
                    Column("gap_ns", "gap", "us"), Column("kind", "kind"),
                    Column("prev_name", "before"), Column("next_name", "after"),
                ], limit=10),
            ],
        ),
        Section(
            f"{p}launches", "Launch latency", charts.launch_latency(data.launch_ops),
            "no GPU op is linked to a launch call",
            tables=[table("Launch latency by kernel", data.launch_kernels, [
                Column("short_name", "kernel"), Column("ops", "ops"),
                Column("p50_api_ns", "launch call p50", "us"),
                Column("p95_api_ns", "launch call p95", "us"),
                Column("p50_queue_ns", "queue p50", "us"), Column("p95_queue_ns", "queue p95", "us"),
                Column("negative_queue_ops", "negative queue ops"),
            ], limit=15)],
        ),
        Section(
            f"{p}steps", "Step times", charts.step_times(data.steps),
            "no steps in this trace (no ProfilerStep#N; ingest with --step-marker to define them)",
            tables=[table("Steps", data.steps, [
                Column("step", "step"), Column("device", "device"), Column("wall_ns", "wall", "ms"),
                Column("gpu_busy_ns", "GPU busy", "ms"), Column("gpu_idle_ns", "GPU idle", "ms"),
                Column("gpu_tail_ns", "GPU tail", "ms"), Column("ops", "ops"),
                Column("top_kernel", "top kernel"), Column("bound", "bound"),
            ], limit=50)],
        ),
        Section(
            f"{p}critical_path", "Critical path per step", charts.critical_path_steps(cpath),
            "no steps in this trace, or no CPU operators and GPU ops in them",
            text="The longest chain of CPU work, launches, GPU work and synchronisations of each "
                 "step (HTA's event graph; see tracewh critical-path), split by what bounds it.",
            tables=[table("Critical path per step", cpath, [
                Column("step", "step"), Column("total_ns", "path", "ms"),
                Column("cpu_bound_ns", "CPU", "ms"),
                Column("gpu_compute_bound_ns", "GPU compute", "ms"),
                Column("gpu_communication_bound_ns", "GPU comm", "ms"),
                Column("gpu_kernel_kernel_overhead_ns", "kernel-kernel", "ms"),
                Column("gpu_kernel_launch_overhead_ns", "launch", "ms"),
                Column("data_loading_ns", "data loading", "ms"),
            ], limit=50)] if not cpath.is_empty() else [],
        ),
        Section(
            f"{p}ranks", "Per-rank imbalance", multi_charts.rank_heatmap(data.rank_kernels),
            "a single rank in this job: nothing to compare",
            tables=[table("Most imbalanced kernels", data.rank_imbalance.filter(
                pl.col("ranks") > 1) if "ranks" in data.rank_imbalance.columns else data.rank_imbalance, [
                Column("name", "kernel"), Column("ranks", "ranks"),
                Column("max_rank_total_ns", "slowest rank", "ms"),
                Column("median_rank_total_ns", "median rank", "ms"),
                Column("imbalance", "max ÷ median", "x"), Column("slowest_rank", "slowest"),
            ], limit=10), table("Straggler steps (a rank above its peers' median by more than 3 x their robust spread and 2%)",
                data.rank_stragglers.filter(pl.col("straggler")) if "straggler" in data.rank_stragglers.columns else data.rank_stragglers, [
                Column("step", "step"), Column("rank", "rank"), Column("compute_ns", "GPU compute", "ms"),
                Column("peer_median_ns", "peers' median", "ms"), Column("ratio", "ratio", "x"),
            ], limit=20), table("Late arrivals (a rank last at most collectives of the step; see tracewh collectives)",
                data.rank_stragglers.filter(pl.col("late_straggler")) if "late_straggler" in data.rank_stragglers.columns else data.rank_stragglers.clear(), [
                Column("step", "step"), Column("rank", "rank"), Column("late", "late"),
                Column("collectives", "collectives"), Column("caused_wait_ns", "others' wait", "ms"),
            ], limit=20)],
        ),
        *roof,
    ]


def _rank_text(rank: Any, world_size: Any) -> str:
    """``1 / 8``, or ``single process`` for a trace that names no rank."""
    if rank is None:
        return "single process"
    return f"{rank} / {world_size}" if world_size is not None else str(rank)


def summary_table(data: RunData) -> Table:
    """Facts about the run: file, device, rank, counts, GPU time breakdown."""
    m = data.meta
    rows: list[tuple[str, str]] = [
        ("run_id", data.run_id),
        ("file", str(m.get("file_name") or "")),
        ("day", str(m.get("day") or "")),
        ("host", str(m.get("host") or "")),
        ("rank / world size", _rank_text(m.get("rank"), m.get("world_size"))),
        ("device", str(m.get("device_name") or "")),
        ("events", f"{m.get('n_events') or 0:,}"),
        ("GPU ops", f"{m.get('n_gpu_ops') or 0:,}"),
        ("steps", f"{m.get('n_steps') or 0:,}"),
    ]
    kind = m.get("kind")
    if kind:  # CUDA/HIP graphs: a capture-only trace is not an idle GPU
        rows.append(("kind", {
            "capture": "capture (records a CUDA/HIP graph: almost no GPU work, not an idle GPU)",
            "replay": "replay (CUDA/HIP graph launches; kernels attributed through their capture)",
        }.get(str(kind), str(kind))))
    anomalies = json.loads(m["anomalies_json"]) if m.get("anomalies_json") else {}
    if anomalies:
        rows.append(("anomalies", ", ".join(f"{k} {v:,}" for k, v in sorted(anomalies.items()))))
    unusable = m.get("unusable")  # tracewh.history.health, through Warehouse.runs
    rows.append(("history baseline", (
        f"EXCLUDED ({unusable}): this run's times are skewed" if unusable else "usable")))
    for row in data.breakdown.iter_rows(named=True):
        window = row.get("window_ns") or 0
        rows.append((f"GPU {row['device']} window (ms)", f"{window / 1e6:,.3f}"))
        for key, label in (("computation_ns", "compute"), ("comm_exposed_ns", "exposed comm"),
                           ("memcpy_exposed_ns", "exposed memcpy"), ("idle_ns", "idle")):
            value = row.get(key) or 0
            share = f" ({100 * value / window:.1f} %)" if window else ""
            rows.append((f"GPU {row['device']} {label} (ms)", f"{value / 1e6:,.3f}{share}"))
    return Table("Run", pl.DataFrame(rows, schema=["field", "value"], orient="row"))


#: Rows of a history table (newest first); the title says when there are more.
HISTORY_ROWS = 15


def history_sections(trends: list[Trend] | None, *, prefix: str = "",
                     max_points: int | None = None) -> list[Section]:
    """Trend charts (step time, each regressed metric), or one "no history data" section.

    ``prefix`` keeps the keys (chart ids) of several workloads' histories on one page apart;
    ``max_points``: the runs a line may have and still show each as a point
    (:func:`~tracewh.report.multi_charts.trend`; ``None``: always)."""
    if not trends:
        return [Section(f"{prefix}history", "History", None, "no history data")]
    out = []
    for i, t in enumerate(trends):
        chart = multi_charts.trend(t.frame, x="time", y="value_ns", series="rank", flag="regression",
                             title=t.title, marks=t.marks, max_points=max_points,
                             y_title=t.y_title or ("step time (ms)" if i == 0 else "GPU time per step (ms)"))
        shown = f" (newest {HISTORY_ROWS} of {t.frame.height} runs)" if t.frame.height > HISTORY_ROWS else ""
        tables = [table(t.title + shown, t.frame.sort("time", descending=True), [
            Column("time", "run start (UTC)"), Column("run_id", "run"), Column("rank", "rank"),
            Column("value_ns", "value", t.unit), Column("regression", "regression (any rank)"),
        ], limit=HISTORY_ROWS)] if i else []
        out.append(Section(f"{prefix}history{i}" if i else f"{prefix}history",
                           t.title if i or prefix else "History",
                           chart, "no history data", tables=tables, text=t.note))
    return out


def diff_section(diff: pl.DataFrame | None, a: str, b: str, *, level: str = "short_name",
                 a_label: str | None = None, b_label: str | None = None) -> Section:
    """Time changes from run ``a`` to run ``b`` per ``level`` group (as ``tracewh diff A B``:
    deltas are B − A), or "no diff data". The labels name each side's device."""
    title = f"Comparison by {level}: A {a_label or a} → B {b_label or b} (deltas B − A)"
    if diff is None or diff.is_empty():
        return Section("diff", title, None, "no diff data")
    label = next((c for c in ("short_name", "name", "kernel") if c in diff.columns), diff.columns[0])
    delta = next((c for c in diff.columns if c.startswith("delta") and c.endswith("_ns")), None)
    chart = multi_charts.diverging(diff, label=label, delta=delta) if delta else None
    # one unit per quantity: every time in ms, headers without the _ns of the data
    cols = [Column(c, c[:-3] if c.endswith("_ns") else c, "ms" if c.endswith("_ns") else None)
            for c in diff.columns]
    return Section("diff", title, chart, "no diff data", tables=[table("Differences", diff, cols)])
