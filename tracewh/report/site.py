"""A small static site of many runs that opens from disk, with interactive Vega-Lite charts.

Layout of the output folder::

    index.html            runs, newest first, with a sparkline of step wall time each
    run-<run_id>.html     ranking, timeline, gaps, launches, steps, ranks of one run
    history.html          trends (from Warehouse.history where it exists)
    diff.html             the two newest runs compared (from Warehouse.diff where it exists)
    assets/vega.js        Vega + Vega-Lite + vega-embed (from vl-convert; no CDN)

A site written there before is rebuilt only where it changed: a run page whose inputs did
not change is kept as it was (:mod:`tracewh.report.sitecache`, which records each page's
key in ``.tracewh-site.json``).

Pages load ``assets/vega.js`` with a classic ``<script src>`` (works from
``file://``); each chart's spec sits inline in the page.
"""

from __future__ import annotations

import html
import itertools
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from tracewh.core.outdir import check_output_dir, output_dir
from tracewh.query.options import KERNEL_WAIT_THRESHOLD_NS
from tracewh.report import charts, render
from tracewh.report.document import page, sentence
from tracewh.report.memory_section import MemoryData, collect_memory, memory_section
from tracewh.report.modules_section import ModuleData, collect_modules, graph_note, modules_section
from tracewh.report.protocol import WarehouseLike, one_snapshot
from tracewh.report.sections import (
    diff_section,
    history_sections,
    run_sections,
    summary_table,
)
from tracewh.report.sitecache import SiteCache, code_digest, page_key
from tracewh.report.source import RunData, collect_diff, collect_rooflines, collect_run, run_label
from tracewh.report.tables import Section
from tracewh.report.trends import collect_history, history_window

BUNDLE = "assets/vega.js"


@dataclass(frozen=True)
class SiteResult:
    """What :func:`build_site` wrote: the folder, its pages and the number of charts."""

    folder: Path
    pages: list[Path]
    charts: int


def build_site(
    wh: WarehouseLike,
    out: str | Path,
    *,
    runs: list[str] | None = None,
    limit: int = 20,
    since: str | None = None,
    threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS,
) -> SiteResult:
    """Write the static site for ``runs`` (selectors; default: the newest ``limit`` runs).

    Parameters
    ----------
    wh
        The warehouse.
    out
        Output folder: a new or empty folder, or a site tracewh wrote there before (see
        :mod:`tracewh.core.outdir`; anything else is refused and left as it was), replaced atomically.
    runs
        Run selectors; ``None`` for the newest ``limit`` runs.
    limit
        How many runs by default.
    since
        History window passed to ``Warehouse.history`` where it exists.
    threshold_ns
        Kernel-wait threshold of the gap classification, in ns.

    Returns
    -------
    SiteResult
    """
    check_output_dir(out, kind="site")  # before any work: refuse early, change nothing
    with one_snapshot(wh):  # the pages are built in threads: one session for all of them
        return _build_site(wh, out, runs=runs, limit=limit, since=since, threshold_ns=threshold_ns)


