"""Device memory of one run: the peak, who holds it, per step, leaks and a timeline.

Every number comes from the table macros of ``sql/65_memory.sql`` over the
profiler's ``[memory]`` events (``profile_memory=True``); this module picks the
macro of a view, restricts the tables to the run's partition and filters devices.
Definitions (allocated vs reserved, how frees are paired with allocations, what
happens to memory allocated before the trace began) are in that file's header
and in docs/concepts/memory.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import duckdb

from tracewh.core.errors import QueryError, UsageError
from tracewh.ingest.memory import retry_on_oom, set_limit
from tracewh.query.fetch import query_frame
from tracewh.query.options import MemoryOptions
from tracewh.query.udfs import with_functions

if TYPE_CHECKING:  # Polars is imported where a frame is filtered (not by `import tracewh.cli`)
    import polars as pl

    from tracewh.query.runsel import Catalog, RunSelector

#: ``tracewh memory --view`` choices and the macro each one reads.
VIEWS: dict[str, str] = {
    "summary": "memory_summary",
    "peak": "memory_peak_holders",
    "modules": "memory_peak_holders",
    "allocations": "memory_peak_allocations",
    "steps": "memory_steps",
    "leaks": "memory_leak_check",
    "timeline": "memory_timeline",
}
#: Views whose rows are ranked per device (``top`` keeps the N largest of each device).
RANKED: frozenset[str] = frozenset({"peak", "modules", "allocations"})
#: Rows per device of a ranked view when no ``top`` is given.
DEFAULT_TOP = 20
#: DuckDB memory limit of a memory query (bytes); DuckDB spills beyond it, and a query that
#: still runs out runs again under a doubled limit, up to a quarter of RAM (at most 4 GiB).
QUERY_MEMORY_LIMIT = 256 << 20


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
        import polars as pl

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
    wh: Catalog,
    run: RunSelector = "latest",
    *,
    view: str = MemoryOptions.view,
    device: str | None = MemoryOptions.device,
    top: int | None = MemoryOptions.top,
    buckets: int = MemoryOptions.buckets,
    memory_limit: int = QUERY_MEMORY_LIMIT,
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
        the peak is made of), ``peak`` (the live set at each device's peak by module path
        and CPU operator, plus the memory allocated before the trace), ``modules`` (the
        same by module path alone), ``allocations`` (the largest
        allocations live at the peak, with operator, size, age and lifetime), ``steps``
        (per ProfilerStep: opening, peak and closing allocated, growth), ``leaks`` (per
        device: does the per-step peak rise steadily?) or ``timeline`` (allocated and
        reserved over time in ``buckets`` buckets).
    device
        Keep only these devices (see :class:`DeviceFilter`).
    top
        ``peak``, ``modules`` and ``allocations``: the N largest per device (default 20);
        other views:
        the N first rows (default all).
    buckets
        Time buckets of the ``timeline`` view.
    memory_limit
        DuckDB's memory limit for the query, in bytes: memory stays bounded whatever the
        number of events (DuckDB spills to disk beyond it; a query that cannot spill enough
        runs again under a doubled limit, up to a quarter of RAM). Inside a session (a
        report), the view runs first on the session's connection, under the session's
        limit; only one that needs more runs under this one.

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
    >>> memory(catalog, "latest", view="peak", device="gpu", top=5)  # doctest: +SKIP
    """
    if view not in VIEWS:
        raise UsageError(f"--view must be one of {', '.join(VIEWS)}, not {view!r}")
    if top is not None and top < 1:
        raise UsageError("--top must be at least 1")
    if buckets < 1:
        raise UsageError("buckets must be at least 1")
    dev = parse_device(device)
    params: dict[str, int | str] = {}
    if view == "modules":
        params["level"] = "module"
    elif view == "allocations":
        params["n"] = top or DEFAULT_TOP
    elif view == "timeline":
        params["buckets"] = buckets
    df = _macro(wh, VIEWS[view], run, params, memory_limit=memory_limit)
    if dev is not None and not df.is_empty():
        kept = df.filter(dev.expr())
        if kept.is_empty():
            names = ", ".join(sorted(set(df["device_name"].drop_nulls().to_list())))
            raise UsageError(f"--device {device!r} matches no device of this view (devices: {names})")
        df = kept
    if view in ("peak", "modules"):
        import polars as pl

        df = df.filter(pl.col("rank") <= (top or DEFAULT_TOP))
        if view == "modules":
            df = df.drop("op_name")
    elif view not in RANKED and top is not None:
        df = df.head(top)
    return df


def _macro(
    wh: Catalog, name: str, run: RunSelector, params: dict[str, int | str], *, memory_limit: int
) -> pl.DataFrame:
    """``SELECT * FROM name(run_id, ...)`` over the run's partition, under ``memory_limit``
    (inside a session: under the session's limit first)."""
    ref = wh.resolve_run(run)
    if wh.in_session:
        # a session's queries (a report's) share its database and its memory limit (the
        # user's, 2GB by default): a database of its own here cost ~0.05 s to open; only a
        # view that needs more than the session's limit runs again below, under its own
        try:
            return wh.call(name, ref.run_id, days=[ref.day], **params)
        except QueryError as exc:
            if "out of memory" not in str(exc).lower():
                raise
    named = "".join(f", {k} := ${k}" for k in params)
    query = f"SELECT * FROM {name}($run{named})"
    # inside a session (a report): one connection for all of them, re-pointed per day
    with wh.connection(days=[ref.day], query=query) as con:
        try:
            set_limit(con, memory_limit)

            def step() -> Any:
                return with_functions(con, lambda: query_frame(con, query, {"run": ref.run_id, **params}))

            frame, _ = retry_on_oom(con, step, memory_limit)
            result: pl.DataFrame = frame
            return result
        except duckdb.Error as exc:
            text = str(exc).strip().splitlines()
            raise QueryError(query, text[0] if text else type(exc).__name__) from exc


__all__ = ["DEFAULT_TOP", "QUERY_MEMORY_LIMIT", "RANKED", "VIEWS", "DeviceFilter", "memory", "parse_device"]
