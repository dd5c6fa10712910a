"""How far the ingest has read the files it is working on, from the kernel's own counters.

The ingest progress bar used to move only when a file was done, so it stood still for the
minutes a big file takes. :class:`ReadProgress` looks, on Linux, at the open file
descriptors of this process and of its child processes (the ingest workers:
``/proc/<pid>/task/<tid>/children``) that point at the files being ingested, and reads each
one's offset (``/proc/<pid>/fdinfo/<fd>``, ``pos:``). A file is read twice: once to hash
it, once to parse it; a file's progress is ``(passes done + offset / size) / 2`` of its
size, never going back. Elsewhere (no ``/proc``) it reports nothing and the bar moves per
file as before.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["ReadProgress"]

_PROC = Path("/proc")


class ReadProgress:
    """Bytes read so far of ``sizes`` (path -> size), as the ingest's two passes go.

    Parameters
    ----------
    sizes
        The files being ingested and their sizes in bytes.
    root_pid
        The process whose descendants read them (default: this one).
    """

    def __init__(self, sizes: dict[str, int], *, root_pid: int | None = None) -> None:
        self._sizes = {os.path.realpath(p): s for p, s in sizes.items()}
        self._root = root_pid or os.getpid()
        self._last: dict[str, int] = {}  # path -> offset last seen
        self._passes: dict[str, int] = {}  # path -> passes finished (offset went back)
        self._best: dict[str, int] = {}  # path -> bytes credited so far (never decreases)
        self._done: set[str] = set()

    @property
    def available(self) -> bool:
        """Whether the offsets can be read here (Linux ``/proc``)."""
        return (_PROC / str(self._root) / "fdinfo").is_dir()

    def finished(self, path: str) -> None:
        """``path`` is done: it no longer counts as in flight."""
        self._done.add(os.path.realpath(path))

    def in_flight_bytes(self) -> int:
        """Bytes credited to the files not yet finished (half per pass, capped at the size)."""
        offsets: dict[str, int] = {}
        for pid in self._pids():
            for path, pos in _open_offsets(pid, self._sizes):
                offsets[path] = max(offsets.get(path, 0), pos)
        for path, pos in offsets.items():
            if pos < self._last.get(path, 0):  # reopened: the hash pass is over
                self._passes[path] = self._passes.get(path, 0) + 1
            self._last[path] = pos
            size = self._sizes[path] or 1
            credit = min(size, (min(self._passes.get(path, 0), 1) * size + min(pos, size)) // 2)
            self._best[path] = max(self._best.get(path, 0), credit)
        return sum(v for p, v in self._best.items() if p not in self._done)

    def _pids(self) -> Iterator[int]:
        seen, todo = set(), [self._root]
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            yield pid
            todo += _children(pid)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = list((_PROC / str(pid) / "task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out += [int(x) for x in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def _open_offsets(pid: int, sizes: dict[str, int]) -> Iterable[tuple[str, int]]:
    fd_dir = _PROC / str(pid) / "fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return
    for fd in fds:
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:
            continue
        if target not in sizes:
            continue
        try:
            info = (_PROC / str(pid) / "fdinfo" / fd).read_text()
        except OSError:
            continue
        for line in info.splitlines():
            if line.startswith("pos:"):
                yield target, int(line.split()[1])
                break
