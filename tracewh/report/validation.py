"""Altair's construction-time validation turned off while the report's chart builders run.

Chart-free: importing this module imports no chart library, so the report's modules that
gather data (and only draw on demand) can use :func:`unvalidated` without loading Altair
(~0.2 s) before their queries start.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

__all__ = ["no_validation", "unvalidated"]

_F = TypeVar("_F", bound=Callable[..., Any])


def unvalidated(build: _F) -> _F:
    """Run a chart builder with Altair's construction-time validation off.

    Altair (in its default "debug mode") validates every schema object against the
    Vega-Lite JSON schema as it is made: ~0.4 s for the inline data of a 4000-op timeline,
    most of a page's chart time. The charts are the same without it (the tests validate
    every kind of chart, ``render.spec(chart, validate=True)``).
    """

    @functools.wraps(build)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with no_validation():
            return build(*args, **kwargs)

    return cast("_F", wrapper)


_DEBUG_LOCK = threading.Lock()
_DEBUG_USERS: list[bool] = []  # one entry per builder running (any thread); [0]: the mode before


@contextlib.contextmanager
def no_validation() -> Iterator[None]:
    """Altair's debug mode off while any builder runs (threads build pages side by side):
    the first to start turns it off, the last to finish puts back what it was."""
    from altair.utils import schemapi

    with _DEBUG_LOCK:
        _DEBUG_USERS.append(schemapi.DEBUG_MODE if not _DEBUG_USERS else _DEBUG_USERS[0])
        schemapi.DEBUG_MODE = False
    try:
        yield
    finally:
        with _DEBUG_LOCK:
            before = _DEBUG_USERS.pop()
            if not _DEBUG_USERS:
                schemapi.DEBUG_MODE = before
