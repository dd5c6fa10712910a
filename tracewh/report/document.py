"""The report files: ``report.md``, a self-contained ``report.html`` and the chart images.

``report.html`` embeds every chart as an inline base64 image (an ``<img>``: SVG by default,
or PNG; an SVG shown as an image runs no script) and its styles inline: it opens from disk,
offline, with no script at all. Chart images are also written to ``charts/KEY.svg`` (or
``.png``; linked from ``report.md``) with their Vega-Lite spec beside them
(``charts/KEY.vl.json``).
"""

from __future__ import annotations

import base64
import html
import json
import threading
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from tracewh.core.textsafe import escape_markdown
from tracewh.report import render
from tracewh.report.render_process import RenderProcess
from tracewh.report.tables import Section, Table

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',sans-serif;margin:0;
color:#1d1d1f;background:#fafafa}
main{max-width:1240px;margin:0 auto;padding:24px 32px 64px}
h1{font-size:1.6rem;margin:.2em 0}h2{font-size:1.25rem;margin-top:2em;border-bottom:1px solid #ddd;
padding-bottom:.2em}h3{font-size:1rem;margin:1.2em 0 .4em;color:#444}
table{border-collapse:collapse;font-size:.82rem;margin:.4em 0 1em;background:#fff}
th,td{border:1px solid #e2e2e2;padding:3px 8px;text-align:left;white-space:nowrap}
th{background:#f0f0f3}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td[title]{cursor:help}.tablewrap{max-width:100%;overflow-x:auto}
.empty{color:#777;font-style:italic}.chart{margin:.6em 0;max-width:100%;overflow-x:auto}
.chart img{max-width:100%;height:auto}
nav a{margin-right:1em}.muted{color:#777;font-size:.85rem}
"""


#: The media type of each chart format (render.CHART_FORMATS) in report.html's data URLs.
MEDIA_TYPES = {"svg": "image/svg+xml", "png": "image/png"}


@dataclass(frozen=True)
class ChartFile:
    """A rendered chart: its key, image bytes, their format (``svg`` or ``png``) and the
    Vega-Lite spec."""

    key: str
    image: bytes
    spec: dict[str, object]
    fmt: str = "svg"

    @property
    def file_name(self) -> str:
        """The image's name in ``charts/``: ``KEY.svg`` or ``KEY.png``."""
        return f"{self.key}.{self.fmt}"


class ChartRenderer:
    """Renders sections' charts (SVG or PNG) in a child process as soon as they are added.

    vl-convert holds the GIL while it renders, so a thread rendering charts stops every other
    thread of the process: the charts render in one child process instead
    (:class:`~tracewh.report.render_process.RenderProcess`), whose engine starts at once. A
    report adds each group of sections when it has them and goes on querying while their
    charts render (``with ChartRenderer() as charts: charts.add(sections); ...;
    charts.result()``).
    """

    def __init__(self, *, fmt: str = "svg", child: RenderProcess | None = None) -> None:
        if fmt not in render.CHART_FORMATS:
            raise ValueError(f"chart format must be one of {', '.join(render.CHART_FORMATS)}, not {fmt!r}")
        self.fmt = fmt
        # a child started by the caller (the CLI starts one before its imports) stays the
        # caller's to close; otherwise this renderer starts and closes its own
        self._own = child is None
        self._child = RenderProcess(fmt) if child is None else child
        self._jobs: dict[str, tuple[dict[str, Any], Future[bytes]]] = {}
        self._lock = threading.Lock()

    def add(self, sections: Iterable[Section]) -> None:
        """Start rendering the charts of ``sections`` (a key already added is kept); any thread."""
        for sec in sections:
            with self._lock:
                if sec.chart is None or sec.key in self._jobs:
                    continue
                vl = render.spec(sec.chart)
                self._jobs[sec.key] = (vl, self._child.submit(sec.key, vl, self.fmt))

    def result(self) -> dict[str, ChartFile]:
        """Every chart added, rendered (waits for them; raises a chart's render error)."""
        with self._lock:
            jobs = dict(self._jobs)
        return {key: ChartFile(key, job.result(), vl, self.fmt) for key, (vl, job) in jobs.items()}

    def __enter__(self) -> ChartRenderer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._own:
            self._child.__exit__(kind, exc, tb)


def render_charts(sections: list[Section], *, fmt: str = "svg") -> dict[str, ChartFile]:
    """Render every section's chart to ``fmt`` (SVG or PNG, offline), keyed by section key."""
    if not any(sec.chart is not None for sec in sections):
        return {}
    with ChartRenderer(fmt=fmt) as charts:
        charts.add(sections)
        return charts.result()


def write_report(
    folder: Path,
    *,
    title: str,
    facts: list[Table],
    sections: list[Section],
    generated: str,
    rendered: dict[str, ChartFile] | None = None,
) -> list[Path]:
    """Write ``report.md``, ``report.html`` and ``charts/*`` into ``folder``; the paths written.

    ``folder`` should be a fresh temporary folder (see :func:`~tracewh.core.atomic.atomic_dir`).
    ``rendered``: the sections' charts, already rendered (default: rendered here).
    """
    if rendered is None:
        rendered = render_charts(sections)
    charts_dir = folder / "charts"
    charts_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for chart in rendered.values():
        image_path = charts_dir / chart.file_name
        image_path.write_bytes(chart.image)
        spec_path = charts_dir / f"{chart.key}.vl.json"
        # on one line: an indented dump goes through Python's own encoder, ~10x slower (0.13 s
        # for the 3,000-run report's history specs); the Vega editor lays it out again
        spec_path.write_text(json.dumps(chart.spec), encoding="utf-8")
        written += [image_path, spec_path]
    md = folder / "report.md"
    md.write_text(markdown(title=title, facts=facts, sections=sections, charts=rendered,
                           generated=generated), encoding="utf-8")
    page = folder / "report.html"
    page.write_text(html_page(title=title, facts=facts, sections=sections, charts=rendered,
                              generated=generated), encoding="utf-8")
    return [md, page, *written]


def markdown(
    *, title: str, facts: list[Table], sections: list[Section], charts: dict[str, ChartFile],
    generated: str,
) -> str:
    """The Markdown report (images linked from ``charts/``).

    Every string in it that may hold data (the title holds the trace's file name; tables,
    texts and sentences hold names and labels) goes through
    :func:`~tracewh.core.textsafe.escape_markdown`: data never becomes markup or HTML.
    """
    md = escape_markdown
    parts = [f"# {md(title)}\n", f"_{md(generated)}_\n"]
    for t in facts:
        parts += [f"## {md(t.title)}\n", t.markdown()]
    for sec in sections:
        parts.append(f"## {md(sec.title)}\n")
        if sec.key in charts:
            parts.append(f"![{md(sec.title)}](charts/{charts[sec.key].file_name})\n")
        else:
            parts.append(f"_{md(sentence(sec.empty))}._\n")
        if sec.text:
            parts.append(md(sec.text) + "\n")
        for t in sec.tables:
            if sec.key in charts or not t.frame.is_empty():
                parts += [f"### {md(t.title)}\n", t.markdown()]
    return "\n".join(parts)


def html_page(
    *, title: str, facts: list[Table], sections: list[Section], charts: dict[str, ChartFile],
    generated: str,
) -> str:
    """The self-contained HTML report (inline CSS, inline base64 SVG or PNG charts, no scripts)."""
    body = [f"<h1>{html.escape(title)}</h1>", f"<p class='muted'>{html.escape(generated)}</p>"]
    toc = " ".join(f"<a href='#{s.key}'>{html.escape(s.title)}</a>" for s in sections)
    body.append(f"<nav>{toc}</nav>")
    for t in facts:
        body += [f"<h2>{html.escape(t.title)}</h2>", t.html()]
    for sec in sections:
        body.append(f"<section id='{sec.key}'><h2>{html.escape(sec.title)}</h2>")
        if sec.key in charts:
            chart = charts[sec.key]
            data = base64.b64encode(chart.image).decode("ascii")
            body.append(
                f"<div class='chart' data-chart='{sec.key}'><img alt='{html.escape(sec.title)}' "
                f"src='data:{MEDIA_TYPES[chart.fmt]};base64,{data}'></div>"
            )
        else:
            body.append(f"<p class='empty'>{html.escape(sentence(sec.empty))}.</p>")
        if sec.text:
            body.append(f"<p>{html.escape(sec.text)}</p>")
        for t in sec.tables:
            if sec.key in charts or not t.frame.is_empty():
                body += [f"<h3>{html.escape(t.title)}</h3>", t.html()]
        body.append("</section>")
    return page(title, "\n".join(body))


def page(title: str, body: str, *, head: str = "") -> str:
    """A complete HTML document with the report styles."""
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>{CSS}</style>{head}</head>"
        f"<body><main>\n{body}\n</main></body></html>\n"
    )


def sentence(text: str) -> str:
    """``text`` with its first letter in upper case (the rest untouched)."""
    return text[:1].upper() + text[1:]
