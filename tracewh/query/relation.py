"""Relations: a query (or a per-run table macro) over a snapshot, run when converted.

The one way to run SQL (:class:`Relation`) and the one way to call a per-run macro
(:class:`MacroRelation`) that :class:`tracewh.api.Warehouse` hands out. Nothing runs until a
conversion: :meth:`~Relation.pl` (a Polars frame), :meth:`~Relation.arrow` (an Arrow table)
or :meth:`~Relation.rows` (plain :class:`~tracewh.query.fetch.Rows`, no Polars imported);
each conversion runs the query once, on the snapshot current then (or the open session's).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

from tracewh.query.fetch import Kind, Rows
from tracewh.query.runsel import RunRef, RunSelector
from tracewh.query.session import Session

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from tracewh.query.sqllimits import QueryLimits

__all__ = ["MacroRelation", "Relation"]


@dataclass(frozen=True)
class Relation:
    """A read-only SQL query over the warehouse's views (see :meth:`Session.fetch`).

    Examples
    --------
    >>> rel = Warehouse("wh").relation("SELECT run_id, day FROM runs")  # doctest: +SKIP
    >>> rel.pl(), rel.arrow(), rel.rows().rows                          # doctest: +SKIP
    """

    session: Session
    query: str
    params: Sequence[Any] | Mapping[str, Any] | None = None
    days: Collection[date] | None = None
    since: date | None = None
    unrestricted: bool = False
    limits: QueryLimits | None = None
    #: Set from another thread, it interrupts the running query (a cancelled request).
    stop: threading.Event | None = None

    def fetch(self, kind: Kind) -> Any:
        """Run the query; its result as ``kind`` (``polars``, ``arrow`` or ``rows``)."""
        return self.session.fetch(self.query, self.params, days=self.days, since=self.since,
                                  unrestricted=self.unrestricted, limits=self.limits, kind=kind,
                                  stop=self.stop)  # fmt: skip

    def head(self, max_rows: int) -> tuple[pl.DataFrame, bool]:
        """The first ``max_rows`` rows as a Polars frame (read no further), and whether there
        were more (what the MCP ``sql`` tool returns)."""
        from tracewh.core.errors import UsageError

        if max_rows < 1:
            raise UsageError("the row limit must be at least 1")
        out: tuple[pl.DataFrame, bool] = self.session.fetch(
            self.query, self.params, days=self.days, since=self.since,
            unrestricted=self.unrestricted, limits=self.limits, stop=self.stop, max_rows=max_rows,
        )  # fmt: skip
        return out

    def pl(self) -> pl.DataFrame:
        """The result as a :class:`polars.DataFrame`."""
        out: pl.DataFrame = self.fetch("polars")
        return out

    def arrow(self) -> pa.Table:
        """The result as a :class:`pyarrow.Table`."""
        out: pa.Table = self.fetch("arrow")
        return out

    def rows(self) -> Rows:
        """The result as plain :class:`~tracewh.query.fetch.Rows` (no Polars imported)."""
        out: Rows = self.fetch("rows")
        return out


@dataclass(frozen=True)
class MacroRelation:
    """A per-run table macro of ``sql/`` (``name(run_id, key := value, ...)``) for one run.

    The run selector is resolved and the macro run in one connection (``runs`` read once);
    :meth:`fetch` returns the resolved :class:`RunRef` with the result.
    """

    session: Session
    name: str
    run: RunSelector = "latest"
    params: Mapping[str, Any] = field(default_factory=dict)

    def fetch(self, kind: Kind) -> tuple[RunRef, Any]:
        """The resolved run and the macro's result as ``kind``."""
        return self.session.fetch_macro(self.name, self.run, self.params, kind=kind)

    def pl(self) -> pl.DataFrame:
        """The result as a :class:`polars.DataFrame`."""
        out: pl.DataFrame = self.fetch("polars")[1]
        return out

    def arrow(self) -> pa.Table:
        """The result as a :class:`pyarrow.Table`."""
        out: pa.Table = self.fetch("arrow")[1]
        return out

    def rows(self) -> Rows:
        """The result as plain :class:`~tracewh.query.fetch.Rows` (no Polars imported)."""
        out: Rows = self.fetch("rows")[1]
        return out
