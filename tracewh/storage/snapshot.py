"""A snapshot's live files, each table's log read on first use.

A command that reads a few tables (``runs``, ``fingerprints``, ``run_series``) should not
replay the logs of all of them: at 3,000 runs each run-child table holds thousands of
files, and listing and checking them was most of a ``tracewh runs``. :class:`LiveSnapshot`
reads ``runs`` at once and every other table when a query first needs it.

Consistency is the one rule of :mod:`tracewh.storage.store`: a run's child rows are
committed before its ``runs`` row, so a child table's log read after ``runs`` holds every
row of each run ``runs`` lists; rows of runs committed since are hidden by the views' join
on ``runs``. A table's files are read once and kept: every query of a session sees the
same files.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from datetime import date

__all__ = ["LiveFiles", "LiveSnapshot", "select_files"]

#: (file, its ``day`` partition value) of each live file of one table.
LiveFiles = list[tuple[str, str | None]]


class LiveSnapshot(Mapping[str, LiveFiles]):
    """Table name -> its live files, read by ``read(name)`` on first use (``runs`` at once).

    ``skip``: tables that count as empty (never read). ``check``: where ``read`` does not
    check that the files lie inside their table, ``check(name, paths)`` does (raising for
    the first that does not): ``snapshot[name]`` checks every file of the table,
    :meth:`checked` only those a query selects (:func:`tracewh.storage.store.select_files`).
    """

    def __init__(self, read: Callable[[str], LiveFiles], names: Sequence[str], *,
                 skip: Sequence[str] = (),
                 check: Callable[[str, Sequence[str]], None] | None = None) -> None:  # fmt: skip
        self._read = read
        self._check = check
        self._names = (["runs"] if "runs" in names else []) + [n for n in names if n != "runs"]
        self._skip = frozenset(skip)
        self._got: dict[str, LiveFiles] = {}
        self._ok: dict[str, set[str]] = {}  # files checked so far, per table
        self._days: dict[str, dict[str | None, list[tuple[int, str]]]] = {}  # see by_day
        self._lock = threading.Lock()
        if "runs" in self._names:
            self["runs"]

    def __getitem__(self, name: str) -> LiveFiles:
        found = self.entries(name)
        self.checked(name, [path for path, _ in found])
        return found

    def entries(self, name: str) -> LiveFiles:
        """The table's live files as read, not yet checked (see ``check``)."""
        if name not in self._names:
            raise KeyError(name)
        with self._lock:  # one read per table, whichever thread asks first
            if name not in self._got:
                self._got[name] = [] if name in self._skip else self._read(name)
            return self._got[name]

    def by_day(self, name: str) -> dict[str | None, list[tuple[int, str]]]:
        """The table's entries by ``day`` partition value (None: no partition), each with its
        position in the log's order: a query of a few days takes theirs without going over
        every entry (270,000 at 30,000 runs) each time (built once per table)."""
        found = self.entries(name)
        with self._lock:
            index = self._days.get(name)
            if index is None:
                index = {}
                for pos, (path, day) in enumerate(found):
                    index.setdefault(day, []).append((pos, path))
                self._days[name] = index
            return index

    def checked(self, name: str, paths: list[str]) -> list[str]:
        """``paths`` (files of table ``name``), once ``check`` found each inside the table."""
        if self._check is None:
            return paths
        with self._lock:
            ok = self._ok.setdefault(name, set())
            new = [p for p in paths if p not in ok]
            if new:
                self._check(name, new)
                ok.update(new)
        return paths

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def read(self) -> list[str]:
        """The tables whose log was read so far."""
        with self._lock:
            return [n for n in self._names if n in self._got and n not in self._skip]


def select_files(
    live: Mapping[str, list[tuple[str, str | None]]],
    run_child: Mapping[str, bool],
    *,
    days: Collection[date] | None = None,
    since: date | None = None,
    names: Collection[str] | None = None,
) -> dict[str, list[str]]:
    """The files of a snapshot (:meth:`~tracewh.storage.store.Store.snapshot_live`) that a query reads.

    ``names``: of those tables only (default: all of ``live``); a table whose files the
    restriction leaves out entirely is not looked up in ``live`` (a
    :class:`~tracewh.storage.snapshot.LiveSnapshot` then never reads its log).

    With ``days`` and/or ``since``, run-child tables keep only the files of
    those ``day`` partitions (and ``ingest_log`` none: per-run analyses never
    read it); other tables, and run-child tables without partitions, keep every file.
    """
    from tracewh.schema.plain import tables  # the schema without pyarrow (a query's start)

    plain = tables()
    # a LiveSnapshot with a check: read each table's entries unchecked and check only the
    # files selected (a plain mapping's files are taken as they are)
    entries = getattr(live, "entries", live.__getitem__)
    checked = getattr(live, "checked", lambda name, paths: paths)
    by_day = getattr(live, "by_day", None)
    restricted = days is not None or since is not None
    wanted = {d.isoformat() for d in days} if days is not None else None
    after = since.isoformat() if since is not None else None
    files: dict[str, list[str]] = {}
    for name in names if names is not None else live:
        if restricted and name == "ingest_log":
            files[name] = []
        elif not restricted or not run_child.get(name, False):
            files[name] = checked(name, [path for path, _ in entries(name)])
        elif wanted is not None and not wanted and name in plain and plain[name].partition_by:
            files[name] = []  # no day: its log need not be read (a LiveSnapshot reads it lazily)
        else:  # ISO dates compare as text in date order
            # a run-child table without partitions (run_series) is read whole (day None)
            def keep(day: str | None) -> bool:
                return day is None or ((wanted is None or day in wanted)
                                       and (after is None or day >= after))

            if by_day is not None:  # a LiveSnapshot: the chosen days' files, in log order
                groups = by_day(name)
                picked = sorted(e for day, group in groups.items() if keep(day) for e in group)
                files[name] = checked(name, [path for _, path in picked])
            else:
                files[name] = checked(name, [path for path, day in entries(name) if keep(day)])
    return files
