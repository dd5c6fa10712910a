"""Locks, leases and staging folders of a warehouse (:class:`Locks`, a part of :class:`~tracewh.storage.store.Store`).

Local warehouses lock with ``fcntl`` in ``<root>/_locks``; object stores keep a lease object
``<root>/_leases/ingest-<id>`` fresh while an ingest lives (see :mod:`tracewh.storage.store`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tracewh.core.errors import (
    ReadOnlyWarehouseError,
    WarehouseError,
)

# deltalake and pyarrow are imported where they are used (a query command needs neither)
if TYPE_CHECKING:
    pass


#: Keys of the locks of one run or one ingest (``run-<run_id>``, ``ingest-<ingest_id>``):
#: their files are removed on release (see ``Locks._local_lock``).
REMOVABLE_LOCKS = ("run-", "ingest-")
#: :meth:`Locks.remove_stale_locks` leaves younger lock files (seconds since last taken).
STALE_LOCK_AGE_S = 60.0


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``fd`` is the file at ``path`` now (not one unlinked or replaced since)."""
    try:
        st = os.stat(path)
        mine = os.fstat(fd)
    except FileNotFoundError:
        return False
    except OSError as exc:  # a stale NFS handle: the file was removed; else cannot tell
        return exc.errno != errno.ESTALE
    return (st.st_ino, st.st_dev) == (mine.st_ino, mine.st_dev)


