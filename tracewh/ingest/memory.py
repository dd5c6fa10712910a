"""DuckDB memory limits that grow when a step runs out of memory.

Ingest runs DuckDB under small memory limits (it spills to disk beyond them),
which keeps the peak RSS of the ingesting process low for ordinary traces.
Some operators cannot spill everything (a window over one huge thread, a wide
hash join), so a big enough trace can still run out: :func:`retry_on_oom`
then doubles the connection's limit, up to a quarter of the machine's memory
(at most 4 GiB), and runs the step again. Steps passed to it must be safe to
repeat (``CREATE OR REPLACE``, a file written again from its start).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any, TypeVar

import duckdb

T = TypeVar("T")

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_CAP = 4 << 30


def parse_size(text: str) -> int:
    """Bytes of a DuckDB memory size such as ``128MB`` or ``1.5GiB`` (units of 1024)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", text, flags=re.IGNORECASE)
    if m is None:
        raise ValueError(f"not a memory size: {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


def max_limit() -> int:
    """The largest limit :func:`retry_on_oom` raises to: a quarter of RAM, at most 4 GiB."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return _CAP
    return max(256 << 20, min(_CAP, ram // 4))


def set_limit(con: Any, nbytes: int) -> None:
    """Set the connection's memory limit (whole MiB; DDL takes no parameters)."""
    con.execute(f"SET memory_limit = '{max(1, nbytes >> 20)}MiB'")


def retry_on_oom(con: Any, step: Callable[[], T], limit: int) -> tuple[T, int]:
    """Run ``step``; on DuckDB running out of memory, double the limit and run it again.

    ``limit`` is the connection's current limit in bytes. Returns the step's
    result and the limit it finally ran under. Raises the last
    ``duckdb.OutOfMemoryException`` once the limit reached :func:`max_limit`.
    """
    cap = max_limit()
    while True:
        try:
            return step(), limit
        except duckdb.OutOfMemoryException:
            if limit >= cap:
                raise
            limit = min(limit * 2, cap)
            set_limit(con, limit)
