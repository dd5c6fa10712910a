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

from tracewh.core.textsafe import escape_control, escape_markdown

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
        digits = [_decimals(self.frame, c) for c in cols]
        lines = ["| " + " | ".join(_md(c) for c in cols) + " |"]
        lines.append("|" + "|".join("---:" if _numeric(self.frame, c) else "---" for c in cols) + "|")
        for row in self.frame.iter_rows():
            lines.append("| " + " | ".join(_md(v, d) for v, d in zip(row, digits, strict=True)) + " |")
        return "\n".join(lines) + "\n"

    def html(self) -> str:
        """The table as an HTML ``<table>`` (numbers right-aligned)."""
        if self.frame.is_empty():
            return "<p class='empty'>(no rows)</p>"
        cols = self.frame.columns
        num = [_numeric(self.frame, c) for c in cols]
        digits = [_decimals(self.frame, c) for c in cols]
        head = "".join(f"<th{_cls(n)}>{html.escape(c)}</th>" for c, n in zip(cols, num, strict=True))
        body = "".join(
            "<tr>"
            + "".join(_cell(_text(v, d), n) for v, n, d in zip(row, num, digits, strict=True))
            + "</tr>"
            for row in self.frame.iter_rows()
        )
        # a wide table scrolls in its own box: the page never overflows the window
        return (f"<div class='tablewrap'><table><thead><tr>{head}</tr></thead>"
                f"<tbody>{body}</tbody></table></div>")


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


#: Longest cell text shown whole in HTML tables; longer text is cut in the middle (kernel and
#: module names differ at both ends), the cut marked with "…" and the whole text in the
#: cell's title (shown on hover).
CELL_CHARS = 72


def elide_middle(text: str, width: int = CELL_CHARS) -> str:
    """``text`` cut in the middle to ``width`` characters, the cut marked with ``…``.

    Examples
    --------
    >>> elide_middle("GptOssForCausalLM_0/GraphModule_0/Attention_3/Linear_1", 24)
    'GptOssForCau…_3/Linear_1'
    """
    if len(text) <= width:
        return text
    keep = width - 1
    head = (keep + 1) // 2
    return text[:head] + "…" + text[len(text) - (keep - head):]


def _cell(text: str, numeric: bool) -> str:
    if len(text) <= CELL_CHARS:
        return f"<td{_cls(numeric)}>{html.escape(text)}</td>"
    return (f"<td{_cls(numeric)} title='{html.escape(text, quote=True)}'>"
            f"{html.escape(elide_middle(text))}</td>")


def _decimals(df: pl.DataFrame, col: str) -> int | None:
    """Decimals every value of a float column is shown with (one precision per column: the
    fewest, up to 3, that show each value as rounded); None for other columns."""
    if not df.schema[col].is_float():
        return None
    need = 0
    for v in df[col].drop_nulls().to_list():
        if v != v or v in (float("inf"), float("-inf")):
            continue
        text = f"{v:.3f}".rstrip("0")
        need = max(need, len(text.split(".")[1]) if "." in text else 0)
    return need


def _text(value: object, decimals: int | None = None) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if decimals is not None and value == value:
            return f"{value:,.{decimals}f}"
        return f"{value:,.3f}".rstrip("0").rstrip(".") if value % 1 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return escape_control(str(value))  # trace strings: control characters made visible


def _md(value: object, decimals: int | None = None) -> str:
    """A cell as literal Markdown (numbers as they are; text escaped: no markup, no HTML)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _text(value, decimals)
    return escape_markdown(_text(value, decimals))


@dataclass
class Section:
    """A titled part of a report: one chart (or ``None`` and the reason) and its tables."""

    key: str  # file stem of the chart, unique within a report
    title: str
    chart: Any | None  # a chart (tracewh.report.vlspec)
    empty: str = "no data"
    text: str = ""
    tables: list[Table] = field(default_factory=list)

