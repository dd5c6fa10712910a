"""The report sections this change touched render in headless Chromium at 1400 and 800 px:
the roofline section with the graph replays' match quality (issue 30, item 1), the history
section saying what the `--since` window left out (item 8), and the site's run page and
history page with the same lines.

Four synthetic nights of a model that replays a CUDA graph (the capture names no kernels,
so its 8 replayed ops pair by position: "paired by position only"), one rank; the report of
the newest night with `--since 1d` leaves the 2 nights before out. Screenshots go to
``test-artifacts/screens/`` (gitignored): the whole page, and the two sections alone.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import shutil
from pathlib import Path

import pytest
from helpers_browser import Browser, Page
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.synth import SynthConfig, write_history

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "test-artifacts" / "screens"
WIDTHS = (1400, 800)
START = dt.date(2025, 1, 1)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("sections")
    write_history(root / "traces", SynthConfig(steps=2, layers=1, seed=6, flavor="cuda", python=True,
                                               graph_capture=True, model="graphs"),
                  runs=4, start=START)
    assert Warehouse(root / "wh").ingest([root / "traces"], jobs=1).ok
    for args in (["--out", str(root / "report")], ["--site", str(root / "site"), "--limit", "1"]):
        res = CliRunner().invoke(app, ["report", "-w", str(root / "wh"), "--since", "1d", *args])
        assert res.exit_code == 0, res.output
        assert "left out: 2 run(s) of workload" in res.output or "--site" in args
    return root


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Browser:
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.skip("chromium is not installed")
    b = Browser(chromium, tmp_path_factory.mktemp("profile"))
    yield b  # type: ignore[misc]
    b.close()


def _shot(page: Page, out: Path, clip: dict[str, float]) -> None:
    shot = page.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                                               "clip": {**clip, "scale": 1}})
    out.write_bytes(base64.b64decode(shot["data"]))
    assert out.stat().st_size > 1000


def _section(page: Page, key: str) -> dict[str, object]:
    """The section's text and its box on the page."""
    found = page.evaluate(
        f"(function () {{ var s = document.getElementById({json.dumps(key)}); if (!s) return null;"
        " var r = s.getBoundingClientRect(); return JSON.stringify({text: s.innerText,"
        " x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height}); })()")
    assert found, f"no section {key}"
    out: dict[str, object] = json.loads(found)
    return out


def test_touched_sections_render_at_1400_and_800_px(built: Path, browser: Browser) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    run_page = next((built / "site").glob("run-*.html"))
    pages = {"report": built / "report" / "report.html", "site-run": run_page,
             "site-history": built / "site" / "history.html"}
    for width in WIDTHS:
        for name, path in pages.items():
            page = browser.page()
            try:
                page.send("Emulation.setDeviceMetricsOverride",
                          {"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": False})
                # no scrollbar: the boxes measured are those of the capture's layout
                page.send("Emulation.setScrollbarsHidden", {"hidden": True})
                page.goto(path.as_uri())
                if name.startswith("site"):
                    page.wait_for("document.querySelectorAll('div.chart').length === 0 || "
                                  "document.body.getAttribute('data-charts') === 'done'", timeout=60)
                doc = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
                assert doc[0] <= doc[1], f"{name} at {width}px overflows: {doc}"
                assert page.errors == [], (name, page.errors)
                if name != "site-history":
                    roof = _section(page, "roofline")
                    assert "paired by position only" in str(roof["text"]), roof["text"]
                    assert "match quality" in str(roof["text"])
                    _shot(page, SHOTS / f"leftovers-{name}-roofline-{width}.png",
                          {k: float(roof[k]) for k in ("x", "y", "width", "height")})  # type: ignore[arg-type]
                if name != "site-run":
                    hist = _section(page, "history")
                    assert "Left out: 2 run(s) of workload" in str(hist["text"]), hist["text"]
                    assert "--since all, or no --since, includes them" in str(hist["text"])
                    _shot(page, SHOTS / f"leftovers-{name}-history-{width}.png",
                          {k: float(hist[k]) for k in ("x", "y", "width", "height")})  # type: ignore[arg-type]
                height = page.evaluate("document.documentElement.scrollHeight")
                _shot(page, SHOTS / f"leftovers-{name}-{width}.png",
                      {"x": 0, "y": 0, "width": width, "height": min(int(height), 6000)})
            finally:
                page.close()
