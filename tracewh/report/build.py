"""A run's report: ``report.md``, a self-contained ``report.html`` and its chart images.

:func:`build_report` gathers the run's frames (:mod:`tracewh.report.source`, the trends of
:mod:`tracewh.report.trends`), makes the sections and renders their charts (Vega-Lite specs,
rendered offline by vl-convert to SVG or PNG: the ``report`` extra), and writes the folder
atomically.
``from tracewh.report import build_report`` imports this module on first use.
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracewh import __version__
from tracewh.core.errors import UsageError
from tracewh.core.outdir import check_output_dir, output_dir
from tracewh.query.options import KERNEL_WAIT_THRESHOLD_NS
from tracewh.query.runsel import RunSelector
from tracewh.report import REPORT_QUERY_THREADS
from tracewh.report.document import ChartRenderer, write_report
from tracewh.report.memory_section import collect_memory, memory_section
from tracewh.report.modules_section import collect_modules, graph_note, modules_section
from tracewh.report.protocol import WarehouseLike, one_snapshot
from tracewh.report.render import CHART_FORMATS
from tracewh.report.render_process import RenderProcess
from tracewh.report.roof import roofline_section
from tracewh.report.sections import (
    ACROSS_KEYS,
    diff_section,
    history_sections,
    run_sections,
    summary_table,
)
from tracewh.report.source import (
    collect_across,
    collect_diff,
    collect_roofline,
    collect_run,
    run_label,
)
from tracewh.report.tables import Section
from tracewh.report.trends import collect_history, history_window

__all__ = ["STATIC_TREND_POINTS", "ReportResult", "build_report"]

#: A history chart of the report (a static image) marks each run as a point up to this many
#: runs a line: beyond, the points are under 5 px apart on its ~700 px and only the line is
#: drawn (the site's interactive charts keep every point: each has a tooltip).
STATIC_TREND_POINTS = 150


@dataclass(frozen=True)
class ReportResult:
    """What :func:`build_report` wrote: the folder, its files, the charts drawn, the sections left
    empty and notes on what it left out (the runs before the ``since`` window)."""

    folder: Path
    files: list[Path]
    charts: list[str]
    empty: list[str]
    notes: list[str] = field(default_factory=list)  # what the report left out (--since window)


def build_report(
    wh: WarehouseLike,
    out: str | Path,
    *,
    run: RunSelector = "latest",
    compare: RunSelector | None = None,
    since: str | None = None,
    level: str = "short_name",
    threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS,
    chart_format: str = "svg",
    renderer: RenderProcess | None = None,
) -> ReportResult:
    """Write a run's report to ``out``: ``report.md``, ``report.html`` and ``charts/``.

    Parameters
    ----------
    wh
        The warehouse.
    out
        Output folder: a new or empty folder, or a report tracewh wrote there before (see
        :mod:`tracewh.core.outdir`; anything else is refused and left as it was), replaced
        atomically (built beside it, then renamed).
    run
        Run selector of the run reported on.
    compare
        Optional run selector to compare ``run`` against (a diff section).
    since
        History window (``90d``, ``12w``: counted back from the latest run's day; a date;
        ``None`` or ``all``: all runs), for ``Warehouse.history`` and ``changes`` where they
        exist; the runs of the workload it leaves out are counted in the history section's
        note and in :attr:`ReportResult.notes`.
    level
        What the comparison with ``compare`` groups by: ``kernel``, ``short_name``,
        ``category`` or ``op`` (CPU operator and input shapes, across hardware).
    threshold_ns
        Kernel-wait threshold of the gap classification, in ns.
    chart_format
        The charts' image format (:data:`tracewh.report.render.CHART_FORMATS`): ``svg``
        (vector: sharp at any zoom, about half the CPU and the bytes) or ``png`` (2x pixels,
        for tools that take no SVG), written to ``charts/`` and embedded in ``report.html``.
    renderer
        A chart process already started (:class:`~tracewh.report.render_process.RenderProcess`,
        the caller's to close): its engine's start (~0.5 s of CPU) then overlaps the caller's
        own work, as the CLI's imports. Default: the report starts and closes its own.

    Returns
    -------
    ReportResult

    Examples
    --------
    >>> build_report(Warehouse("wh"), "reports/latest", compare="5e69")  # doctest: +SKIP
    """
    if chart_format not in CHART_FORMATS:
        raise UsageError(f"chart format must be one of {', '.join(CHART_FORMATS)}, not {chart_format!r}")
    check_output_dir(out, kind="report")  # before any work: refuse early, change nothing
    # the charts of each group of sections render (a child process: vl-convert holds the
    # GIL) while the next group's queries run; the two largest parts (the history, then its
    # charts; the roofline) run beside the run's own queries (a connection of their own in a
    # session)
    with one_snapshot(wh, query_threads=REPORT_QUERY_THREADS), \
            ChartRenderer(fmt=chart_format, child=renderer) as drawing, \
            ThreadPoolExecutor(REPORT_QUERY_THREADS - 1, thread_name_prefix="tracewh-query") as side:
        ref = wh.resolve_run(run)
        # the --since window counts back from the latest run (as history and changes) and
        # says how many runs of the workload it leaves out
        first, window = history_window(wh, since, run=ref.run_id)
        # the history first: the longest part once there are thousands of runs
        history = side.submit(_drawn_history, drawing, wh, since=first, run=ref.run_id,
                              window_note=window)
        roofline = side.submit(collect_roofline, wh, ref)
        # each group of charts is handed to the renderer as soon as its data is there: the
        # run's own analyses, the critical path and ranks (collect_across), the roofline, the
        # layers and memory, the history (from its own thread); the sections keep their
        # order: the run's, the roofline (as run_sections puts it), layers, memory, history
        data = collect_run(wh, ref, threshold_ns=threshold_ns, roofline=False, across=False)
        drawing.add(s for s in run_sections(data) if s.key not in ACROSS_KEYS)
        collect_across(wh, data)
        # the graph replays' match quality: beside the roofline's and the layers' attribution
        note = data.extra["graph_note"] = graph_note(wh, data.ref or data.run_id)
        sections = run_sections(data)
        drawing.add(sections)
        data.roofline = roofline.result()
        if data.roofline is not None:
            sections.append(roofline_section(data.roofline, graph_note=note))
            drawing.add(sections[-1:])
        sections += [modules_section(collect_modules(wh, data.ref or data.run_id, note=note)),
                     memory_section(collect_memory(wh, data.ref or data.run_id))]
        drawing.add(sections)
        sections += history.result()
        if compare is not None:
            # the report's run is A, --compare's run B: the direction of `tracewh diff A B`
            other = wh.resolve_run(compare).run_id
            sections.append(diff_section(collect_diff(wh, data.run_id, other, level=level),
                                         data.run_id, other, level=level,
                                         a_label=run_label(wh, data.run_id),
                                         b_label=run_label(wh, other)))
        drawing.add(sections)
        rendered = drawing.result()
    title = f"tracewh report: {data.meta.get('file_name') or data.run_id}"
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    generated = f"run {data.run_id} · generated {stamp} by tracewh {__version__}"
    folder = Path(out)
    with output_dir(folder, kind="report") as tmp:
        written = write_report(tmp, title=title, facts=[summary_table(data)],
                               sections=sections, generated=generated, rendered=rendered)
    files = [folder.absolute() / p.relative_to(tmp) for p in written]
    charts = [s.key for s in sections if s.chart is not None]
    empty = [s.key for s in sections if s.chart is None]
    return ReportResult(folder.absolute(), files, charts, empty, [window] if window else [])


def _drawn_history(drawing: ChartRenderer, wh: WarehouseLike, **options: Any) -> list[Section]:
    """The history's sections (:func:`~tracewh.report.trends.collect_history` with ``options``),
    their charts handed to ``drawing`` as soon as they are made."""
    sections = history_sections(collect_history(wh, **options), max_points=STATIC_TREND_POINTS)
    drawing.add(sections)
    return sections
