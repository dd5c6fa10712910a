"""Result columns as text for people: units chosen once per table, times from one origin.

Data keep their units in their column names (``total_ns``, ``bytes``, ``gpu_idle_fraction``);
only the terminal table converts them, and its headers say to what:

- **durations** (numeric ``*_ns`` that are not timestamps, and ``*_ns_per_*`` such as
  ``mean_gpu_ns_per_call``): one unit for the whole table,
  ms or µs (µs when most duration columns stay under a millisecond), ``total (ms)``;
- **timestamps** (``ts_ns``, ``start_ns``, ``end_ns``, ``*_ts_ns``, ``*_start_ns``,
  ``*_end_ns``, but not ``a_to_b_ns`` spans such as ``launch_to_start_ns``): milliseconds
  since one origin per table, ``gap_start (+ms)``: the run's start (``runs.start_ns``) when
  the table shows one run, else the earliest timestamp of the table; with ``absolute`` (tables
  of many runs) UTC date-times instead;
- **bytes** (``bytes``, ``*_bytes``): one unit for the table (B, KB, MB or GB, 1000-based);
- **FLOP counts** (``flops``, ``*_flops``): one unit for the table (FLOP, MFLOP, GFLOP or TFLOP);
- ``*_gbps``: GB/s; ``*_fraction`` and ``*_ratio``: %; ``pct`` and ``*_pct``: already %;
- lists are joined with ``, ``; other values as they are.

Numbers keep enough decimals for about four significant digits of the column's largest value
(durations in ms down to the ns, 6 decimals). Everything here is pure: frames in, text out.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tracewh.core.textsafe import escape_control

if TYPE_CHECKING:
    import polars as pl



def cell_text(value: Any) -> str:
    """One value as one line of text: control characters written as escapes (``\\n``, ``\\x1b``).

    The single place where a cell's value becomes text in a terminal table, a title or a
    note, so a name holding a newline or a terminal escape cannot break the layout (the
    escaping itself is :func:`tracewh.core.textsafe.escape_control`, shared with the charts and
    reports: C0/C1 controls, DEL, bidi controls, separators, surrogates).
    """
    if value is None:
        return ""
    return escape_control(value if isinstance(value, str) else str(value))


def cell_len(text: str) -> int:
    """Terminal cells ``text`` takes: 2 for wide (East Asian) characters, 0 for combining ones."""
    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in text
    )


def is_timestamp(name: str) -> bool:
    """Whether a column holds instants (ns) rather than durations.

    ``ts_ns``, ``start_ns``, ``end_ns`` and names ending in ``_ts_ns``, ``_start_ns`` or
    ``_end_ns`` are instants, except spans named ``<a>_to_<b>_ns`` (``launch_to_start_ns``:
    from the launch to the start, a duration).
    """
    if name in ("ts_ns", "start_ns", "end_ns"):
        return True
    if not name.endswith(("_ts_ns", "_start_ns", "_end_ns")):
        return False
    return "_to_" not in name


def _unit_kind(name: str, integer: bool) -> str:
    """The kind of a numeric column, from its name (units in names: ``total_ns``...)."""
    if name.endswith("_ns"):
        return "time" if is_timestamp(name) else "duration"
    if "_ns_per_" in name:  # mean_gpu_ns_per_call: ns per something
        return "duration"
    if name == "bytes" or name.endswith("_bytes"):
        return "bytes"
    if name.endswith("_gbps"):
        return "gbps"
    if name == "flops" or name.endswith("_flops"):
        return "flops"
    if name.endswith(("_fraction", "_ratio")):
        return "fraction"
    if name == "pct" or name.endswith("_pct"):
        return "pct"
    return "integer" if integer else "float"


def _kind(name: str, dtype: pl.DataType) -> str:
    """The kind of a Polars column."""
    import polars as pl

    if dtype == pl.Boolean:
        return "text"
    if isinstance(dtype, pl.Datetime):
        return "datetime"
    if dtype == pl.Date:
        return "date"
    if dtype.is_numeric():
        return _unit_kind(name, dtype.is_integer())
    if isinstance(dtype, pl.List | pl.Array):
        return "list"
    return "text"


_DUCK_INTEGERS = frozenset({
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
    "UINTEGER", "UBIGINT", "UHUGEINT",
})  # fmt: skip


def _duck_kind(name: str, type_name: str) -> str:
    """The kind of a DuckDB result column (``Rows.types``)."""
    t = type_name.upper()
    if t in _DUCK_INTEGERS:
        return _unit_kind(name, True)
    if t in ("FLOAT", "DOUBLE", "REAL") or t.startswith("DECIMAL"):
        return _unit_kind(name, False)
    if t == "DATE":
        return "date"
    if t.startswith("TIMESTAMP"):
        return "datetime"
    if t.endswith("[]") or t.startswith("LIST"):
        return "list"
    return "text"


def table_columns(data: Any) -> list[tuple[str, str, list[Any]]]:
    """``(name, kind, values)`` of each column of a Polars frame or a :class:`~tracewh.query.db.Rows`."""
    if hasattr(data, "schema"):  # a Polars DataFrame
        return [(n, _kind(n, data.schema[n]), data[n].to_list()) for n in data.columns]
    return [
        (n, _duck_kind(n, t), [r[i] for r in data.rows])
        for i, (n, t) in enumerate(zip(data.columns, data.types, strict=True))
    ]


@dataclass(frozen=True)
class Column:
    """A column ready to print: header, cells, whether numbers (right-aligned).

    ``fixed`` columns (numbers, dates, run ids) are never elided; other text may be.
    """

    header: str
    cells: list[str]
    numeric: bool
    source: str
    fixed: bool = False

    def __post_init__(self) -> None:
        if self.numeric:
            object.__setattr__(self, "fixed", True)


def _is_id(name: str) -> bool:
    return name in ("run_id", "ingest_id", "sha256") or name.endswith("_run_id")


@dataclass(frozen=True)
class Shown:
    """A frame converted for the terminal, and the legend lines its units need."""

    columns: list[Column]
    legend: list[str]


def _maxabs(values: Sequence[float | int | None]) -> float:
    nums = [abs(float(v)) for v in values if v is not None and not _nan(v)]
    return max(nums) if nums else 0.0


def _nan(v: float | int) -> bool:
    return isinstance(v, float) and (math.isnan(v) or math.isinf(v))


def _decimals(biggest: float, *, most: int, smallest: float = 0.0) -> int:
    """Decimals for a column: about four significant digits of ``biggest``, and two of the
    ``smallest`` nonzero value (so a small value in a large unit does not read 0.000); at
    least 1, at most ``most``."""
    least = 1 if most else 0
    if biggest <= 0:
        return least
    digits = 3 - math.floor(math.log10(biggest))
    if smallest > 0:
        digits = max(digits, 1 - math.floor(math.log10(smallest)))
    return max(min(digits, most), least)


def _minabs(values: Sequence[float | int | None]) -> float:
    nums = [abs(float(v)) for v in values if v is not None and not _nan(v) and v != 0]
    return min(nums) if nums else 0.0


def _fmt(value: Any, decimals: int, *, sep: bool = True) -> str:
    if value is None:
        return ""
    if _nan(value):
        return str(value)
    return f"{value:,.{decimals}f}" if sep else f"{value:.{decimals}f}"


def duration_unit(columns: Sequence[Sequence[float | int | None]]) -> tuple[str, float]:
    """The one unit of a table's durations: ``("ms", 1e6)`` or ``("µs", 1e3)``.

    µs when the median over the duration columns of their largest value is under 1 ms (most
    columns would read 0.0xx ms), else ms.
    """
    peaks = [_maxabs(c) for c in columns]
    peaks = [p for p in peaks if p > 0]
    if peaks and statistics.median(peaks) < 1e6:
        return "µs", 1e3
    return "ms", 1e6


def bytes_unit(columns: Sequence[Sequence[float | int | None]]) -> tuple[str, float]:
    """The one unit of a table's byte counts (1000-based), by the largest value."""
    peak = max((_maxabs(c) for c in columns), default=0.0)
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if peak >= div:
            return unit, div
    return "B", 1.0


