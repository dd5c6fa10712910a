"""Timing helpers shared by the benchmarks: medians, and interleaved pairs for ratios.

A ratio of two series timed one after the other moves with the load of a shared
machine; :func:`time_pairs` runs the two back to back in each round (alternating
which goes first), so a change of load hits both series alike.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable

#: Set by ``python -m bench.run --big`` (``make bench BIG=1``): the 1 GB / 2 GB tiers run too.
BIG_ENV = "TRACEWH_BENCH_BIG"


def big() -> bool:
    """Whether the big tiers (1 GB, 2 GB traces) were asked for."""
    return os.environ.get(BIG_ENV, "") not in ("", "0")


def default_sizes() -> str:
    """The trace sizes of the size-tiered benchmarks: 250 MB, plus 1 GB and 2 GB with ``--big``."""
    return "250MB,1GB,2GB" if big() else "250MB"


def once(fn: Callable[[], object]) -> float:
    """Seconds of one call of ``fn``."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def median_time(fn: Callable[[], object], repeat: int) -> float:
    """Median seconds of ``repeat`` calls of ``fn``."""
    return statistics.median(once(fn) for _ in range(repeat))


def time_pairs(
    ours: Callable[[], object], theirs: Callable[[], object], repeat: int
) -> tuple[float, float, float]:
    """``repeat`` interleaved rounds of ``ours`` and ``theirs``.

    Returns the median seconds of each and the median of the per-round
    ratios ``ours / theirs``.
    """
    t_ours: list[float] = []
    t_theirs: list[float] = []
    for i in range(repeat):
        if i % 2 == 0:
            t_ours.append(once(ours))
            t_theirs.append(once(theirs))
        else:
            t_theirs.append(once(theirs))
            t_ours.append(once(ours))
    ratios = [a / b for a, b in zip(t_ours, t_theirs, strict=True)]
    return statistics.median(t_ours), statistics.median(t_theirs), statistics.median(ratios)
