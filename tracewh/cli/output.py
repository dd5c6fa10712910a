"""Result frames for people (terminal tables) and programs (CSV, JSON, ``--out`` files).

Every command that prints a result calls :func:`show`: it applies ``--top``, writes ``--out``,
and prints the table (titled with the run it shows, units converted once per table, times
from the run's start, fitted to the terminal: see :mod:`tracewh.cli.display` and
:mod:`tracewh.cli.layout`) or CSV/JSON (exact values, as stored). Notes for people (a
selector that matched several runs, why a result is empty, rows left out by ``--top``) go
to the table's footer, or to stderr with ``--format csv|json`` so that stdout stays data.

The terminal width is ``COLUMNS`` when set, else the terminal's (stdout, else stderr), else
120 columns.
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tracewh.cli.display import cell_text, display, utc_text
from tracewh.cli.layout import elide, render
from tracewh.core.errors import UsageError
from tracewh.core.textsafe import escape_control
from tracewh.query.runsel import RunRef
from tracewh.results import json_text

if TYPE_CHECKING:
    import polars as pl

    from tracewh.query.db import Rows

__all__ = [
    "FORMATS", "cell_text", "emit", "note", "render_rows", "render_table", "run_title", "selection_note",
    "show", "terminal_width", "to_text", "write_out",
]  # fmt: skip

FORMATS = ("table", "csv", "json", "markdown")
#: Width used when there is no terminal and no ``COLUMNS``.
DEFAULT_WIDTH = 120
MIN_WIDTH = 40


def terminal_width() -> int:
    """Columns to fit: ``COLUMNS``, else the terminal of stdout or stderr, else 120."""
    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit() and int(env) > 0:
        return max(MIN_WIDTH, int(env))
    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
            if os.isatty(fd):
                return max(MIN_WIDTH, os.get_terminal_size(fd).columns)
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            continue
    return DEFAULT_WIDTH


def rank_text(rank: int | None, world_size: int | None = None) -> str:
    """``rank 1 of 8``, ``rank 1``, or ``single process`` (a trace without a rank)."""
    if rank is None:
        return "single process"
    return f"rank {rank} of {world_size}" if world_size else f"rank {rank}"


def run_title(ref: RunRef) -> str:
    """How a table names its run: id prefix, file, day, rank and labels."""
    parts = [f"run {ref.short_id}"]
    if ref.file_name:
        parts.append(cell_text(ref.file_name))
    if ref.day is not None:
        parts.append(str(ref.day))
    parts.append(rank_text(ref.rank, ref.world_size))
    labels = " ".join(f"{cell_text(k)}={cell_text(v)}" for k, v in sorted(ref.labels.items()))
    if labels:
        parts.append(labels)
    return " · ".join(parts)


def selection_note(ref: RunRef) -> str | None:
    """What to say when the selector matched several runs (``None`` when it matched one)."""
    if ref.matched <= 1 or ref.selector.strip().lower() in ("", "latest"):
        return None  # `latest` matches every run by definition: nothing to say
    others = ", ".join(o[:8] for o in ref.others)
    more = ", ..." if ref.matched - 1 > len(ref.others) else ""
    return (
        f"selector {ref.selector!r} matched {ref.matched} runs: showing {ref.short_id} "
        f"(the latest ingested); the others: {others}{more}. Pick one with --run RUN_ID "
        "or more KEY=VALUE terms"
    )


def note(text: str) -> None:
    """A one-line note for people on stderr."""
    typer.echo(f"note: {cell_text(text)}", err=True)


def _wrap(text: str, width: int) -> list[str]:
    """A title or note in lines of at most ``width`` (broken at spaces)."""
    words = text.split(" ")
    lines: list[str] = []
    line = ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return [elide(x, width) for x in lines]


def _height(data: pl.DataFrame | Rows) -> int:
    return data.height if hasattr(data, "height") else len(data.rows)


def _head(data: pl.DataFrame | Rows, n: int) -> pl.DataFrame | Rows:
    if hasattr(data, "head"):
        return data.head(n)
    from tracewh.query.db import Rows

    return Rows(data.columns, data.types, data.rows[:n])


def _frame(data: pl.DataFrame | Rows) -> pl.DataFrame:
    """A Polars frame of ``data`` (CSV, JSON and files are written by Polars)."""
    if hasattr(data, "schema"):
        return data  # type: ignore[return-value]
    import polars as pl

    return pl.DataFrame(data.rows, schema=data.columns, orient="row", infer_schema_length=None)


def show(
    df: pl.DataFrame | Rows,
    fmt: str = "table",
    *,
    title: str,
    run: RunRef | None = None,
    runs: Sequence[tuple[str, RunRef]] = (),
    out: Path | None = None,
    top: int | None = None,
    empty: str | None = None,
    notes: Sequence[str] = (),
    absolute: bool = False,
    origin_ns: int | None = None,
) -> None:
    """Print a result (and write ``--out``): the one way commands show a frame.

    Parameters
    ----------
    df
        The result, exact values, units in the column names (``total_ns``): a Polars frame,
        or a query's plain :class:`~tracewh.query.db.Rows` (a terminal table then needs no Polars).
    fmt
        ``table``, ``csv``, ``json`` or ``markdown`` (the table's cells as a Markdown table).
    title
        What the table is (``"kernels by total"``); the run is added to it.
    run
        The run shown: named in the title; its start is the origin of the times.
    runs
        Several runs shown side by side, as ``(role, run)`` (``("A", ref_a)``).
    out
        Also write the shown rows to this ``.csv``/``.json``/``.parquet`` file.
    top
        Keep the first ``top`` rows (``None`` or 0: all); the footer says how many were left out.
    empty
        What to say when there are no rows: what was filtered, which values exist.
    notes
        More lines for people (footer, or stderr with csv/json).
    absolute
        Timestamps as UTC date-times (tables of many runs) rather than ms since the run's start.
    origin_ns
        The origin of the times when it is not ``run``'s start.
    """
    if fmt not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if top is not None and top < 0:
        raise UsageError("--top must be at least 0 (0: all rows)")
    total = _height(df)
    if top:
        df = _head(df, top)
    height = _height(df)
    if out is not None:
        write_out(_frame(df), out)
    extra = [n for n in [*(selection_note(r) for _, r in runs), selection_note(run) if run else None] if n]
    extra += list(notes)
    if height < total:
        extra.append(f"showing {height} of {total} rows (--top N to change, --top 0: all)")
    if not height and empty:
        extra.append(empty)
    if fmt not in ("table", "markdown"):
        frame = _frame(df)
        # CSV on a terminal: control characters made visible, as `ls` does with names;
        # piped or written to --out PATH it is the exact data (JSON escapes them itself)
        if fmt == "csv" and sys.stdout.isatty():
            frame = escaped_frame(flat_frame(frame))
        typer.echo(to_text(frame, fmt), nl=False)
        if fmt == "json":
            typer.echo("")
        for line in extra:
            note(line)
        return
    width = terminal_width()
    head = title
    if run is not None:
        head += f" — {run_title(run)}"
    lines = _wrap(cell_text(head), width)
    for role, ref in runs:
        lines += _wrap(f"{role}: {run_title(ref)}", width)
    origin = origin_ns if origin_ns is not None else (run.start_ns if run is not None else None)
    label = "the run's start" if run is not None and origin_ns is None and origin is not None else None
    shown = display(df, origin_ns=origin, origin_label=label, absolute=absolute)
    if fmt == "markdown":  # a document on stdout; the notes for people on stderr
        from tracewh.cli.markdown import document

        subtitles = [f"{role}: {run_title(ref)}" for role, ref in runs]
        typer.echo(document(head, subtitles, shown.legend, shown.columns, empty=not height), nl=False)
        for line in extra:
            note(line)
        return
    if shown.legend and height:
        lines += _wrap("; ".join(shown.legend), width)
    if shown.columns and height:
        lines += render(shown.columns, width)
    if not height:
        lines.append("(no rows)")
    for line in extra:
        lines += _wrap(cell_text(line), width)
    typer.echo("\n".join(lines))


def emit(df: pl.DataFrame, fmt: str, *, title: str | None = None, **kw: object) -> None:
    """Print a result frame in the chosen format (:func:`show` with fewer words)."""
    show(df, fmt, title=title or "", **kw)  # type: ignore[arg-type]


def render_table(df: pl.DataFrame, *, title: str | None = None, **kw: object) -> None:
    """Print ``df`` as a terminal table (see :func:`show`)."""
    show(df, "table", title=title or "", **kw)  # type: ignore[arg-type]


def render_rows(rows: Rows, *, title: str | None = None, top: int | None = None) -> None:
    """Print a query's :class:`~tracewh.query.db.Rows` as a terminal table (no Polars)."""
    show(rows, "table", title=title or "", top=top)


def flat_frame(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with list, array and struct columns as JSON text (CSV holds no nested data)."""
    import polars as pl

    nested = [n for n, t in df.schema.items() if t.is_nested()]
    if not nested:
        return df
    return df.with_columns(
        pl.Series(n, [None if v is None else json.dumps(v, default=str) for v in df[n].to_list()],
                  dtype=pl.String)
        for n in nested
    )


#: A spreadsheet reads a cell starting with one of these as a formula (CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_safe(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with each text cell that a spreadsheet would run as a formula prefixed by ``'``.

    Names and labels come from traces and users: ``=HYPERLINK(...)`` or ``@SUM(...)`` as a
    kernel name ran in Excel or LibreOffice when the CSV was opened (OWASP "CSV
    injection"). Only text columns are touched (a negative number stays a number); the
    ``'`` is what spreadsheets themselves use to mark a cell as text.
    """
    import polars as pl

    text = [n for n, t in df.schema.items() if t == pl.String]
    if not text:
        return df
    return df.with_columns(
        pl.when(pl.col(n).str.starts_with(FORMULA_START[0])
                | pl.any_horizontal(pl.col(n).str.starts_with(c) for c in FORMULA_START[1:]))
        .then(pl.lit("'") + pl.col(n)).otherwise(pl.col(n)).alias(n)
        for n in text
    )


def escaped_frame(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with control characters of its text columns made visible (for a terminal)."""
    import polars as pl

    text = [n for n, t in df.schema.items() if t == pl.String]
    if not text:
        return df
    return df.with_columns(
        pl.col(n).map_elements(escape_control, return_dtype=pl.String) for n in text
    )


def to_text(df: pl.DataFrame, fmt: str) -> str:
    """CSV or JSON (a list of row objects keyed by column name) text of ``df``.

    CSV has no nested values: lists and structs are written as JSON text.
    """
    if fmt == "csv":
        return csv_safe(flat_frame(df)).write_csv()
    if fmt == "json":
        return json_text(df)
    raise UsageError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")


def write_out(df: pl.DataFrame, path: Path) -> None:
    """Write ``df`` to ``.csv``, ``.json`` or ``.parquet`` atomically, with normal permissions.

    Written to a temporary name beside ``path``, then renamed (:func:`tracewh.core.atomic.atomic_file`);
    the file gets the mode a plain ``open()`` would give it (0666 less the umask: usually 0644),
    not the private 0600 of the temporary file.
    """
    from tracewh.core.atomic import atomic_file

    suffix = path.suffix.lower()
    if suffix not in (".csv", ".json", ".parquet"):
        raise UsageError(f"--out must end in .csv, .json or .parquet, not {path.name!r}")
    with atomic_file(path) as tmp:
        if suffix == ".csv":
            csv_safe(flat_frame(df)).write_csv(tmp)
        elif suffix == ".json":
            df.write_json(tmp)
        else:
            df.write_parquet(tmp)


def utc(ns: int | None) -> str:
    """An instant (ns since the epoch) as UTC text (for notes and titles)."""
    return utc_text(ns)
