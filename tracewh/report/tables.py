"""Tables for people: chosen columns, converted to a stated unit, as Markdown or HTML.

Data keep their units in column names (``total_ns``); a :class:`Column` says
which column to show, under which header, converted how. Headers always carry
the unit (``total (ms)``).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tracewh.core.textsafe import escape_control

#: unit -> (divisor, digits, header suffix)
_UNITS: dict[str, tuple[float, int, str]] = {
    "ms": (1e6, 3, "ms"),
    "us": (1e3, 2, "µs"),
    "pct": (1.0, 1, "%"),
    "ratio_pct": (0.01, 1, "%"),
    "mb": (1e6, 2, "MB"),
    "gbps": (1.0, 2, "GB/s"),
    "x": (1.0, 2, "×"),
}


@dataclass(frozen=True)
class Column:
    """One shown column: source column, header text, unit (``ms``, ``us``, ``pct``... or None)."""

    source: str
    header: str
    unit: str | None = None


@dataclass(frozen=True)
class Table:
    """A titled table of display text (headers carry units)."""

    title: str
    frame: pl.DataFrame

    def markdown(self) -> str:
        """The table as GitHub-flavoured Markdown."""
        if self.frame.is_empty():
            return "_(no rows)_\n"
        cols = self.frame.columns
        lines = ["| " + " | ".join(_md(c) for c in cols) + " |"]
        lines.append("|" + "|".join("---:" if _numeric(self.frame, c) else "---" for c in cols) + "|")
        for row in self.frame.iter_rows():
            lines.append("| " + " | ".join(_md(v) for v in row) + " |")
        return "\n".join(lines) + "\n"

    def html(self) -> str:
        """The table as an HTML ``<table>`` (numbers right-aligned)."""
        if self.frame.is_empty():
            return "<p class='empty'>(no rows)</p>"
        cols = self.frame.columns
        num = [_numeric(self.frame, c) for c in cols]
        head = "".join(f"<th{_cls(n)}>{html.escape(c)}</th>" for c, n in zip(cols, num, strict=True))
        body = "".join(
            "<tr>"
            + "".join(f"<td{_cls(n)}>{html.escape(_text(v))}</td>" for v, n in zip(row, num, strict=True))
            + "</tr>"
            for row in self.frame.iter_rows()
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def table(title: str, df: pl.DataFrame, columns: list[Column], *, limit: int | None = 20) -> Table:
    """Select, convert and rename ``columns`` of ``df`` (missing source columns are skipped)."""
    if limit is not None:
        df = df.head(limit)
    exprs: list[pl.Expr] = []
    for col in columns:
        if col.source not in df.columns:
            continue
        expr = pl.col(col.source)
        header = col.header
        if col.unit is not None:
            div, digits, suffix = _UNITS[col.unit]
            expr = (expr.cast(pl.Float64) / div).round(digits)
            header = f"{header} ({suffix})"
        elif df.schema[col.source] == pl.List(pl.String):
            expr = expr.list.join(", ")
        exprs.append(expr.alias(header))
    return Table(title, df.select(exprs) if exprs else pl.DataFrame())


def _numeric(df: pl.DataFrame, col: str) -> bool:
    return df.schema[col].is_numeric()


def _cls(numeric: bool) -> str:
    return " class='num'" if numeric else ""


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if value % 1 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return escape_control(str(value))  # trace strings: control characters made visible


def _md(value: object) -> str:
    return _text(value).replace("|", "\\|").replace("\n", " ")


@dataclass
class Section:
    """A titled part of a report: one chart (or ``None`` and the reason) and its tables."""

    key: str  # file stem of the chart, unique within a report
    title: str
    chart: Any | None  # an Altair chart
    empty: str = "no data"
    text: str = ""
    tables: list[Table] = field(default_factory=list)


def flag_above_peak(df: pl.DataFrame, *, column: str = "pct_of_peak") -> pl.DataFrame:
    """``df`` with ``column`` as display text: one decimal, and ``! above peak`` after any
    figure over 100 % (``above_peak``), so that no screen shows it as a plain number.

    For terminal and report tables only: CSV, JSON and ``--out`` keep the number and the
    ``above_peak`` flag, and the ``note`` names the likely cause.
    """
    if column not in df.columns:
        return df
    value = pl.col(column).cast(pl.Float64).round(1).cast(pl.String)
    return df.with_columns(
        pl.when(pl.col(column) > 100).then(value + pl.lit(" ! above peak")).otherwise(value).alias(column))

