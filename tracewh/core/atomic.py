"""Atomic writes of output files and folders: write beside the target, then rename.

Used by every writer of user-facing output (``--out`` files of the CLI, reports, sites,
exports, flame graphs). A reader never sees a half-written file: files go to a temporary name in the
same folder and are renamed over the target (``os.replace``); a folder is built
under a temporary name and swapped in at the end. A failure removes the
temporary and leaves the previous output as it was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path


def current_umask() -> int:
    """The process's umask (read from ``/proc`` where possible, else set and restored)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_file(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it to ``path`` on success.

    Parameters
    ----------
    path
        The file to (re)place.

    Yields
    ------
    Path
        Where to write; it becomes ``path`` when the block exits without error, with the
        permissions a plain ``open()`` gives a new file (0666 less the umask, usually 0644;
        the temporary file itself is private, 0600, until then).

    Raises
    ------
    IsADirectoryError
        ``path`` is an existing folder (a file never replaces a folder).
    """
    if path.is_dir() and not path.is_symlink():
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file: nothing was written", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_dir(path: Path, *, before_swap: Callable[[Path], None] | None = None) -> Iterator[Path]:
    """Yield a fresh temporary folder beside ``path``; swap it in for ``path`` on success.

    The old folder (if any) is renamed aside, the new one renamed into place,
    then the old one removed: readers see the old or the new output, never a mix.

    Parameters
    ----------
    path
        The output folder.
    before_swap
        Called with the filled temporary folder just before the swap; what it raises
        cancels the swap (the temporary folder is removed, ``path`` left as it was).

    Yields
    ------
    Path
        An empty folder to fill.
    """
    path = path.absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    tmp.chmod(0o777 & ~current_umask())
    try:
        yield tmp
        if before_swap is not None:
            before_swap(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old: Path | None = None
    if path.exists():
        old = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.old")
        path.rename(old)
    try:
        tmp.rename(path)
    except BaseException:
        if old is not None:
            old.rename(path)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
