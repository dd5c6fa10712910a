"""The user's private cache folder (``~/.cache/tracewh``): one mechanism for every cache.

tracewh caches between commands: the prepared DuckDB catalog of the ``sql/`` views
(:func:`tracewh.query.db.connect_catalog`), the ``add`` actions of Delta checkpoints
(:mod:`tracewh.storage.checkpoints`), the plain schema (:mod:`tracewh.schema.plain`), the
staging tables' empty schema files (:mod:`tracewh.ingest.schemafiles`) and the report's chart
bundle. They decide what a query returns or an ingest writes, so a cache another local
user could write would control every result (a catalog
planted in a shared temp folder made every duration 10x smaller). A cache is
therefore used only

* in a folder of this user that no one else can enter (:func:`private_dir`:
  created 0700, an existing one must be a real folder owned by this user and is
  tightened to 0700), and
* as a regular file of this user that no one else can write (:func:`own_file`),
  written atomically and 0600 (:func:`write_private`).

Where no such folder can be had (no home, a folder of someone else), callers
work without a cache: same results, slower. ``$XDG_CACHE_HOME`` is honoured.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

__all__ = ["cache_folder", "default_cache_dir", "own_file", "private_dir", "write_private"]


def default_cache_dir() -> Path | None:
    """``$XDG_CACHE_HOME/tracewh``, else ``~/.cache/tracewh`` (None without a home)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "tracewh"
    try:
        return Path.home() / ".cache" / "tracewh"
    except RuntimeError:
        return None


def private_dir(path: Path) -> bool:
    """Whether ``path`` is (made) a folder of this user that no one else can enter.

    Created 0700 when missing; an existing one must be a real folder (not a link)
    owned by this user, and is tightened to 0700 when it is group/other accessible.
    """
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            return False
        if stat.S_IMODE(st.st_mode) & 0o077:
            os.chmod(path, 0o700)
        return stat.S_IMODE(os.lstat(path).st_mode) & 0o077 == 0
    except OSError:
        return False


def cache_folder(cache_dir: Path | None = None) -> Path | None:
    """``cache_dir`` (default :func:`default_cache_dir`) if it is private, else None."""
    folder = cache_dir if cache_dir is not None else default_cache_dir()
    if folder is None or not private_dir(folder):
        return None
    return folder


def own_file(path: Path) -> bool:
    """A regular file (not a link) of this user that no one else can write."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, mode 0600 (raises :class:`OSError`)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
