"""A site written again is rebuilt only where it changed (issue 34, item 4).

Two tiny synthetic nights, a site of both; a second build keeps every page (same inode,
mtime and bytes); a third night ingested: its page is new, the old run pages are kept, and
the whole site is byte-identical to a site built from scratch (nothing is skipped that would
change a page). A page edited by hand, or a manifest that is not tracewh's, is built again.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest

from tracewh.api import Warehouse
from tracewh.report.site import build_site
from tracewh.report.sitecache import MANIFEST
from tracewh.synth import SynthConfig
from tracewh.synth.writer import write_history


def _nights(base: Path) -> list[Path]:
    """Three synthetic nights (one folder each, oldest first), written once."""
    root = base / "traces"
    if not root.exists():
        write_history(root, SynthConfig(steps=2, layers=1, seed=20), runs=3, start=dt.date(2025, 1, 1))
    return sorted(p for p in root.iterdir() if p.is_dir())


def _files(site: Path) -> dict[str, tuple[int, int, bytes]]:
    """Each page of ``site`` (not the marker or the manifest): (inode, mtime ns, bytes)."""
    out = {}
    for path in sorted(site.rglob("*")):
        if path.is_file() and path.name not in (MANIFEST, ".tracewh-output.json"):
            st = path.stat()
            out[path.relative_to(site).as_posix()] = (st.st_ino, st.st_mtime_ns, path.read_bytes())
    return out


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    base = tmp_path_factory.mktemp("sitecache")
    warehouse = Warehouse(base / "wh")
    assert warehouse.ingest(_nights(base)[:2]).ok
    return warehouse


def test_unchanged_pages_are_kept_and_a_new_run_adds_its_page(wh: Warehouse, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_site(wh, site)
    first = _files(site)
    runs = wh.runs()["run_id"].to_list()
    assert {f"run-{r}.html" for r in runs} <= set(first)

    build_site(wh, site)  # nothing changed: every page is the same file
    assert _files(site) == first

    assert wh.ingest(_nights(Path(wh.root).parent)[2:]).ok
    new = wh.runs()["run_id"].to_list()[0]
    result = build_site(wh, site)
    after = _files(site)
    for r in runs:  # the old runs' pages: untouched
        assert after[f"run-{r}.html"] == first[f"run-{r}.html"]
    assert f"run-{new}.html" in after and f"run-{new}.html" not in first
    assert after["index.html"][2] != first["index.html"][2]  # lists the new run
    assert result.charts > 0

    fresh = tmp_path / "fresh"  # the same site built from scratch: the same bytes
    assert build_site(wh, fresh).charts == result.charts
    assert {k: v[2] for k, v in _files(fresh).items()} == {k: v[2] for k, v in after.items()}


@pytest.mark.slow  # ~10-30 s: make test-all (the default suite's 8-minute budget)
def test_an_edited_page_or_a_foreign_manifest_is_built_again(wh: Warehouse, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build_site(wh, site)
    run = wh.runs()["run_id"].to_list()[-1]
    page = site / f"run-{run}.html"
    original = page.read_bytes()
    page.write_bytes(original + b"<!-- edited -->")
    build_site(wh, site)
    assert page.read_bytes() == original

    manifest = json.loads((site / MANIFEST).read_text())
    assert manifest["pages"][page.name]["sha256"]
    (site / MANIFEST).write_text(json.dumps({"version": 0, "pages": manifest["pages"]}))
    ino = page.stat().st_ino
    build_site(wh, site)
    assert page.stat().st_ino != ino and page.read_bytes() == original
    assert os.path.exists(site / MANIFEST)
