"""Formatting of result frames for the terminal, CSV and JSON, and ``--out`` files.

Data keep their units in column names (``total_ns``); only the terminal table
converts them to readable units (ms, µs, MB, GB/s) and says so in the header.
"""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

import polars as pl
import typer
from rich.console import Console
from rich.table import Table

from tracewh.errors import UsageError

FORMATS = ("table", "csv", "json")


def _ns_unit(values: pl.Series) -> tuple[str, float]:
    biggest = values.drop_nulls().abs().max() if values.len() else None
    if biggest is not None and float(biggest) >= 1e6:  # type: ignore[arg-type]
        return "ms", 1e6
    return "µs", 1e3


def _is_timestamp(name: str) -> bool:
    """Columns holding absolute times (ns since epoch) rather than durations."""
    return name in ("ts_ns", "start_ns", "end_ns") or name.endswith(("_ts_ns", "_start_ns", "_end_ns"))


def display_frame(df: pl.DataFrame) -> pl.DataFrame:
    """A copy of ``df`` with unit-bearing columns converted and renamed for people."""
    out: list[pl.Series] = []
    for name in df.columns:
        col = df[name]
        numeric = col.dtype.is_numeric()
        if numeric and _is_timestamp(name):
            base = col.drop_nulls().min()
            rel = (col - base) / 1e6 if base is not None else col
            out.append(rel.round(3).alias(f"{name[:-3]} (+ms)"))
        elif numeric and name.endswith("_ns"):
            unit, div = _ns_unit(col)
            digits = 3 if unit == "ms" else 2
            out.append((col / div).round(digits).alias(f"{name[:-3]} ({unit})"))
        elif numeric and (name == "bytes" or name.endswith("_bytes")):
            biggest = col.drop_nulls().max()
            if biggest is not None and float(biggest) >= 1e9:  # type: ignore[arg-type]
                out.append((col / 1e9).round(3).alias(f"{name.removesuffix('_bytes')} (GB)"))
            else:
                out.append((col / 1e6).round(3).alias(f"{name.removesuffix('_bytes')} (MB)"))
        elif numeric and (name == "flops" or name.endswith("_flops")):
            out.append((col / 1e9).round(3).alias(f"{name.removesuffix('flops') or 'flops'} (GFLOP)".replace("_ (", " (")))
        elif numeric and name.endswith("_gbps"):
            out.append(col.round(2).alias(f"{name[:-5]} (GB/s)"))
        elif numeric and (name.endswith("_fraction") or name.endswith("_ratio")):
            out.append((col * 100).round(1).alias(f"{name} (%)"))
        elif numeric and (name == "pct" or name.endswith("_pct")):
            out.append(col.round(2).alias(f"{name} (%)"))
        elif col.dtype == pl.Float64:
            out.append(col.round(3))
        else:
            out.append(col)
    return pl.DataFrame(out)


def render_table(df: pl.DataFrame, *, title: str | None = None) -> None:
    """Print ``df`` as a rich table with units."""
    shown = display_frame(df)
    table = Table(title=title, show_lines=False, header_style="bold")
    for name in shown.columns:
        if shown[name].dtype.is_numeric():
            table.add_column(name, justify="right", no_wrap=True, min_width=len(name))
        else:
            table.add_column(name, justify="left", overflow="ellipsis", no_wrap=True, max_width=50)
    for row in shown.iter_rows():
        table.add_row(*["" if v is None else str(v) for v in row])
    console = Console()
    Console(width=max(200, console.width) if not console.is_terminal else None).print(table)
    if df.is_empty():
        typer.echo("(no rows)")


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