def _build_site(
    wh: WarehouseLike, out: str | Path, *, runs: list[str] | None, limit: int, since: str | None,
    threshold_ns: int,
) -> SiteResult:
    table = wh.runs()
    every = table["run_id"].to_list()
    run_ids = list(dict.fromkeys(wh.resolve_run(s).run_id for s in runs)) if runs else every[:limit]
    folder = Path(out)
    n_charts = 0
    rows: list[dict[str, Any]] = []
    # a site written before: the run pages whose inputs did not change are kept (sitecache)
    cache = SiteCache.load(folder)
    code = code_digest()
    keys = {r: page_key(table, r, code=code, options={"threshold_ns": threshold_ns}) for r in run_ids}
    with output_dir(folder, kind="site") as tmp, ThreadPoolExecutor(PAGE_WORKERS, thread_name_prefix="tracewh-page") as pool:
        kept = {r: e for r in run_ids if (e := cache.reuse(f"run-{r}.html", keys[r], tmp)) is not None}
        # the history's queries and the run pages', side by side (DuckDB runs outside the
        # GIL; in a session each thread queries on a connection of its own)
        # one history per workload (newest run of each, at most HISTORY_WORKLOADS): runs of
        # unrelated workloads are never drawn in one series
        heads = _workload_heads(wh, run_ids)
        windows = [history_window(wh, since, run=r) for r in heads]  # from the latest run
        hists = [pool.submit(collect_history, wh, since=first, run=r, window_note=note)
                 for r, (first, note) in zip(heads, windows, strict=True)]
        todo = [r for r in run_ids if r not in kept]
        refs = {r: wh.resolve_run(r) for r in todo}  # once: each page's queries reuse it
        # every page's roofline in one query (planned once: most of a small run's roofline),
        # beside the history; submitted before the pages, so a page that waits for it never
        # holds the last free worker
        roofs = pool.submit(_rooflines, wh, [refs[r] for r in todo])
        # each page's queries in two halves, side by side (its own analyses; its graph note,
        # layers and memory): a site of one new run uses both cores too; the pages are put
        # together here, in order, as their halves come back, at most PAGES_AHEAD pages'
        # frames held at once (a site of a year of runs holds a few pages' frames, not all)
        ahead: deque[tuple[str, Future[RunData], Future[Extras]]] = deque()
        waiting = iter(todo)

        def start(run_id: str | None) -> None:
            if run_id is not None:
                ahead.append((run_id, pool.submit(collect_run, wh, refs[run_id], threshold_ns=threshold_ns,
                                                  roofline=False), pool.submit(_page_extras, wh, refs[run_id])))

        for run_id in itertools.islice(waiting, PAGES_AHEAD):
            start(run_id)
        built: dict[str, tuple[str, int, dict[str, Any]]] = {}
        while ahead:
            run_id, own, extras = ahead.popleft()
            start(next(waiting, None))
            built[run_id] = _run_page(own.result(), *extras.result(), roofline=roofs.result()[run_id])
        (tmp / "assets").mkdir()
        (tmp / BUNDLE).write_text(render.javascript_bundle(), encoding="utf-8")
        cache.keep_if_same(BUNDLE, tmp)
        pages: list[Path] = []
        for run_id in run_ids:
            name = f"run-{run_id}.html"
            if run_id in kept:
                n, row = int(kept[run_id]["charts"]), dict(kept[run_id]["row"])
            else:
                text, n, row = built[run_id]
                (tmp / name).write_text(text, encoding="utf-8")
                cache.record(name, keys[run_id], tmp, charts=n, row=row)
            n_charts += n
            pages.append(tmp / name)
            rows.append(row)
        body = [_nav(), "<h1>History</h1>"]
        if len(heads) > 1:
            body.append(f"<p>{len(heads)} workloads, each drawn on its own.</p>")
        for i, h in enumerate(hists):
            n_charts += _append_sections(body, history_sections(h.result(), prefix=f"w{i}-" if i else ""))
        (tmp / "history.html").write_text(_page("history", body), encoding="utf-8")
        body = [_nav(), "<h1>Diff</h1>"]
        pair = _diff_pair(wh, run_ids)
        if isinstance(pair, tuple):
            a, b = pair
            body.append(f"<p>The newest run and the run before it of the same workload and rank "
                        f"(workload {html.escape(_workload(wh, b))}).</p>")
            n_charts += _append_sections(body, [diff_section(
                collect_diff(wh, a, b), a, b, a_label=run_label(wh, a), b_label=run_label(wh, b))])
        else:
            body.append(f"<p class='empty'>{html.escape(pair)}</p>")
        (tmp / "diff.html").write_text(_page("diff", body), encoding="utf-8")
        n_charts += sum(1 for r in rows if r["spark"] is not None)
        (tmp / "index.html").write_text(_index(rows, total=len(every)), encoding="utf-8")
        pages += [tmp / "index.html", tmp / "history.html", tmp / "diff.html"]
        for name in ("index.html", "history.html", "diff.html"):
            cache.keep_if_same(name, tmp)
        cache.write(tmp)
    final = [folder.absolute() / p.relative_to(tmp) for p in pages]
    return SiteResult(folder.absolute(), final, n_charts)


#: Workloads drawn on the site's history page (newest first).
HISTORY_WORKLOADS = 4


