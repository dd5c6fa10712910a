"""How much memory a warehouse's DuckDB queries may use, and where they spill beyond it.

Every connection a :class:`~tracewh.api.Warehouse` opens (sessions, queries, reports) runs
under :class:`QuerySettings`: DuckDB's ``memory_limit`` and a ``temp_directory`` that is a
private folder of this process (made with :func:`tempfile.mkdtemp`: mode 0700, a fresh
name), never the current directory (DuckDB's own default for an in-memory database is
``./.tmp``). The folder is made on the first connection, under the system's temporary
folder or under the folder the user named, and removed with everything spilled into it
when the warehouse object is garbage-collected or the process exits
(:class:`PrivateTemp`). The settings are chosen once, by the API's keywords
(``Warehouse(root, memory_limit=..., temp_directory=...)``) or the CLI's global options
(``tracewh --memory-limit 1GB --temp-dir /scratch ...``, env ``TRACEWH_MEMORY_LIMIT`` and
``TRACEWH_TEMP_DIR``); nothing reads the environment here.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracewh.core.errors import UsageError
from tracewh.ingest.memory import parse_size

#: DuckDB's memory limit for a warehouse's queries unless told otherwise: a laptop's share.
#: A query needing more spills to the private temporary folder instead of growing the process.
DEFAULT_MEMORY_LIMIT = "2GB"

__all__ = ["DEFAULT_MEMORY_LIMIT", "PrivateTemp", "QuerySettings"]


@dataclass(frozen=True)
class QuerySettings:
    """DuckDB's memory limit and the folder its private spill folder is made in.

    Parameters
    ----------
    memory_limit
        A size DuckDB understands and tracewh checks (``"2GB"``, ``"512MiB"``).
    temp_directory
        Where the private spill folder is made (``None``: the system's temporary folder).
        The folder named is kept; the private folder made inside it is removed after.

    Raises
    ------
    UsageError
        If the memory limit is not a size or the folder exists and is not a directory.
    """

    memory_limit: str = DEFAULT_MEMORY_LIMIT
    temp_directory: str | Path | None = None

    def __post_init__(self) -> None:
        try:
            parse_size(self.memory_limit)
        except (ValueError, TypeError) as exc:
            raise UsageError(f"invalid memory limit {self.memory_limit!r}: {exc}") from exc
        if self.temp_directory is not None:
            path = Path(self.temp_directory)
            if path.exists() and not path.is_dir():
                raise UsageError(f"--temp-dir {str(path)!r} is not a directory")


class PrivateTemp:
    """A private spill folder, made on first use, removed with its owner or at exit."""

    def __init__(self, parent: str | Path | None = None) -> None:
        self._parent = None if parent is None else Path(parent)
        self._path: str | None = None
        self._lock = threading.Lock()
        self._finalizer: Any = None  # weakref.finalize of the folder

    def path(self) -> str:
        """The folder (made now on first use)."""
        with self._lock:
            if self._path is None:
                if self._parent is not None:
                    self._parent.mkdir(parents=True, exist_ok=True)
                self._path = tempfile.mkdtemp(prefix="tracewh-duckdb-", dir=self._parent)
                self._finalizer = weakref.finalize(self, shutil.rmtree, self._path, True)
            return self._path

    def remove(self) -> None:
        """Remove the folder now (a later :meth:`path` makes a new one)."""
        with self._lock:
            if self._finalizer is not None:
                self._finalizer()
            self._path, self._finalizer = None, None
