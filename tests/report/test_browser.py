"""Open report.html and the site pages in headless Chromium, offline.

Checks: no console errors or uncaught exceptions, every chart element rendered
with a non-zero size (site charts: vega-embed finished with ``data-rendered=ok``),
and a screenshot per page under ``test-artifacts/`` (gitignored).

A copy of each page gets a probe script: first in ``<head>`` (it records
errors before the Vega bundle runs) and, after load, it writes the sizes of the
chart elements into a ``<pre id="tw-check">`` that ``--dump-dom`` prints.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tracewh.api import Warehouse
from tracewh.report import build_report
from tracewh.report.site import build_site

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
TRACES = (
    "ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
)
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
    "--disable-sync", "--disable-background-networking", "--disable-component-update",
    "--disable-default-apps", "--disable-domain-reliability", "--metrics-recording-only",
    "--no-default-browser-check", "--host-resolver-rules=MAP * ~NOTFOUND",
]
PROBE = """<script>
window.__errs = [];
window.addEventListener('error', function (e) { window.__errs.push(String(e.message)); });
(function () { var orig = console.error; console.error = function () {
  window.__errs.push(Array.prototype.join.call(arguments, ' ')); orig.apply(console, arguments); }; })();
window.addEventListener('load', function () { setTimeout(function () {
  var charts = [];
  document.querySelectorAll('div.chart').forEach(function (el) {
    var r = el.getBoundingClientRect();
    var img = el.querySelector('img');
    charts.push({id: el.id || el.getAttribute('data-chart'), w: r.width, h: r.height,
                 state: el.getAttribute('data-rendered') || (img && img.complete && img.naturalWidth > 0 ? 'ok' : null),
                 drawn: el.querySelectorAll('svg, canvas, img').length});
  });
  var pre = document.createElement('pre'); pre.id = 'tw-check';
  pre.textContent = JSON.stringify({errors: window.__errs, charts: charts});
  document.body.appendChild(pre);
}, 2000); });
</script>"""


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's chromium: installed with apt-get when missing and we are root, else skip."""
    found = shutil.which("chromium")
    if found is None and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=False, env=env, capture_output=True, timeout=600)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], check=False, env=env,
                       capture_output=True, timeout=900)
        found = shutil.which("chromium")
    if found is None:
        pytest.skip("chromium is not installed and could not be installed (needs root and apt-get)")
    return found


@pytest.fixture(scope="module")
def outputs(shared_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("browser")
    wh = Warehouse(root / "wh")
    wh.ingest([shared_traces / name for name in TRACES])
    build_report(wh, root / "report", run=f"file_name={TRACES[0]}")
    build_site(wh, root / "site")
    return root


def _probe(page: Path) -> Path:
    """A copy of ``page`` beside it with the probe script first in ``<head>``."""
    copy = page.with_name(f"probe-{page.name}")
    copy.write_text(page.read_text(encoding="utf-8").replace("<head>", "<head>" + PROBE, 1),
                    encoding="utf-8")
    return copy


def _open(chromium: str, page: Path, shot: Path) -> dict[str, object]:
    url = _probe(page).as_uri()
    dom = subprocess.run([chromium, *FLAGS, "--virtual-time-budget=15000", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120)
    match = re.search(r'<pre id="tw-check">(.*?)</pre>', dom.stdout, re.S)
    assert match, f"probe did not report for {page.name}: {dom.stderr[-2000:]}"
    shot.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([chromium, *FLAGS, "--virtual-time-budget=15000", "--window-size=1280,2400",
                    f"--screenshot={shot}", url], capture_output=True, timeout=120)
    result: dict[str, object] = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    return result


def _check(result: dict[str, object], page: str, *, at_least: int) -> None:
    assert result["errors"] == [], f"{page}: console errors {result['errors']}"
    charts = result["charts"]
    assert isinstance(charts, list) and len(charts) >= at_least, f"{page}: {charts}"
    for chart in charts:
        assert chart["state"] == "ok" and chart["drawn"] > 0, f"{page}: {chart}"
        assert chart["w"] > 0 and chart["h"] > 0, f"{page}: {chart}"


def test_report_html_renders(chromium: str, outputs: Path) -> None:
    result = _open(chromium, outputs / "report" / "report.html", ARTIFACTS / "report.png")
    _check(result, "report.html", at_least=5)
    assert (ARTIFACTS / "report.png").stat().st_size > 0


def test_site_pages_render(chromium: str, outputs: Path) -> None:
    site = outputs / "site"
    pages = sorted(p for p in site.glob("*.html") if not p.name.startswith("probe-"))
    assert len(pages) == 5  # index, history, diff, 2 runs
    for page in pages:
        result = _open(chromium, page, ARTIFACTS / f"site-{page.stem}.png")
        minimum = 3 if page.name.startswith("run-") else 0
        _check(result, page.name, at_least=minimum)
