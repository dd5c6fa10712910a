"""Open trace files safely: regular files only, never blocking on a FIFO.

A scanned directory may hold dangling symbolic links, FIFOs (named pipes),
sockets or links to devices with a trace's name. Opening a FIFO for reading
blocks until a writer appears, and reading a device never ends; so every file
tracewh reads is first classified (:func:`not_regular`) and then opened with
``O_NONBLOCK`` and checked again on the open descriptor (:func:`open_regular`),
which closes the race of a file replaced between the two.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
from pathlib import Path
from typing import IO, Any, BinaryIO

from tracewh.core.errors import TraceFormatError

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


class NotRegularFileError(TraceFormatError):
    """A path that is not a regular file (FIFO, device, socket, dangling link...).

    Parameters
    ----------
    path
        The path.
    kind
        What it is, in words (``a FIFO (named pipe)``).
    """

    def __init__(self, path: Path | str, kind: str) -> None:
        self.kind = kind
        super().__init__(path, f"not a regular file: {kind}; only trace files are read")


def _kind(mode: int) -> str:
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def not_regular(path: Path) -> str | None:
    """What ``path`` is when it is not a regular file (links followed), in words; else None."""
    try:
        st = path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            try:
                target = os.readlink(path)
            except OSError:
                target = "?"
            return f"a dangling symbolic link (to {target})"
        return "no such file or directory"
    except OSError as exc:
        if path.is_symlink():
            return f"a symbolic link that cannot be followed ({exc.strerror or exc})"
        return f"unreadable ({exc.strerror or exc})"
    if stat.S_ISREG(st.st_mode):
        return None
    kind = _kind(st.st_mode)
    return f"a symbolic link to {kind}" if path.is_symlink() else kind


def open_regular(path: Path) -> BinaryIO:
    """Open a regular file for reading; :class:`NotRegularFileError` for anything else.

    ``O_NONBLOCK`` makes the open of a FIFO return at once (a blocking open waits for
    a writer); the descriptor is then checked with ``fstat`` and set back to blocking.
    """
    kind = not_regular(path)
    if kind is not None and kind != "no such file or directory":
        raise NotRegularFileError(path, kind)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(path, _kind(mode))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class HashingFile(io.RawIOBase):
    """A file read through: the sha256 and count of every byte read from it.

    The parse hashes exactly the bytes it decompresses, so the run id can be
    checked against them (a file still being written changes under the reader).
    """

    def __init__(self, inner: IO[bytes]) -> None:
        self._inner = inner
        self.sha = hashlib.sha256()
        self.n = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self._inner.readinto(b)  # type: ignore[attr-defined]
        if n:
            self.sha.update(memoryview(b)[:n])
            self.n += n
        return int(n or 0)

    def drain(self) -> None:
        """Read (and hash) the rest of the file: bytes after the document's end count too."""
        while chunk := self._inner.read(1 << 20):
            self.sha.update(chunk)
            self.n += len(chunk)

    def close(self) -> None:
        self._inner.close()
        super().close()


def stamp(path: Path) -> tuple[int, int, int, int]:
    """What tells a file changed: size, modification time (ns), inode, device."""
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev


def check_unchanged(
    path: Path, before: tuple[int, int, int, int], sha: str, read: tuple[str | None, int]
) -> None:
    """Raise :class:`TraceFormatError` if the file changed since it was hashed.

    The run id is the hash taken before the parse; the parse hashes the bytes it
    read too, and the file's size, modification time and inode must be those
    seen before hashing: a file still being written (or replaced) fails here,
    before anything becomes visible, instead of being ingested under the id of a
    prefix of itself.
    """
    try:
        now = stamp(path)
    except OSError as exc:
        raise TraceFormatError(path, f"the file vanished while it was read ({exc.strerror or exc})") from exc
    if read[0] is not None and read[0] != sha:
        raise TraceFormatError(
            path,
            f"the file changed while it was read ({read[1]} bytes parsed, "
            f"{before[0]} hashed before): ingest it again once it is complete",
        )
    if now != before:
        what = (
            f"size {before[0]} -> {now[0]} bytes" if now[0] != before[0]
            else "replaced" if now[2:] != before[2:] else "modified, same size"
        )
        raise TraceFormatError(
            path, f"the file changed while it was read ({what}): ingest it again once it is complete"
        )
