"""Signals stop a command the way Ctrl-C does: unwinding, cleaning up, one line.

By default SIGTERM and SIGHUP end Python at once: no ``finally`` runs, so private
temporary folders stay behind and worker processes are not stopped. Under
:func:`stop_on_signals` (every CLI command runs under it) they raise :class:`Stopped`, a
``KeyboardInterrupt``, in the main thread instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType


class Stopped(KeyboardInterrupt):
    """The process got SIGTERM or SIGHUP; raised in the main thread by :func:`stop_on_signals`.

    A ``KeyboardInterrupt``: code that stops cleanly on Ctrl-C stops the same way on it, and
    ``except Exception`` blocks let it through.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"stopped by {signal.Signals(signum).name}")


@contextlib.contextmanager
def stop_on_signals(signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGHUP)) -> Iterator[None]:
    """Within the block, ``signals`` raise :class:`Stopped` in the main thread.

    Outside the main thread (where Python cannot set handlers) this does nothing. The
    previous handlers are restored on the way out.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        raise Stopped(signum)

    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """In a child process: SIGKILL when ``parent`` goes; Ctrl-C is the parent's to handle.

    ``PR_SET_PDEATHSIG = SIGKILL`` (Linux) makes the child die with the process that started
    it, however that one ends (kill -9 included). SIGINT is ignored: Ctrl-C in a terminal
    reaches the whole process group, and the parent alone decides (a child interrupted by it
    would print a traceback). A child whose parent died before the call exits at once.
    """
    import ctypes  # here: every command imports this module, only child processes need it

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
