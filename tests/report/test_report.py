"""Reports, the static site and flame graphs, built on real traces from ../shared/traces."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.core.outdir import write_marker
from tracewh.report import ReportResult, build_report
from tracewh.report.flame import gpu_stacks, write_flame
from tracewh.report.site import BUNDLE, build_site

#: Small real traces: an A100 AlexNet benchmark (98 GPU ops) and a tiny add (4 GPU ops).
SMALL = (
    "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    "execution_trace__benchmark_simple_add_trace.json.gz",
)
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SVG_START = b"<svg"
REMOTE_SCRIPT = re.compile(r"<script[^>]+src=['\"]?(https?:)?//", re.IGNORECASE)


@pytest.fixture(scope="module")
def small_wh(shared_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("report") / "wh")
    result = wh.ingest([shared_traces / name for name in SMALL])
    assert all(r.outcome == "ingested" for r in result.results), result.results
    return wh


@pytest.fixture(scope="module")
def alexnet_id(small_wh: Warehouse) -> str:
    return str(small_wh.resolve_run(f"file_name={SMALL[0]}").run_id)


@pytest.fixture(scope="module")
def built(small_wh: Warehouse, alexnet_id: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ReportResult]:
    """One report, written over an earlier report of tracewh holding a stale file."""
    out = tmp_path_factory.mktemp("built") / "rep"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    write_marker(out, kind="report")  # tracewh wrote it: it may be replaced
    return out, build_report(small_wh, out, run=alexnet_id)


def test_report_files_and_charts(built: tuple[Path, ReportResult]) -> None:
    out, result = built
    for chart in ("top_kernels", "categories", "timeline", "idle", "launches"):
        assert chart in result.charts
        svg = out / "charts" / f"{chart}.svg"  # the default format
        assert svg.read_bytes().lstrip()[:4] == SVG_START and svg.stat().st_size > 2000
        assert b"<script" not in svg.read_bytes()
        assert json.loads((out / "charts" / f"{chart}.vl.json").read_text())["$schema"]
    assert not list((out / "charts").glob("*.png"))
    # alexnet has no ProfilerStep and one rank: those sections say so instead of drawing
    assert "steps" in result.empty and "ranks" in result.empty
    md = (out / "report.md").read_text()
    assert "![Top kernels](charts/top_kernels.svg)" in md
    assert "_No steps in this trace (no ProfilerStep#N; ingest with --step-marker to define them)._" in md
    assert "total (ms)" in md and "mean (µs)" in md  # tables carry units
    page = (out / "report.html").read_text()
    assert page.count("src='data:image/svg+xml;base64,") == len(result.charts)
    assert not REMOTE_SCRIPT.search(page) and "<script" not in page


def test_report_png_charts(small_wh: Warehouse, alexnet_id: str, tmp_path: Path) -> None:
    """--chart-format png: 2x PNGs in charts/, linked from report.md and embedded in report.html."""
    result = CliRunner().invoke(app, ["report", "-w", str(small_wh.root), "--run", alexnet_id,
                                      "--out", str(tmp_path / "r"), "--chart-format", "png"])
    assert result.exit_code == 0, result.output
    charts = tmp_path / "r" / "charts"
    png = charts / "top_kernels.png"
    assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 2000
    assert not list(charts.glob("*.svg"))
    assert "![Top kernels](charts/top_kernels.png)" in (tmp_path / "r" / "report.md").read_text()
    page = (tmp_path / "r" / "report.html").read_text()
    assert page.count("src='data:image/png;base64,") == len(list(charts.glob("*.png"))) > 0
    bad = CliRunner().invoke(app, ["report", "-w", str(small_wh.root), "--out",
                                   str(tmp_path / "bad"), "--chart-format", "jpeg"])
    assert bad.exit_code == 2 and "--chart-format must be one of svg, png" in bad.output
    assert not (tmp_path / "bad").exists()


def test_chart_formats_declared_once() -> None:
    from tracewh.cli.report_cmds import CHART_FORMATS
    from tracewh.report.render import CHART_FORMATS as RENDERED

    assert CHART_FORMATS == RENDERED


def test_report_replaces_atomically(built: tuple[Path, ReportResult]) -> None:
    out, _ = built
    assert not (out / "stale.txt").exists() and (out / "report.html").exists()
    assert sorted(p.name for p in out.parent.iterdir()) == ["rep"]  # no temporary left behind


def test_report_cli(small_wh: Warehouse, alexnet_id: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["report", "-w", str(small_wh.root), "--run", alexnet_id,
                                      "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "charts" in result.output and "no data for: steps, critical_path, ranks" in result.output
    assert (tmp_path / "r" / "report.html").exists()


@pytest.mark.slow
def test_report_cli_site_of_every_run(small_wh: Warehouse, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["report", "-w", str(small_wh.root), "--site", str(tmp_path / "s")])
    assert result.exit_code == 0, result.output
    site = tmp_path / "s"
    runs = small_wh.runs()["run_id"].to_list()
    pages = ["index.html", "history.html", "diff.html", *(f"run-{r}.html" for r in runs)]
    for name in pages:
        text = (site / name).read_text()
        assert f"<script src='{BUNDLE}'></script>" in text
        assert not REMOTE_SCRIPT.search(text)
    assert (site / BUNDLE).stat().st_size > 100_000
    assert "vegaEmbed" in (site / BUNDLE).read_text()
    run_page = (site / f"run-{runs[0]}.html").read_text()
    assert run_page.count("class='chart'") >= 3


def test_a_chart_process_given_to_the_report_stays_the_callers(
    small_wh: Warehouse, alexnet_id: str, tmp_path: Path
) -> None:
    from tracewh.report.render_process import RenderProcess

    with RenderProcess("svg") as child:
        result = build_report(small_wh, tmp_path / "r", run=alexnet_id, renderer=child)
        assert result.charts
        # still the caller's: it draws a chart after the report
        again = child.submit("again", {"data": {"values": [{"a": 1}]}, "mark": "bar",
                                       "encoding": {"x": {"field": "a", "type": "quantitative"}}})
        assert again.result().startswith(b"<svg")


def test_a_refused_output_folder_starts_no_chart_process(
    small_wh: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tracewh.report.render_process as rp

    started: list[object] = []
    monkeypatch.setattr(rp.RenderProcess, "__init__", lambda self, *a: started.append(a))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("not tracewh's")
    result = CliRunner().invoke(app, ["report", "-w", str(small_wh.root), "--out", str(tmp_path / "mine")])
    assert result.exit_code != 0 and started == []
    assert (tmp_path / "mine" / "notes.txt").read_text() == "not tracewh's"


def test_the_site_falls_back_to_each_runs_roofline(
    small_wh: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tracewh.core.errors import QueryError
    from tracewh.report.source import collect_rooflines

    refs = [small_wh.resolve_run(r) for r in small_wh.runs()["run_id"].to_list()]
    batch = collect_rooflines(small_wh, refs)

    def failing(runs: object) -> None:
        raise QueryError("SELECT * FROM roofline_runs($ids)", "Out of Memory Error: test")

    monkeypatch.setattr(small_wh, "roofline_runs", failing)
    one_by_one = collect_rooflines(small_wh, refs)
    assert list(one_by_one) == list(batch) == [r.run_id for r in refs]
    for run_id, frame in batch.items():
        other = one_by_one[run_id]
        assert frame is not None and other is not None and frame.equals(other)


@pytest.mark.slow
def test_site_pages_are_the_same_whatever_the_batches(
    small_wh: Warehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tracewh.report.site as site

    build_site(small_wh, tmp_path / "a")
    monkeypatch.setattr(site, "ROOFLINE_BATCH", 1)  # a roofline query a run, one page ahead
    monkeypatch.setattr(site, "PAGES_AHEAD", 1)
    build_site(small_wh, tmp_path / "b")
    pages = sorted(p.name for p in (tmp_path / "a").glob("run-*.html"))
    assert len(pages) == small_wh.runs().height >= 2
    assert pages == sorted(p.name for p in (tmp_path / "b").glob("run-*.html"))
    for name in pages:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_report_needs_an_output(small_wh: Warehouse) -> None:
    result = CliRunner().invoke(app, ["report", "-w", str(small_wh.root)])
    assert result.exit_code == 2 and "--out" in result.output


def test_site_single_run_has_no_diff(small_wh: Warehouse, alexnet_id: str, tmp_path: Path) -> None:
    built = build_site(small_wh, tmp_path / "s", runs=[alexnet_id])
    assert len(built.pages) == 4
    assert "nothing to compare" in (tmp_path / "s" / "diff.html").read_text()


def test_flame_folded_and_speedscope(small_wh: Warehouse, alexnet_id: str, tmp_path: Path) -> None:
    total = small_wh.sql("SELECT sum(dur_ns) FROM gpu_ops WHERE run_id = ?", [alexnet_id]).item()
    folded = write_flame(small_wh, alexnet_id, tmp_path / "g.folded")
    weights = 0
    for line in folded.read_text().splitlines():
        stack, _, weight = line.rpartition(" ")
        frames = stack.split(";")
        assert len(frames) >= 2 and all(frames)
        weights += int(weight)
    assert weights == total  # every GPU ns lands in exactly one stack
    assert any(";aten::" in line or line.startswith("aten::") for line in folded.read_text().splitlines())

    doc = json.loads(write_flame(small_wh, alexnet_id, tmp_path / "g.json", fmt="speedscope").read_text())
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    prof = doc["profiles"][0]
    assert prof["type"] == "sampled" and prof["unit"] == "nanoseconds"
    assert len(prof["samples"]) == len(prof["weights"]) and sum(prof["weights"]) == total
    n_frames = len(doc["shared"]["frames"])
    assert all(0 <= i < n_frames for s in prof["samples"] for i in s)
    assert sum(gpu_stacks(small_wh, alexnet_id).values()) == total


def test_flame_cli_rejects_unknown_format(small_wh: Warehouse, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["flame", "latest", "-w", str(small_wh.root), "--out",
                                      str(tmp_path / "x"), "--format", "svg"])
    assert result.exit_code == 2 and "folded" in result.output


def test_every_chart_spec_is_valid_vega_lite(small_wh: Warehouse, alexnet_id: str) -> None:
    """Reports write their specs unchecked: the charts they build validate against the Vega-Lite schema here."""
    from tracewh.report import render
    from tracewh.report.memory_section import collect_memory, memory_section
    from tracewh.report.sections import history_sections, run_sections
    from tracewh.report.source import collect_history, collect_run

    with small_wh.session():
        sections = run_sections(collect_run(small_wh, alexnet_id))
        sections.append(memory_section(collect_memory(small_wh, alexnet_id)))
        sections += history_sections(collect_history(small_wh, since=None, run=alexnet_id))
    charts = [s for s in sections if s.chart is not None]
    assert len(charts) >= 5
    for sec in charts:
        assert render.spec(sec.chart, validate=True) == render.spec(sec.chart), sec.key
        # no label is cut by measuring it (render.LABELS_UNMEASURED): only the config's two
        assert json.dumps(render.spec(sec.chart)).count('"labelLimit"') == 2, sec.key
