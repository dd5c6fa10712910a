"""Reports and the site tell the truth, checked in headless Chromium at 1400 and 800 px
(issue 30, items 7, 11, 12).

Two unrelated workloads (a DiT on an A100, 4 nights x 2 ranks; an SD3.5 model on an MI250X, 3
nights) in one warehouse. Expected counts come from what was written. Screenshots go to
``test-artifacts/screens/`` (gitignored), one per page and width.
"""

from __future__ import annotations

import base64
import html as html_mod
import re
import shutil
from pathlib import Path

import polars as pl
import pytest
from helpers_browser import Browser
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.report import build_report
from tracewh.report.site import build_site
from tracewh.report.tables import CELL_CHARS, Column, elide_middle, table

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "test-artifacts" / "screens"
WIDTHS = (1400, 800)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("screens")
    run = CliRunner().invoke
    for args in (
        ["synth", str(root / "dit"), "--runs", "4", "--ranks", "2", "--start", "2025-01-01", "--steps", "3",
         "--layers", "2", "--seed", "7", "--regress", "flash_fwd:+30%@2025-01-03"],
        ["synth", str(root / "sd35"), "--runs", "3", "--start", "2025-01-01", "--steps", "3", "--layers", "1",
         "--seed", "8", "--flavor", "rocm", "--model", "sd35"],
    ):
        res = run(app, args)
        assert res.exit_code == 0, res.output
    wh = Warehouse(root / "wh")
    assert wh.ingest([root / "dit", root / "sd35"]).ok
    runs = wh.runs()
    dit = runs.filter(runs["labels_json"].str.contains("dit-xl-2"))
    sd = runs.filter(runs["labels_json"].str.contains("sd35"))
    assert (dit.height, sd.height) == (8, 3)
    dit0 = dit.filter(dit["rank"] == 0).sort("start_ns", descending=True)
    a, b = dit0["run_id"][0], dit0["run_id"][1]  # report of the newest night, compared with the one before
    build_report(wh, root / "report", run=a, compare=b)
    build_site(wh, root / "site", limit=6)
    return {"wh": wh, "root": root, "a": a, "b": b, "sd": set(sd["run_id"]), "dit": set(dit["run_id"]),
            "total": runs.height}


def test_history_is_per_workload_and_says_what_it_left_out(built: dict[str, object]) -> None:
    root = built["root"]
    assert isinstance(root, Path)
    md = (root / "report" / "report.md").read_text(encoding="utf-8")
    assert "workload model=dit-xl-2" in md or "workload dit-xl-2" in md or "Runs of workload" in md
    assert re.search(r"left out: 3 run\(s\) of 1 other workload", md), md[:3000]
    for rid in built["sd"]:  # type: ignore[attr-defined]
        assert rid not in md  # no SD3.5 run in the DiT report's history
    hist = (root / "site" / "history.html").read_text(encoding="utf-8")
    assert "2 workloads, each drawn on its own" in hist


def test_comparison_reads_as_diff_and_names_devices(built: dict[str, object]) -> None:
    root, wh, a, b = built["root"], built["wh"], built["a"], built["b"]
    assert isinstance(root, Path) and isinstance(wh, Warehouse)
    md = (root / "report" / "report.md").read_text(encoding="utf-8")
    assert f"A {a} (NVIDIA A100-SXM4-80GB" in md and f"B {b} (NVIDIA A100-SXM4-80GB" in md
    assert "(deltas B − A)" in md
    diff = wh.diff(str(a), str(b), level="short_name")
    top = diff.row(0, named=True)
    # the report's first row is `tracewh diff A B`'s first row, same sign
    lines = md.split("(deltas B − A)", 1)[1].splitlines()
    header = next(line for line in lines if line.startswith("| name |"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    first = next(line for line in lines if line.startswith(f"| {top['name']} "))
    cells = [c.strip() for c in first.strip("|").split("|")]
    shown = float(cells[next(i for i, c in enumerate(cols) if c.startswith("delta_per_step"))].replace(",", ""))
    assert shown == pytest.approx(top["delta_per_step_ns"] / 1e6, abs=1e-3)  # same sign: B - A
    site_diff = (root / "site" / "diff.html").read_text(encoding="utf-8")
    assert "same workload and rank" in site_diff and "A100" in site_diff


def test_run_pages_have_roofline_and_memory(built: dict[str, object]) -> None:
    root = built["root"]
    assert isinstance(root, Path)
    page = next((root / "site").glob("run-*.html")).read_text(encoding="utf-8")
    assert "<h2>Roofline</h2>" in page and "Memory" in page
    index = (root / "site" / "index.html").read_text(encoding="utf-8")
    assert f"Showing the newest 6 of {built['total']} runs" in index
    assert "axis from 0" in index


def test_tables_trim_the_middle_and_keep_one_precision() -> None:
    name = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl_lambda>(int)"
    cut = elide_middle(name)
    assert len(cut) == CELL_CHARS and "…" in cut and cut.startswith(name[:30]) and cut.endswith(name[-30:])
    t = table("t", pl.DataFrame({"k": [name, "short"], "v": [1_500_000.0, 2_250_000.0]}),
              [Column("k", "kernel"), Column("v", "time", "ms")])
    html = t.html()
    assert f"title='{html_mod.escape(name, quote=True)}'" in html and "tablewrap" in html
    assert ">1.50<" in html and ">2.25<" in html  # one precision per column, unit in the header
    assert "time (ms)" in html


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Browser:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed")
    b = Browser(chromium, tmp_path_factory.mktemp("profile"))
    yield b  # type: ignore[misc]
    b.close()


def test_pages_fit_and_render_at_1400_and_800_px(built: dict[str, object], browser: Browser) -> None:
    root = built["root"]
    assert isinstance(root, Path)
    pages = [root / "report" / "report.html", root / "site" / "index.html", root / "site" / "history.html",
             root / "site" / "diff.html", next((root / "site").glob("run-*.html"))]
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        for path in pages:
            page = browser.page()
            try:
                page.send("Emulation.setDeviceMetricsOverride",
                          {"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
                page.goto(path.as_uri())
                if path.parent.name == "site":
                    page.wait_for("document.querySelectorAll('div.chart').length === 0 || "
                                  "document.body.getAttribute('data-charts') === 'done'", timeout=60)
                doc = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
                assert doc[0] <= doc[1], f"{path.name} at {width}px overflows: {doc}"
                bad = page.evaluate(
                    "Array.from(document.querySelectorAll('div.chart')).filter(function (d) {"
                    " return d.getAttribute('data-rendered') === 'error'; }).length")
                assert bad == 0, path.name
                assert page.errors == [], (path.name, page.errors)
                height = page.evaluate("document.documentElement.scrollHeight")
                shot = page.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                                           "clip": {"x": 0, "y": 0, "width": width,
                                                                    "height": min(int(height), 6000), "scale": 1}})
                out = SHOTS / f"{path.parent.name}-{path.stem}-{width}.png"
                out.write_bytes(base64.b64decode(shot["data"]))
                assert out.stat().st_size > 1000
            finally:
                page.close()