class Locks:
    """The locks of a :class:`~tracewh.storage.store.Store` (see the module docstring)."""

    if TYPE_CHECKING:
        def filesystem(self) -> Any: ...
        lease_s: float
        @property
        def locks_dir(self) -> Path: ...
        @property
        def remote(self) -> bool: ...
        root: Path | str
        @property
        def staging_root(self) -> Path: ...
        @property
        def tables_dir(self) -> Path: ...

    # ----------------------------------------------------------------- locks
    @contextlib.contextmanager
    def lock(self, key: str, *, blocking: bool = True, shared: bool = False) -> Iterator[bool]:
        """An advisory inter-process lock (fcntl) named ``key``.

        Yields True when held. With ``blocking=False`` yields False at once if
        another process holds it. ``shared`` locks coexist with each other and
        exclude an exclusive one (``writers``: every write takes it shared, a
        ``compact --retain-hours 0`` exclusive). The lock dies with its process
        (kill -9 safe). On an object store the lock is local to this machine; an
        ``ingest-*`` lock also holds a lease in the store, refreshed while held.
        Raises :class:`ReadOnlyWarehouseError` where the lock file cannot be made.
        """
        with self._local_lock(key, blocking=blocking, shared=shared) as held:
            if not (held and self.remote and key.startswith("ingest-")):
                yield held
                return
            with self._lease(key):
                yield True
    def check_writable(self) -> None:
        """Raise :class:`ReadOnlyWarehouseError` unless this process can write the warehouse.

        Commands that write call it first, so a read-only warehouse gets one line
        instead of failures half-way (delta-rs panics on a read-only file system).
        """
        with self._local_lock("writers", shared=True):
            pass
        if not self.remote:
            from tracewh.schema.plain import tables

            for folder in (self.tables_dir, *(self.tables_dir / n for n in tables())):
                if folder.is_dir() and not os.access(folder, os.W_OK):
                    raise ReadOnlyWarehouseError(self.root, folder, "not writable")
    def _writable_error(self, path: Path, exc: OSError) -> WarehouseError:
        if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return ReadOnlyWarehouseError(self.root, path, exc.strerror or str(exc))
        return WarehouseError(self.root, f"cannot write {path}: {exc.strerror or exc}")
    @contextlib.contextmanager
    def _local_lock(
        self, key: str, *, blocking: bool = True, shared: bool = False
    ) -> Iterator[bool]:
        path = self.locks_dir / f"{key}.lock"
        # one run's or one ingest's lock: its file is removed by whoever releases it held
        # alone, so ``_locks`` does not keep a file per run and per ingest forever; a
        # process that locked a file since unlinked (or replaced) locks the new one instead
        removable = not shared and key.startswith(REMOVABLE_LOCKS)
        mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        fd = -1
        held = False
        try:
            while True:
                try:
                    self.locks_dir.mkdir(parents=True, exist_ok=True)
                    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                except OSError as exc:
                    raise self._writable_error(path, exc) from exc
                try:
                    fcntl.flock(fd, mode | (0 if blocking else fcntl.LOCK_NB))
                except BlockingIOError:
                    break
                if removable and not _same_file(fd, path):
                    # its holder removed it on release: lock the file there now
                    stale, fd = fd, -1
                    os.close(stale)
                    continue
                held = True
                break
            if held and not shared:
                try:
                    os.ftruncate(fd, 0)
                    os.write(fd, f"{os.getpid()}\n".encode())
                except OSError:
                    pass
            yield held
        finally:
            if fd >= 0:
                if held and removable:
                    with contextlib.suppress(OSError):
                        path.unlink()  # still held: no one else holds this file now
                os.close(fd)
    def remove_stale_locks(self, *, min_age_s: float = STALE_LOCK_AGE_S) -> int:
        """Remove the lock files of runs and ingests no process holds (left by a process
        killed while holding one); how many. Each is taken first, without waiting, as
        :meth:`lock` takes it, and only when older than ``min_age_s`` (by its modification
        time, set when it was last taken): a held one is left, and a file just made by a
        process about to lock it is not taken from under it."""
        if not self.locks_dir.is_dir():
            return 0
        removed = 0
        now = time.time()
        for entry in os.scandir(self.locks_dir):
            name = entry.name
            if not (name.startswith(REMOVABLE_LOCKS) and name.endswith(".lock")):
                continue
            with contextlib.suppress(OSError):
                if now - entry.stat(follow_symlinks=False).st_mtime < min_age_s:
                    continue
            with contextlib.suppress(OSError, WarehouseError), self._local_lock(
                name.removesuffix(".lock"), blocking=False
            ) as held:
                removed += bool(held)  # released (and removed) as the block ends
        return removed
    def is_locked(self, key: str) -> bool:
        """Whether some live process holds lock ``key`` (object stores: a fresh lease).

        Takes no lock and writes nothing: works on a read-only warehouse.
        """
        if self._locked_here(key):
            return True
        return self.remote and key.startswith("ingest-") and self._lease_live(key)
    def _locked_here(self, key: str) -> bool:
        """Probe a lock file without creating it: a read-only descriptor can take flock."""
        try:
            fd = os.open(self.locks_dir / f"{key}.lock", os.O_RDONLY)
        except FileNotFoundError:
            return False  # never taken: nobody holds it
        except OSError:
            return False  # unreadable: not one of ours
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False
    def _lease_path(self, key: str) -> str:
        return f"{self.root}/_leases/{key}"
    @contextlib.contextmanager
    def _lease(self, key: str) -> Iterator[None]:
        fs = self.filesystem()
        path = self._lease_path(key)
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(self.lease_s / 4):
                with contextlib.suppress(Exception):
                    fs.pipe_file(path, f"{time.time()}".encode())

        fs.pipe_file(path, f"{time.time()}".encode())
        beat = threading.Thread(target=renew, name=f"lease-{key}", daemon=True)
        beat.start()
        try:
            yield
        finally:
            stop.set()
            beat.join()
            with contextlib.suppress(Exception):
                fs.rm_file(path)
    def _lease_live(self, key: str) -> bool:
        try:
            stamp = float(self.filesystem().cat_file(self._lease_path(key)))
        except (FileNotFoundError, ValueError):
            return False
        return time.time() - stamp < self.lease_s
    # --------------------------------------------------------------- staging
    def new_staging(self, ingest_id: str) -> Path:
        path = self.staging_root / ingest_id
        path.mkdir(parents=True, exist_ok=False)
        return path
    def stale_staging(self) -> list[Path]:
        """Staging folders whose ingest is no longer running."""
        if not self.staging_root.is_dir():
            return []
        return [
            p
            for p in sorted(self.staging_root.iterdir())
            if p.is_dir() and not self._locked_here(f"ingest-{p.name}")
        ]
    def remove_staging(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)
