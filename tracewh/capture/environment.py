"""The process a capture runs in: its version, device and host labels, and a quiet stderr."""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import sys
from collections.abc import Iterator
from typing import Any

from tracewh import __version__
from tracewh.capture.options import LabelValue

__all__ = ["environment_labels", "quiet_stderr"]


def environment_labels(torch: Any, cuda: bool) -> dict[str, LabelValue]:
    """Versions, device and host labels of this process."""
    labels: dict[str, LabelValue] = {
        "torch_version": str(torch.__version__),
        "python_version": platform.python_version(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "captured_by": f"tracewh {__version__}",
    }
    if getattr(torch.version, "cuda", None):
        labels["cuda_version"] = str(torch.version.cuda)
    if getattr(torch.version, "hip", None):
        labels["hip_version"] = str(torch.version.hip)
    if cuda:
        labels["device"] = str(torch.cuda.get_device_name(torch.cuda.current_device()))
        labels["device_count"] = int(torch.cuda.device_count())
    else:
        labels["device"] = "cpu"
    return labels


@contextlib.contextmanager
def quiet_stderr(quiet: bool) -> Iterator[None]:
    """Send fd 2 to /dev/null meanwhile (Kineto prints two lines per profiler start/stop)."""
    if not quiet:
        yield
        return
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no fd 2 to quiet
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