def flops_unit(columns: Sequence[Sequence[float | int | None]]) -> tuple[str, float]:
    """The one unit of a table's FLOP counts (1000-based), by the largest value."""
    peak = max((_maxabs(c) for c in columns), default=0.0)
    for unit, div in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if peak >= div:
            return unit, div
    return "FLOP", 1.0


def utc_text(ns: int | None) -> str:
    """An instant in ns since the epoch as ``YYYY-MM-DD HH:MM:SS.ffffff`` UTC."""
    if ns is None:
        return ""
    try:
        moment = dt.datetime.fromtimestamp(ns // 1000 / 1e6, dt.UTC)
    except (OverflowError, OSError, ValueError):
        return str(ns)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


def _strip(name: str, suffix: str) -> str:
    return name[: -len(suffix)] if name.endswith(suffix) and len(name) > len(suffix) else name


def display(
    df: Any,
    *,
    origin_ns: int | None = None,
    origin_label: str | None = None,
    absolute: bool = False,
) -> Shown:
    """Convert a result for the terminal (see the module docstring).

    Parameters
    ----------
    df
        The result, units in its column names (``total_ns``): a Polars frame or the plain
        :class:`~tracewh.query.db.Rows` of a query (no Polars needed).
    origin_ns
        The instant timestamps are shown relative to (the run's start); ``None``: the
        earliest timestamp of the table.
    origin_label
        How the legend names the origin (``"the run's start"``).
    absolute
        Show timestamps as UTC date-times (tables of many runs) instead of ``+ms``.
    """
    cols = table_columns(df)
    kinds = {name: kind for name, kind, _ in cols}
    data = {name: values for name, _, values in cols}
    dur_cols = [data[n] for n, k in kinds.items() if k == "duration"]
    byte_cols = [data[n] for n, k in kinds.items() if k == "bytes"]
    flop_cols = [data[n] for n, k in kinds.items() if k == "flops"]
    f_unit, f_div = flops_unit(flop_cols)
    d_unit, d_div = duration_unit(dur_cols)
    b_unit, b_div = bytes_unit(byte_cols)
    times = [n for n, k in kinds.items() if k == "time"]
    legend: list[str] = []
    origin = origin_ns
    if times and not absolute:
        if origin is None:
            starts = [v for n in times for v in data[n] if v is not None]
            origin = min(starts) if starts else 0
            origin_label = origin_label or "the earliest time in this table"
        what = origin_label or "the origin"
        legend.append(f"+ms: milliseconds since {what} ({utc_text(origin)} UTC)")
    elif times:
        legend.append("times in UTC")
    if dur_cols:
        legend.append(f"durations in {d_unit}")
    if byte_cols:
        legend.append(f"sizes in {b_unit} (1000-based)")
    columns: list[Column] = []
    for name, kind, values in cols:
        if kind == "time" and absolute:
            cells = [utc_text(v) for v in values]
            columns.append(Column(f"{_strip(name, '_ns')} (UTC)", cells, False, name))
            continue
        if kind == "time":
            rel = [None if v is None else (v - (origin or 0)) / 1e6 for v in values]
            cells = [_fmt(v, 3) for v in rel]
            columns.append(Column(f"{_strip(name, '_ns')} (+ms)", cells, True, name))
        elif kind in ("duration", "bytes"):
            div, unit = (d_div, d_unit) if kind == "duration" else (b_div, b_unit)
            conv = [None if v is None else v / div for v in values]
            most = {"ms": 6, "µs": 3}.get(unit, 6 if unit != "B" else 0)
            digits = _decimals(_maxabs(conv), most=most, smallest=_minabs(conv))
            suffix = "_ns" if kind == "duration" else "_bytes"
            label = _strip(name, suffix) if name != "bytes" else "bytes"
            label = label.replace("_ns_per_", "_per_")
            columns.append(Column(f"{label} ({unit})", [_fmt(v, digits) for v in conv], True, name))
        elif kind == "flops":
            conv = [None if v is None else v / f_div for v in values]
            digits = _decimals(_maxabs(conv), most=3 if f_unit != "FLOP" else 0)
            label = _strip(name, "_flops") if name != "flops" else "flops"
            columns.append(Column(f"{label} ({f_unit})", [_fmt(v, digits) for v in conv], True, name))
        elif kind == "gbps":
            columns.append(Column(f"{_strip(name, '_gbps')} (GB/s)", [_fmt(v, 2) for v in values], True, name))
        elif kind in ("fraction", "pct"):
            conv = [None if v is None else v * (100 if kind == "fraction" else 1) for v in values]
            header = f"{name} (%)" if kind == "fraction" else f"{_strip(name, '_pct')} (%)"
            columns.append(Column(header, [_fmt(v, 1) for v in conv], True, name))
        elif kind == "integer":
            columns.append(Column(name, ["" if v is None else str(v) for v in values], True, name))
        elif kind == "float":
            digits = _decimals(_maxabs(values), most=6)
            columns.append(Column(name, [_fmt(v, digits, sep=False) for v in values], True, name))
        elif kind == "datetime":
            cells = ["" if v is None else _datetime_text(v) for v in values]
            columns.append(Column(f"{name} (UTC)", cells, False, name, fixed=True))
        elif kind == "date":
            columns.append(Column(name, ["" if v is None else str(v) for v in values], False, name, fixed=True))
        elif kind == "list":
            cells = ["" if v is None else ", ".join(cell_text(x) for x in v) for v in values]
            columns.append(Column(name, cells, False, name))
        else:
            cells = [cell_text(v) for v in values]
            columns.append(Column(name, cells, False, name, fixed=_is_id(name)))
    return Shown(columns, legend)


def _datetime_text(value: dt.datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC)
    return value.strftime("%Y-%m-%d %H:%M:%S")
