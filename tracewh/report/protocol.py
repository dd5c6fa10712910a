"""What the report layer asks of a warehouse: :class:`WarehouseLike`, and helpers over it.

The report layer sits beside ``api`` in the dependency order, so it never imports
:mod:`tracewh.api`: it takes any object with the :class:`Warehouse` methods it needs. Methods
beyond these (``history``, ``changes``, ``check``, ``diff``, ``roofline``, ...) are looked up
with ``getattr`` where a section uses them, and the section says there is no data without them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from tracewh.query.runsel import RunSelector

__all__ = ["WarehouseLike", "as_frame", "one_snapshot"]


class WarehouseLike(Protocol):
    """The :class:`tracewh.api.Warehouse` methods the report layer calls."""

    root: Path | str

    def resolve_run(self, selector: RunSelector = ...) -> Any: ...

    def runs(self, *, where: Mapping[str, str] | None = ...) -> pl.DataFrame: ...

    def scan(self, table: str, *, days: Collection[date] | None = ...) -> pl.LazyFrame: ...

    def kernels(
        self,
        run: str = ...,
        *,
        cats: Sequence[str] | None = ...,
        group_by: str = ...,
        by: str = ...,
        top: int | None = ...,
    ) -> pl.DataFrame: ...

    def gaps(self, run: str = ..., *, threshold_ns: int = ...) -> pl.DataFrame: ...

    def largest_gaps(
        self, run: str = ..., *, n: int = ..., threshold_ns: int = ...
    ) -> pl.DataFrame: ...

    def idle_breakdown(self, run: str = ..., *, threshold_ns: int = ...) -> pl.DataFrame: ...

    def launches(self, run: str = ..., *, by: str = ...) -> pl.DataFrame: ...

    def steps(self, run: str = ..., *, threshold_ns: int = ...) -> pl.DataFrame: ...

    def breakdown(self, run: str = ...) -> pl.DataFrame: ...

    def ranks(
        self, job: str | None = ..., *, view: str = ..., run: str | None = ...
    ) -> pl.DataFrame: ...

    def call(self, name: str, first: Any, /, **params: Any) -> pl.DataFrame: ...

    def sql(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] | None = ..., *,
        days: Collection[date] | None = ..., since: date | None = ...,
    ) -> pl.DataFrame: ...


@contextlib.contextmanager
def one_snapshot(wh: WarehouseLike, *, query_threads: int = 1) -> Iterator[None]:
    """Inside ``wh.session()`` (one snapshot and a connection per thread) where it has one.

    A report queries from more than one thread (``query_threads`` at once): its sessions
    must be opened by one (a query's own nested session, as ``changes`` opens, then reuses
    the outer one).
    """
    session = getattr(wh, "session", None)
    if session is None:
        yield
        return
    with session(query_threads=query_threads):
        yield


def as_frame(result: Any) -> pl.DataFrame | None:
    """``result`` (a frame, a LazyFrame, or a result with a ``frame``) as a DataFrame; else ``None``."""
    if isinstance(result, pl.DataFrame):
        return result
    if isinstance(result, pl.LazyFrame):
        return result.collect()
    frame = getattr(result, "frame", None)
    if isinstance(frame, pl.DataFrame):
        return frame
    return None
