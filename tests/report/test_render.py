"""The site's JavaScript bundle is built once per vl-convert version and kept privately."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tracewh.report import render


def test_the_bundle_is_cached_privately(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls: list[int] = []

    def build(_snippet: object) -> str:
        calls.append(1)
        return "window.vegaEmbed = function () {};"

    monkeypatch.setattr(render.vlc, "javascript_bundle", build)
    first = render.javascript_bundle()
    assert render.javascript_bundle() == first and len(calls) == 1  # the second from the cache
    path = render._bundle_cache()
    assert path is not None and path.parent == tmp_path / "tracewh"
    assert path.read_text(encoding="utf-8") == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    # a cached file someone else could have written is not used, and is written again
    path.write_text("alert('planted')", encoding="utf-8")
    os.chmod(path, 0o666)
    assert render.javascript_bundle() == first and len(calls) == 2


def test_without_a_private_cache_the_bundle_is_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    (shared / "tracewh").mkdir(parents=True)
    os.chmod(shared / "tracewh", 0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared))
    monkeypatch.setattr(render, "cache_folder", lambda: None)
    monkeypatch.setattr(render.vlc, "javascript_bundle", lambda _s: "bundle")
    assert render.javascript_bundle() == "bundle"
    assert not list((shared / "tracewh").iterdir())
