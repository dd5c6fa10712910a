"""A site rebuilt only where it changed: run pages whose inputs did not change are kept.

``tracewh report --site PATH`` over a site it wrote before builds again only the run pages
whose inputs changed; the others are kept as they were (the same file: hard-linked into
the new folder, so their bytes and mtime are untouched), and so is any other page (index,
history, diff, the chart bundle) whose new bytes equal the old. The folder is still
swapped in whole (:func:`tracewh.core.outdir.output_dir`): readers see the old site or the
new one.

A run page's inputs, hashed into its *key* (:func:`page_key`):

- its ``runs`` row as :meth:`Warehouse.runs` gives it (``ingest_id`` included: a
  ``--force`` re-ingest is a new page; ``workload`` and ``unusable`` included: they come
  from the other runs);
- the same of every run of its ``job`` (the rank views compare the ranks of its job
  instance; a graph replay maps to the captures of its job);
- the page's options (``threshold_ns``);
- the code that draws it (:func:`code_digest`: every source file of tracewh and ``sql/``,
  and the versions of the libraries that compute and draw: DuckDB, Polars, vl-convert).

:data:`MANIFEST` records each page's key, its sha256, its number of charts and its row of
the index. A page is kept when its key is the recorded one and its file still has the
recorded bytes; anything else (no manifest, an unreadable one, a page edited by hand) is
built again (deleting the folder rebuilds every page).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

from tracewh.core.sqlfiles import SQL_DIR

__all__ = ["MANIFEST", "SiteCache", "code_digest", "page_key"]

#: The file in a site folder that records each page's key (written with the site).
MANIFEST = ".tracewh-site.json"
_VERSION = 1
_LIBRARIES = ("duckdb", "polars", "vl-convert-python")


def code_digest() -> str:
    """sha256 of what draws a page: tracewh's sources, ``sql/`` and the library versions."""
    h = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    for root in (package, SQL_DIR):
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".sql", ".js", ".css", ".html") and path.is_file():
                h.update(path.relative_to(root).as_posix().encode())
                h.update(path.read_bytes())
    for name in _LIBRARIES:
        try:
            h.update(f"{name}={metadata.version(name)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{name}=none".encode())
    return h.hexdigest()


def page_key(runs: pl.DataFrame, run_id: str, *, code: str, options: dict[str, Any]) -> str:
    """The key of ``run_id``'s page: its row and its job's rows of ``runs``, ``options``, ``code``."""
    row = runs.filter(pl.col("run_id") == run_id)
    job = row["job"][0] if "job" in runs.columns and row.height else None
    mates = runs.filter(pl.col("job") == job) if job is not None else row
    rows = sorted(json.dumps(r, sort_keys=True, default=str) for r in mates.iter_rows(named=True))
    text = json.dumps({"run": run_id, "rows": rows, "options": options, "code": code},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _sha256(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _keep(old: Path, new: Path) -> None:
    """``old`` (a page of the previous site) as ``new``: the same file, bytes and mtime."""
    try:
        os.link(old, new)
    except OSError:  # another file system, no hard links: a copy with its times
        shutil.copy2(old, new)


@dataclass
class SiteCache:
    """The previous site's pages (read from ``folder``) and what the new one records."""

    folder: Path
    previous: dict[str, dict[str, Any]] = field(default_factory=dict)
    pages: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, folder: Path) -> SiteCache:
        """The manifest of the site at ``folder`` (none, or unreadable: nothing is kept)."""
        previous: dict[str, dict[str, Any]] = {}
        with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
            data = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
            if data.get("version") == _VERSION and isinstance(data.get("pages"), dict):
                previous = {str(k): v for k, v in data["pages"].items() if isinstance(v, dict)}
        return cls(folder, previous)

    def reuse(self, name: str, key: str, tmp: Path) -> dict[str, Any] | None:
        """Page ``name`` of the previous site kept into ``tmp`` if its key is ``key`` and its
        bytes are the recorded ones; its recorded entry (charts, index row), else None."""
        entry = self.previous.get(name)
        old = self.folder / name
        if entry is None or entry.get("key") != key or _sha256(old) != entry.get("sha256"):
            return None
        _keep(old, tmp / name)
        self.pages[name] = entry
        return entry

    def record(self, name: str, key: str, tmp: Path, **extra: Any) -> None:
        """Record page ``name``, just written into ``tmp``, under ``key``."""
        self.pages[name] = {"key": key, "sha256": _sha256(tmp / name), **extra}

    def keep_if_same(self, name: str, tmp: Path) -> None:
        """Page ``name``, just written into ``tmp``: the previous site's file if the bytes are equal."""
        old, new = self.folder / name, tmp / name
        try:
            same = old.is_file() and not old.is_symlink() and old.read_bytes() == new.read_bytes()
        except OSError:
            return
        if same:
            new.unlink()
            _keep(old, new)

    def write(self, tmp: Path) -> None:
        """Write the new site's manifest into ``tmp``."""
        # not sort_keys: a kept index row's chart spec must come back in its own key order
        (tmp / MANIFEST).write_text(json.dumps({"version": _VERSION, "pages": self.pages},
                                               indent=1, default=str), encoding="utf-8")
