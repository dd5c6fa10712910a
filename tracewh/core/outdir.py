"""Safe output folders: tracewh writes a folder only where it destroys nothing.

Every command that writes a folder (``report --out``, ``report --site``, ``capture --out``)
goes through :func:`check_output_dir` before it computes anything, and the report writers
build their folder with :func:`output_dir`, which checks again just before the swap. A folder
is accepted when it

- does not exist yet (it is created), or
- is an empty folder (not a link), or
- was written by tracewh as output of the same kind: it holds a marker file
  (:data:`MARKER`, a regular file, not a link) naming the kind and every file tracewh wrote
  there, and nothing else. A file the user added since (notes, a ``.git``) makes it refused.

Anything else (a file, a link, a folder with other content: the user's project, a warehouse)
is refused with :class:`~tracewh.core.errors.OutputFolderError` and left byte-identical: the
check happens before any write, and nothing is created beside it.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from tracewh.core.atomic import atomic_dir
from tracewh.core.errors import OutputFolderError

MARKER = ".tracewh-output.json"
"""The marker file tracewh writes into each output folder it builds (and owns)."""

_TOOL = "tracewh"


def _listing(folder: Path) -> set[str]:
    """Every entry below ``folder`` (files, links, folders), as ``/``-separated relative paths."""
    out: set[str] = set()
    for root, dirs, files in os.walk(folder, followlinks=False):
        rel = Path(root).relative_to(folder)
        for name in [*dirs, *files]:
            out.add((rel / name).as_posix())
    return out


def _marker(folder: Path) -> dict[str, object] | None:
    """The parsed marker of ``folder``, or None when it has none that tracewh could have written."""
    path = folder / MARKER
    try:
        st = path.lstat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or st.st_size > 1 << 20:
        return None
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("tool") != _TOOL:
        return None
    return data


def check_output_dir(path: str | Path, *, kind: str) -> None:
    """Raise :class:`OutputFolderError` unless tracewh may write its ``kind`` output at ``path``.

    Parameters
    ----------
    path
        The output folder asked for.
    kind
        What is written there (``report``, ``site``, ``capture``): a folder tracewh wrote as
        another kind is refused too.

    Raises
    ------
    OutputFolderError
        ``path`` is a link, not a folder, or a folder that is neither empty nor a tracewh
        ``kind`` output holding only the files tracewh wrote. Nothing was changed.
    """
    folder = Path(path)
    try:
        st = folder.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise OutputFolderError(folder, f"cannot be inspected ({exc.strerror or exc})") from exc
    if stat.S_ISLNK(st.st_mode):
        raise OutputFolderError(folder, "is a symbolic link: give the real folder or a new one")
    if not stat.S_ISDIR(st.st_mode):
        raise OutputFolderError(folder, "exists and is not a folder")
    try:
        entries = _listing(folder)
    except OSError as exc:
        raise OutputFolderError(folder, f"cannot be listed ({exc.strerror or exc})") from exc
    if not entries:
        return
    marker = _marker(folder)
    if marker is None:
        raise OutputFolderError(
            folder, f"is not empty and was not written by tracewh (no {MARKER}): "
            "give a new or empty folder; nothing was changed")
    if marker.get("kind") != kind:
        raise OutputFolderError(
            folder, f"holds tracewh {marker.get('kind')!s} output, not a {kind}: "
            "give a new or empty folder; nothing was changed")
    owned = marker.get("files")
    known = {str(f) for f in owned} if isinstance(owned, list) else set()
    extra = sorted(entries - known - {MARKER})
    if extra:
        shown = ", ".join(extra[:3]) + (f" (+{len(extra) - 3} more)" if len(extra) > 3 else "")
        raise OutputFolderError(
            folder, f"holds files tracewh did not write ({shown}): move them away or give "
            "another folder; nothing was changed")


def write_marker(folder: Path, *, kind: str) -> None:
    """Record in ``folder`` that tracewh wrote it as ``kind`` output, with every entry it holds."""
    entries = sorted(_listing(folder) - {MARKER})
    (folder / MARKER).write_text(
        json.dumps({"tool": _TOOL, "kind": kind, "files": entries}, indent=1), encoding="utf-8")


@contextlib.contextmanager
def output_dir(path: str | Path, *, kind: str) -> Iterator[Path]:
    """Build ``kind`` output in a temporary folder and swap it in at ``path``, safely.

    :func:`check_output_dir` runs before the block and again just before the swap (the
    folder may have changed while the output was built); the marker is written last.
    On refusal or error the temporary folder is removed and ``path`` is left as it was.

    Yields
    ------
    Path
        An empty folder to fill.
    """
    folder = Path(path)
    check_output_dir(folder, kind=kind)

    def recheck(tmp: Path) -> None:
        write_marker(tmp, kind=kind)
        check_output_dir(folder, kind=kind)

    with atomic_dir(folder, before_swap=recheck) as tmp:
        yield tmp
