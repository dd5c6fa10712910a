"""Device memory of one run: the peak, who holds it, per step, leaks and a timeline.

Every number comes from the table macros of ``sql/65_memory.sql`` over the
profiler's ``[memory]`` events (``profile_memory=True``); this module picks the
macro of a view, restricts the tables to the run's partition and filters devices.
Definitions (allocated vs reserved, how frees are paired with allocations, what
happens to memory allocated before the trace began) are in that file's header
and in the README's "Memory" section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from tracewh.errors import UsageError

if TYPE_CHECKING:
    from tracewh.api import Warehouse

#: ``tracewh memory --view`` choices and the macro each one reads.
VIEWS: dict[str, str] = {
    "summary": "memory_summary",
    "peak": "memory_peak_holders",
    "allocations": "memory_peak_allocations",
    "steps": "memory_steps",
    "leaks": "memory_leak_check",
    "timeline": "memory_timeline",
}
#: Views whose rows are ranked per device (``top`` keeps the N largest of each device).
RANKED: frozenset[str] = frozenset({"peak", "allocations"})
#: Rows per device of a ranked view when no ``top`` is given.
DEFAULT_TOP = 20


@dataclass(frozen=True)
class DeviceFilter:
    """Which devices to keep: a device type (``cpu``/``gpu``), a device id or a device name.

    Parameters
    ----------
    text
        What the user typed: ``cpu``, ``gpu`` (every accelerator), a Device Id such as
        ``0`` (an accelerator with that id; ``-1`` is the CPU) or a device name such as
        ``cuda:0`` or ``hip:1``.
    """

    text: str

    def expr(self) -> pl.Expr:
        """A Polars condition on the ``device_type``, ``device`` and ``device_name`` columns."""
        t = self.text.strip().lower()
        if t in ("cpu", "gpu"):
            return pl.col("device_type") == t
        try:
            n = int(t)
        except ValueError:
            return pl.col("device_name").str.to_lowercase() == t
        if n == -1:
            return pl.col("device_type") == "cpu"
        return (pl.col("device_type") == "gpu") & (pl.col("device") == n)


def parse_device(text: str | None) -> DeviceFilter | None:
    """``--device`` as typed -> a :class:`DeviceFilter` (``None``: every device).

    Raises
    ------
    UsageError
        If the text is empty.
    """
    if text is None:
        return None
    if not text.strip():
        raise UsageError("--device must be cpu, gpu, a device id (0, 1, ...) or a name such as cuda:0")
    return DeviceFilter(text)


def memory(
    wh: Warehouse,
    run: str = "latest",
    *,
    view: str = "summary",
    device: str | None = None,
    top: int | None = None,
    buckets: int = 1000,
) -> pl.DataFrame:
    """One view of a run's device memory (see ``sql/65_memory.sql``).

    Parameters
    ----------
    wh
        The warehouse.
    run
        A run selector.
    view
        ``summary`` (one row per device: peak allocated and reserved, when, counts, what
        the peak is made of), ``peak`` (the live set at each device's peak by CPU operator,
        plus the memory allocated before the trace), ``allocations`` (the largest
        allocations live at the peak, with operator, size, age and lifetime), ``steps``
        (per ProfilerStep: opening, peak and closing allocated, growth), ``leaks`` (per
        device: does the per-step peak rise steadily?) or ``timeline`` (allocated and
        reserved over time in ``buckets`` buckets).
    device
        Keep only these devices (see :class:`DeviceFilter`).
    top
        ``peak`` and ``allocations``: the N largest per device (default 20); other views:
        the N first rows (default all).
    buckets
        Time buckets of the ``timeline`` view.

    Returns
    -------
    polars.DataFrame
        The macro's rows; empty when the run has no ``[memory]`` events (or none on the
        chosen devices).

    Raises
    ------
    UsageError
        On an unknown view, a ``top`` or ``buckets`` below 1, or a ``device`` that matches
        none of the devices in the view.

    Examples
    --------
    >>> memory(Warehouse("wh"), "latest", view="peak", device="gpu", top=5)  # doctest: +SKIP
    """
    if view not in VIEWS:
        raise UsageError(f"--view must be one of {', '.join(VIEWS)}, not {view!r}")
    if top is not None and top < 1:
        raise UsageError("--top must be at least 1")
    if buckets < 1:
        raise UsageError("buckets must be at least 1")
    dev = parse_device(device)
    params: dict[str, int] = {}
    if view == "allocations":
        params["n"] = top or DEFAULT_TOP
    elif view == "timeline":
        params["buckets"] = buckets
    df = wh.macro(VIEWS[view], run, **params)
    if dev is not None and not df.is_empty():
        kept = df.filter(dev.expr())
        if kept.is_empty():
            names = ", ".join(sorted(set(df["device_name"].drop_nulls().to_list())))
            raise UsageError(f"--device {device!r} matches no device of this view (devices: {names})")
        df = kept
    if view == "peak":
        df = df.filter(pl.col("rank") <= (top or DEFAULT_TOP))
    elif view not in RANKED and top is not None:
        df = df.head(top)
    return df


__all__ = ["DEFAULT_TOP", "RANKED", "VIEWS", "DeviceFilter", "memory", "parse_device"]
