"""Formatting of result frames for the terminal, CSV and JSON, and ``--out`` files.

Data keep their units in column names (``total_ns``); only the terminal table
converts them to readable units (ms, µs, MB, GB/s) and says so in the header.
"""

from __future__ import annotations

import io
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from tracewh.errors import UsageError

if TYPE_CHECKING:  # Polars and rich are imported where a frame or a table is printed
    import polars as pl

    from tracewh.db import Rows

FORMATS = ("table", "csv", "json")

#: DuckDB type names of numbers (``DECIMAL(p,s)`` too).
_NUMERIC = frozenset({
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
    "UINTEGER", "UBIGINT", "UHUGEINT", "FLOAT", "DOUBLE",
})


def _ns_unit(values: Sequence[Any]) -> tuple[str, float]:
    biggest = max((abs(v) for v in values if v is not None), default=None)
    if biggest is not None and float(biggest) >= 1e6:
        return "ms", 1e6
    return "µs", 1e3


def _is_timestamp(name: str) -> bool:
    """Columns holding absolute times (ns since epoch) rather than durations."""
    return name in ("ts_ns", "start_ns", "end_ns") or name.endswith(("_ts_ns", "_start_ns", "_end_ns"))


def _scaled(values: Sequence[Any], div: float, digits: int, shift: Any = 0) -> list[Any]:
    """``(v - shift) / div`` rounded to ``digits`` (``div`` 1: ``v`` itself rounded, ints stay ints)."""
    if div == 1 and not shift:
        return [None if v is None else round(v, digits) for v in values]
    return [None if v is None else round((v - shift) / div, digits) for v in values]


def display_columns(
    names: Sequence[str], numeric: Sequence[bool], columns: Sequence[Sequence[Any]]
) -> tuple[list[str], list[list[Any]]]:
    """Unit-bearing columns converted and renamed for people: ``(names, columns)``.

    ``numeric[i]`` says whether column ``i`` holds numbers; ``columns[i]`` its values.
    """
    out_names: list[str] = []
    out: list[list[Any]] = []
    for name, is_num, col in zip(names, numeric, columns, strict=True):
        present = [v for v in col if v is not None]
        if is_num and _is_timestamp(name):
            base = min(present, default=None)
            out_names.append(f"{name[:-3]} (+ms)")
            out.append(_scaled(col, 1e6, 3, base) if base is not None else list(col))
        elif is_num and name.endswith("_ns"):
            unit, div = _ns_unit(col)
            out_names.append(f"{name[:-3]} ({unit})")
            out.append(_scaled(col, div, 3 if unit == "ms" else 2))
        elif is_num and (name == "bytes" or name.endswith("_bytes")):
            big = max(present, default=None)
            gb = big is not None and float(big) >= 1e9
            out_names.append(f"{name.removesuffix('_bytes')} ({'GB' if gb else 'MB'})")
            out.append(_scaled(col, 1e9 if gb else 1e6, 3))
        elif is_num and (name == "flops" or name.endswith("_flops")):
            out_names.append(f"{name.removesuffix('flops') or 'flops'} (GFLOP)".replace("_ (", " ("))
            out.append(_scaled(col, 1e9, 3))
        elif is_num and name.endswith("_gbps"):
            out_names.append(f"{name[:-5]} (GB/s)")
            out.append(_scaled(col, 1, 2))
        elif is_num and (name.endswith("_fraction") or name.endswith("_ratio")):
            out_names.append(f"{name} (%)")
            out.append([None if v is None else round(v * 100, 1) for v in col])
        elif is_num and (name == "pct" or name.endswith("_pct")):
            out_names.append(f"{name} (%)")
            out.append(_scaled(col, 1, 2))
        elif is_num and any(isinstance(v, float) for v in present):
            out_names.append(name)
            out.append([round(v, 3) if isinstance(v, float) else v for v in col])
        else:
            out_names.append(name)
            out.append(list(col))
    return out_names, out


def _print_table(
    names: Sequence[str], numeric: Sequence[bool], columns: Sequence[Sequence[Any]],
    n_rows: int, title: str | None,
) -> None:
    from rich.console import Console
    from rich.table import Table

    shown, values = display_columns(names, numeric, columns)
    table = Table(title=title, show_lines=False, header_style="bold")
    for name, is_num in zip(shown, numeric, strict=True):
        if is_num:
            table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
        else:
            table.add_column(name, justify="left", overflow="ellipsis", no_wrap=True, max_width=50)
    for i in range(n_rows):
        table.add_row(*["" if col[i] is None else str(col[i]) for col in values])
    console = Console()
    Console(width=max(200, console.width) if not console.is_terminal else None).print(table)
    if n_rows == 0:
        typer.echo("(no rows)")


def render_table(df: pl.DataFrame, *, title: str | None = None) -> None:
    """Print ``df`` as a rich table with units."""
    numeric = [df[name].dtype.is_numeric() for name in df.columns]
    columns = [df[name].to_list() for name in df.columns]
    _print_table(df.columns, numeric, columns, df.height, title)


def render_rows(rows: Rows, *, title: str | None = None, top: int | None = None) -> None:
    """Print a query's :class:`~tracewh.db.Rows` as :func:`render_table` does (no Polars)."""
    data = rows.rows[:top] if top is not None else rows.rows
    numeric = [t in _NUMERIC or t.startswith("DECIMAL") for t in rows.types]
    columns = [[r[i] for r in data] for i in range(len(rows.columns))]
    _print_table(rows.columns, numeric, columns, len(data), title)


def to_text(df: pl.DataFrame, fmt: str) -> str:
    """CSV or JSON (a list of row objects keyed by column name) text of ``df``."""
    if fmt == "csv":
        return df.write_csv()
    if fmt == "json":
        buf = io.StringIO()
        df.write_json(buf)
        return buf.getvalue()
    raise UsageError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")


def emit(df: pl.DataFrame, fmt: str, *, title: str | None = None) -> None:
    """Print a result frame in the chosen format."""
    if fmt == "table":
        render_table(df, title=title)
    else:
        typer.echo(to_text(df, fmt), nl=False)
        if fmt == "json":
            typer.echo("")


def write_out(df: pl.DataFrame, path: Path) -> None:
    """Write ``df`` to ``.csv``, ``.json`` or ``.parquet`` atomically (temp file, rename)."""
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".json", ".parquet"):
        raise UsageError(f"--out must end in .csv, .json or .parquet, not {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        if suffix == ".csv":
            df.write_csv(tmp)
        elif suffix == ".json":
            df.write_json(tmp)
        else:
            df.write_parquet(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