def _workload_heads(wh: WarehouseLike, run_ids: list[str]) -> list[str | None]:
    """The newest shown run of each workload (at most :data:`HISTORY_WORKLOADS`)."""
    if not run_ids:
        return [None]
    runs = wh.runs()
    if "workload" not in runs.columns:
        return [run_ids[0]]
    wl = dict(zip(runs["run_id"], runs["workload"], strict=True))
    heads: dict[Any, str | None] = {}
    for r in run_ids:
        heads.setdefault(wl.get(r), r)
    return list(heads.values())[:HISTORY_WORKLOADS]


def _workload(wh: WarehouseLike, run_id: str) -> str:
    row = wh.runs(where={"run_id": run_id})
    if row.is_empty() or "workload" not in row.columns:
        return "unknown"
    return str(row["workload"][0] or "unknown")


def _diff_pair(wh: WarehouseLike, run_ids: list[str]) -> tuple[str, str] | str:
    """(A, B) for the diff page: B the newest run shown, A the newest earlier run of the same
    workload and rank (the identity `history` and `changes` use); else why there is none."""
    if not run_ids:
        return "No run: nothing to compare."
    runs = wh.runs()
    if "workload" not in runs.columns:
        return "No workload identity in this warehouse: nothing to compare."
    by_id = {r["run_id"]: r for r in runs.iter_rows(named=True)}
    b = by_id.get(run_ids[0])
    if b is None:
        return "Nothing to compare."
    for r in runs.iter_rows(named=True):  # latest first
        if (r["run_id"] != b["run_id"] and r["workload"] == b["workload"] and r["rank"] == b["rank"]
                and (r["start_ns"] or 0) <= (b["start_ns"] or 0)):
            return r["run_id"], b["run_id"]
    return (f"No earlier run of workload {b['workload']} (rank {b['rank']}) than the newest run "
            f"{b['run_id']}: nothing to compare (runs of other workloads are never compared).")


#: Threads building run pages (and the history) side by side.
PAGE_WORKERS = 2


#: Pages whose queries run ahead of the page being put together (their frames held meanwhile).
PAGES_AHEAD = 3
#: Runs whose rooflines one query computes: the macros are planned once a batch, and a batch
#: bounds the query's memory at any site size (10 real runs: the site's peak as with one query
#: a run, ~480 MB; 20 in one query: +90 MB).
ROOFLINE_BATCH = 10

#: A page's second half: the graph replays' match quality, its layers, its memory.
Extras = tuple[str, ModuleData | None, MemoryData | None]


def _rooflines(wh: WarehouseLike, refs: list[Any]) -> dict[str, pl.DataFrame | None]:
    """The rooflines of ``refs``, by run_id, :data:`ROOFLINE_BATCH` runs a query."""
    found: dict[str, pl.DataFrame | None] = {}
    for i in range(0, len(refs), ROOFLINE_BATCH):
        found.update(collect_rooflines(wh, refs[i:i + ROOFLINE_BATCH]))
    return found


def _page_extras(wh: WarehouseLike, ref: Any) -> Extras:
    """The half of a run page's queries beside its own analyses: the graph replays' match
    quality, the layers and the memory."""
    note = graph_note(wh, ref)
    return note, collect_modules(wh, ref, note=note), collect_memory(wh, ref)


def _run_page(data: RunData, note: str, modules: ModuleData | None, memory: MemoryData | None, *,
              roofline: pl.DataFrame | None) -> tuple[str, int, dict[str, Any]]:
    """A run's page from its frames (``roofline``: the run's, as the report and the CLI have it):
    its HTML, its number of charts and its row of the index."""
    run_id = data.run_id
    data.extra["graph_note"] = note  # match quality
    data.roofline = roofline
    secs = [*run_sections(data), modules_section(modules), memory_section(memory)]
    body = [_nav(), f"<h1>Run {html.escape(run_id)}</h1>", summary_table(data).html()]
    n = _append_sections(body, secs)
    spark = charts.sparkline(data.steps)
    row = {**{k: data.meta.get(k) for k in ("file_name", "day", "rank", "device_name",
                                            "n_gpu_ops", "n_steps")},
           "run_id": run_id, "spark": render.spec(spark) if spark is not None else None}
    return _page(f"run {run_id}", body), n, row


