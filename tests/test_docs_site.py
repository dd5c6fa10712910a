"""The built documentation site, checked as a reader meets it.

The site is built with ``mkdocs build --strict`` into a temporary folder (any warning fails the
build), then every page is checked offline (each internal link and image lands on a file of
the site, each ``#anchor`` on an element of its page), and in headless Chromium over HTTP on
127.0.0.1 (tests/helpers_browser.py): every page loads without an error, its code blocks are
rendered (highlighted, with the copy button the theme's JavaScript adds), its images decoded,
and the search finds the pages it should. Slow (a build and ~40 page loads): `make docs-check`
and CI run it.
"""

from __future__ import annotations

import functools
import http.server
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest
from helpers_browser import Browser, Page

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


class _Refs(HTMLParser):
    """The ids of a page and the internal links and sources it refers to."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        for key in ("href", "src"):
            value = a.get(key)
            if value and not re.match(r"[a-z][a-z0-9+.-]*:", value):  # http:, mailto:, data: ...
                self.refs.append(value)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (pip install 'tracewh[docs]')")
    out = tmp_path_factory.mktemp("site") / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "WARNING" not in proc.stderr, proc.stderr[-3000:]
    return out


def _pages(site: Path) -> list[Path]:
    return sorted(p for p in site.rglob("index.html") if "assets" not in p.parts)


def test_every_internal_link_and_anchor_resolves(site: Path) -> None:
    pages = _pages(site)
    assert len(pages) >= 30
    ids: dict[Path, set[str]] = {}
    refs: dict[Path, list[str]] = {}
    for page in pages:
        parser = _Refs()
        parser.feed(page.read_text(encoding="utf-8"))
        ids[page], refs[page] = parser.ids, parser.refs
    broken = []
    for page, links in refs.items():
        for link in links:
            url = urlparse(link)
            target = (page.parent / unquote(url.path)).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{page.relative_to(site)}: {link}")
            elif url.fragment and target in ids and url.fragment not in ids[target]:
                broken.append(f"{page.relative_to(site)}: {link} (no such anchor)")
    assert not broken, broken[:20]


@pytest.fixture(scope="module")
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


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def page(chromium: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    browser = Browser(chromium, tmp_path_factory.mktemp("chromium"))
    try:
        tab = browser.page()
        yield tab
        tab.close()
    finally:
        browser.close()


_STATE = """(() => {
  const pres = [...document.querySelectorAll('.md-content pre')];
  const imgs = [...document.querySelectorAll('.md-content img')];
  return {
    title: (document.querySelector('.md-content h1') || {}).textContent || '',
    pres: pres.length,
    pres_drawn: pres.filter(p => p.getBoundingClientRect().height > 0).length,
    pres_copy: pres.filter(p => p.querySelector('.md-clipboard, .md-code__button')).length,
    highlighted: document.querySelectorAll('.md-content .highlight').length,
    imgs: imgs.length,
    imgs_decoded: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
    nav: document.querySelectorAll('.md-nav__link').length,
  };
})()"""
#: the state once the theme's script has decorated every code block (null before)
_READY = f"(() => {{ const s = {_STATE}; return s.pres === s.pres_copy ? s : null; }})()"


def test_every_page_loads_and_renders_in_chromium(site: Path, served: str, page: Page) -> None:
    problems = []
    with_code = 0
    for path in _pages(site):
        rel = path.parent.relative_to(site).as_posix()
        url = urljoin(served, "" if rel == "." else rel + "/")
        page.errors.clear()
        page.goto(url)
        state = page.wait_for(_READY, timeout=15)
        if page.errors:
            problems.append(f"{rel}: {page.errors}")
        if not state["title"].strip() or state["nav"] < 10:
            problems.append(f"{rel}: no title or navigation: {state}")
        if state["pres"] != state["pres_drawn"]:
            problems.append(f"{rel}: code blocks not drawn: {state}")
        if state["imgs"] != state["imgs_decoded"]:
            problems.append(f"{rel}: images not decoded: {state}")
        with_code += state["pres"] > 0 and state["highlighted"] > 0
    assert not problems, problems[:10]
    assert with_code >= 20


@pytest.mark.parametrize(
    ("query", "expected"),
    [("stream_gaps", "reference/sql/"), ("straggler", "concepts/figures/"),
     ("step-marker", "how-to/diffusion-steps/")],
)
def test_search_finds_the_pages(served: str, page: Page, query: str, expected: str) -> None:
    page.goto(f"{served}?q={query}")
    hrefs = page.wait_for(
        "[...document.querySelectorAll('.md-search-result__item a')].map(a => a.href)", timeout=30
    )
    assert any(expected in h for h in hrefs), hrefs[:10]
    assert not page.errors, page.errors
