"""Every data file a table's log names must lie inside the table (issue 33, class 15).

The Delta protocol allows an ``add`` action to name any path: a relative one with ``..``,
an absolute path, a URL. tracewh only ever writes plain relative paths below the table, but
a log written by someone else (a copied warehouse, another machine on a shared object
store, a hand-edited commit) could name ``/home/user/.ssh/...`` or ``../../secret.parquet``:
readers (and the sandboxed ``tracewh sql``) would read it, and ``compact`` merged its rows into
the table. Locally a data file (or a ``day=`` folder) replaced by a symbolic link leads out
the same way.

:class:`TableBounds` says, for each file the log names, whether it lies inside the table:
lexically (no ``..``, no absolute path or URL escaping the table's folder), and on a local
disk also once links are resolved (each folder's real path is resolved once, and its links
listed once; a file is resolved only when it is a link itself: a table of 27,000 files is
checked with one ``scandir`` per folder, not an ``lstat`` per file). Readers (:meth:`tracewh.storage.store.Store.snapshot_live`),
``compact`` and ``verify`` refuse such a file, naming it.
"""

from __future__ import annotations

import os
import posixpath


class TableBounds:
    """Checks that the files a table's log names lie inside the table ``root``.

    Parameters
    ----------
    root
        The table's folder (local path) or URL (object store).
    remote
        Whether ``root`` is an object-store URL (checked lexically only: no links there).
    """

    def __init__(self, root: str, *, remote: bool) -> None:
        self.remote = remote
        self.root = root.rstrip("/") if remote else os.path.normpath(root)
        self._real_root = "" if remote else os.path.realpath(self.root)
        self._real_dirs: dict[str, str] = {}
        self._links: dict[str, frozenset[str]] = {}  # folder -> names of the links in it

    def problem(self, path: str) -> str | None:
        """Why ``path`` (as the reader would open it) is not a data file of the table, or None."""
        if self.remote:
            prefix = self.root + "/"
            if not path.startswith(prefix):
                return "lies outside the table"
            rest = path[len(prefix):]
            parts = rest.split("/")
            if "://" in rest or ".." in parts or "" in parts or parts[0] == "_delta_log":
                return "lies outside the table"
            return None
        norm = os.path.normpath(path)
        if not norm.startswith(self.root + os.sep):
            return "lies outside the table"
        rel = norm[len(self.root) + 1:]
        if rel.split(os.sep, 1)[0] == "_delta_log":
            return "is inside the table's log, not a data file"
        parent = os.path.dirname(norm)
        real_parent = self._real_dirs.get(parent)
        if real_parent is None:
            real_parent = self._real_dirs[parent] = os.path.realpath(parent)
        if real_parent != self._real_root and not real_parent.startswith(self._real_root + os.sep):
            return "lies outside the table (a folder on its way is a link out of it)"
        if os.path.basename(norm) in self._links_in(parent):
            real = os.path.realpath(norm)
            if not real.startswith(self._real_root + os.sep):
                return "is a link to a file outside the table"
        return None

    def _links_in(self, folder: str) -> frozenset[str]:
        """The names of the symbolic links in ``folder`` (listed once; none if unreadable)."""
        found = self._links.get(folder)
        if found is None:
            try:
                with os.scandir(folder) as entries:
                    found = frozenset(e.name for e in entries if e.is_symlink())
            except OSError:
                found = frozenset()
            self._links[folder] = found
        return found

    def relative(self, path: str) -> str:
        """``path`` relative to the table (for messages), or ``path`` itself when outside."""
        prefix = self.root + ("/" if self.remote else os.sep)
        return path[len(prefix):] if path.startswith(prefix) else path


def log_path(root: str, rel: str, *, remote: bool) -> str:
    """Where a reader opens the file an ``add`` action names (``rel``) in the table ``root``.

    Absolute paths and URLs in a log are opened as they are (``os.path.join`` semantics),
    so :class:`TableBounds` sees what a reader would read.
    """
    if "://" in rel:
        return rel.removeprefix("file://") if not remote else rel
    if remote:
        return posixpath.join(root.rstrip("/"), rel)
    return os.path.join(root, rel)