def _nav() -> str:
    return ("<nav><a href='index.html'>runs</a><a href='history.html'>history</a>"
            "<a href='diff.html'>diff</a></nav>")


def _embed(div_id: str, spec: dict[str, Any]) -> str:
    return (
        f"<div class='chart' id='{div_id}'></div>"
        f"<script type='application/json' id='{div_id}-spec'>{render.spec_json(spec)}</script>"
    )


def _append_sections(body: list[str], secs: list[Section]) -> int:
    n = 0
    for sec in secs:
        body.append(f"<section id='{sec.key}'><h2>{html.escape(sec.title)}</h2>")
        if sec.chart is not None:
            body.append(_embed(f"chart-{sec.key}", render.spec(sec.chart)))
            n += 1
        else:
            body.append(f"<p class='empty'>{html.escape(sentence(sec.empty))}.</p>")
        if sec.text:
            body.append(f"<p>{html.escape(sec.text)}</p>")
        for t in sec.tables:
            if sec.chart is not None or not t.frame.is_empty():
                body += [f"<h3>{html.escape(t.title)}</h3>", t.html()]
        body.append("</section>")
    return n


#: Renders every ``div.chart`` from its inline spec; sets ``data-rendered`` when done.
_EMBED_ALL = """
(function () {
  var divs = document.querySelectorAll('div.chart');
  var jobs = Array.prototype.map.call(divs, function (div) {
    var spec = JSON.parse(document.getElementById(div.id + '-spec').textContent);
    return window.vegaEmbed(div, spec, {actions: false, renderer: 'svg'})
      .then(function () { div.setAttribute('data-rendered', 'ok'); })
      .catch(function (err) { div.setAttribute('data-rendered', 'error');
                              div.textContent = 'chart failed: ' + err; });
  });
  Promise.all(jobs).then(function () { document.body.setAttribute('data-charts', 'done'); });
})();
"""


def _page(title: str, body: list[str]) -> str:
    head = f"<script src='{BUNDLE}'></script>"
    return page(f"tracewh: {title}", "\n".join(body) + f"<script>{_EMBED_ALL}</script>", head=head)


def _index(rows: list[dict[str, Any]], *, total: int | None = None) -> str:
    cells = []
    for i, r in enumerate(rows):
        why = "1 step: no line" if (r["n_steps"] or 0) < 2 else "no step times"
        spark = (_embed(f"spark-{i}", r["spark"]) if r["spark"] is not None
                 else f"<span class='muted'>{why}</span>")
        cells.append(
            f"<tr><td><a href='run-{r['run_id']}.html'>{html.escape(r['run_id'])}</a></td>"
            f"<td>{html.escape(str(r['file_name'] or ''))}</td><td>{html.escape(str(r['day'] or ''))}</td>"
            f"<td class='num'>{'' if r['rank'] is None else r['rank']}</td>"
            f"<td>{html.escape(str(r['device_name'] or ''))}</td>"
            f"<td class='num'>{r['n_gpu_ops'] or 0:,}</td><td class='num'>{r['n_steps'] or 0:,}</td>"
            f"<td>{spark}</td></tr>"
        )
    head = ("<tr><th>run</th><th>file</th><th>day</th><th class='num'>rank</th><th>device</th>"
            "<th class='num'>GPU ops</th><th class='num'>steps</th>"
            "<th>step wall time per step (ms, axis from 0)</th></tr>")
    body = [_nav(), "<h1>tracewh runs</h1>"]
    if total is not None and total > len(rows):
        body.append(f"<p class='note'>Showing the newest {len(rows)} of {total} runs; "
                    f"{total - len(rows)} left out (<code>tracewh report --site PATH --limit N</code> "
                    "shows more).</p>")
    body.append(f"<div class='tablewrap'><table><thead>{head}</thead><tbody>{''.join(cells)}</tbody>"
                "</table></div>")
    if not rows:
        body.append("<p class='empty'>No runs.</p>")
    return _page("runs", body)


__all__ = ["SiteResult", "build_site"]
