"""User strings in every output format stay data (issue 33, class 6).

A real trace whose file name, labels and kernel/operator names hold raw HTML, a newline
followed by a Markdown heading, Markdown links and tables, a ``</script>`` and spreadsheet
formulas is ingested and written out as a report (Markdown + HTML), a static site (Vega
specs inside ``<script>``), a Perfetto trace and CSV. None of them is changed by the data.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_ingest import driver_env

TRACEWH = str(Path(sys.executable).with_name("tracewh"))

EVIL = [
    "<img src=x onerror=alert(1)>",
    "</script><script>alert('site')</script>",
    "<!--<script>",
    "line\n# Injected heading\n- item",
    "[click](http://evil.example/) ![i](http://evil.example/i.png)",
    "| a | b |",
    "*bold* _em_ `code` ~~s~~",
    '=HYPERLINK("http://evil.example","x")',
    "@SUM(1+1)",
    "+cmd|' /C calc'!A0",
]
FILE = "ev\nil # <i onmouseover=x>name.pt.trace.json"  # a file name is data too (newline included)


def _trace() -> dict[str, object]:
    events: list[dict[str, object]] = [
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 20_000}]
    for i, name in enumerate(EVIL):
        t = 100 + 1000 * i
        events += [
            {"ph": "X", "cat": "cpu_op", "name": f"op {name}", "pid": 1, "tid": 1, "ts": t,
             "dur": 500, "args": {"External id": i + 1}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": t + 10, "dur": 5, "args": {"correlation": i + 1, "External id": i + 1}},
            {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": t + 50,
             "dur": 100 + i, "args": {"correlation": i + 1, "stream": 7, "device": 0}},
        ]
    return {"schemaVersion": 1, "traceEvents": events}


def _tw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TRACEWH, *args], capture_output=True, text=True, env=driver_env(),
                          stdin=subprocess.DEVNULL, timeout=600)


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("escaping")
    (base / "t").mkdir()
    (base / "t" / FILE).write_text(json.dumps(_trace()))
    p = _tw("ingest", str(base / "t"), "-w", str(base / "wh"), "--label", "title=<b>x</b>\n# h",
            "--label", "note=[l](http://evil.example)")
    assert p.returncode == 0, p.stdout + p.stderr
    for args in (["report", "--out", str(base / "report")], ["report", "--site", str(base / "site")],
                 ["export", "--out", str(base / "trace.json.gz")],
                 ["kernels", "--top", "50", "--out", str(base / "kernels.csv")]):
        p = _tw(*args, "-w", str(base / "wh"))
        assert p.returncode == 0, (args, p.stderr)
    return base


def test_markdown_report_holds_no_markup_from_data(out: Path) -> None:
    md = (out / "report" / "report.md").read_text()
    lines = md.splitlines()
    headings = [ln for ln in lines if ln.startswith("#")]
    assert not any("Injected" in h for h in headings), headings
    assert not any(ln.lstrip().startswith("- item") for ln in lines)
    assert "<img" not in md and "<script" not in md and "<b>" not in md and "<!--" not in md
    assert "<i " not in md
    assert "](http://evil" not in md.replace("\\](http://evil", "")  # every link bracket escaped
    assert "&lt;img src=x onerror=alert(1)&gt;" in md  # shown, as text
    rows = [ln for ln in lines if ln.startswith("| ")]
    widths = {ln.replace("\\|", "").count("|") for ln in rows if "cudaLaunchKernel" not in ln}
    assert rows and all(w >= 2 for w in widths)  # a name's "|" never splits a cell: escaped


def test_html_report_and_site_hold_no_markup_from_data(out: Path) -> None:
    pages = [out / "report" / "report.html", *sorted((out / "site").glob("*.html"))]
    assert len(pages) >= 3
    for page in pages:
        text = page.read_text()
        assert "<img src=x" not in text and "alert('site')</script>" not in text, page
        assert "<b>x</b>" not in text and "<i onmouseover" not in text, page
        # every <script> element is tracewh's own: the bundle, the specs, the embed call
        for body in re.findall(r"<script[^>]*>(.*?)</script>", text, re.S):
            assert "<" not in body.replace("<\\/", ""), page
        for spec in re.findall(r"<script type='application/json'[^>]*>(.*?)</script>", text, re.S):
            assert json.loads(spec)  # still valid JSON: the names decode back intact


def test_perfetto_export_round_trips_every_name(out: Path) -> None:
    data = json.loads(gzip.decompress((out / "trace.json.gz").read_bytes()))
    names = {e.get("name") for e in data["traceEvents"]}
    assert set(EVIL) <= names


def test_csv_cells_never_start_a_formula(out: Path) -> None:
    rows = list(csv.DictReader(io.StringIO((out / "kernels.csv").read_text())))
    cells = [v for r in rows for v in r.values() if v]
    assert not [c for c in cells if c[0] in "=+-@\t\r" and not re.fullmatch(r"-?[\d.,]+(e-?\d+)?", c)]
    assert "'" + EVIL[7] in cells and "'" + EVIL[8] in cells
    p = _tw("sql", "SELECT name FROM kernels_by_name", "--format", "csv", "-w", str(out / "wh"))
    if p.returncode == 0:
        assert not any(ln.startswith(("=", "@", "+")) for ln in p.stdout.splitlines())
