"""The warehouse's SQL surface described: tables, views and macros with their columns and definitions.

Every file of ``sql/`` starts with a header naming each view and macro it defines, its grain
and its columns in words (``-- stream_gaps(run, kernel_wait_threshold_ns := 30000)  (table
macro)`` and the lines below it). :func:`header_entries` reads those entries;
:func:`describe` joins them with the catalog DuckDB holds (the tables' and views' column
names and types, the macros' parameters) and the tables' own descriptions
(:data:`tracewh.schema.TABLES`): what a program writing SQL against the warehouse needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from tracewh.core.sqlfiles import SQL_DIR, sql_files
from tracewh.schema import TABLES

__all__ = ["HeaderEntry", "describe", "header_entries"]

_SIGNATURE_LINE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\([^)]*\))?\s*$")
_KIND_LINE = re.compile(r"^\s+\((view|table macro|scalar macro)\b[^)]*\)")
_ENTRY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\([^)]*\))?\s+\((view|table macro|scalar macro)\b[^)]*\)")


@dataclass(frozen=True)
class HeaderEntry:
    """One view or macro as a ``sql/`` header describes it.

    Attributes
    ----------
    name
        The view's or macro's name.
    kind
        ``view``, ``table macro`` or ``scalar macro``.
    signature
        ``name(params)`` as the header writes it (the name alone for a view).
    text
        The entry's lines (grain, columns, definitions), comment markers removed.
    file
        The ``sql/`` file it is in.
    """

    name: str
    kind: str
    signature: str
    text: str
    file: str


def header_entries(sql_dir: Path = SQL_DIR) -> dict[str, HeaderEntry]:
    """The entries of every ``sql/*.sql`` header, by name (the first definition of a name wins)."""
    out: dict[str, HeaderEntry] = {}
    for path in sql_files(sql_dir):
        for entry in _file_entries(path):
            out.setdefault(entry.name, entry)
    return out


def _file_entries(path: Path) -> list[HeaderEntry]:
    lines: list[str] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.startswith("--"):
                break
            lines.append(line[2:].rstrip("\n").removeprefix(" "))
    # a long signature wraps: "name(params...)" then "  (table macro)" on the next line
    for i in range(len(lines) - 1, 0, -1):
        if _KIND_LINE.match(lines[i]) and _SIGNATURE_LINE.match(lines[i - 1]):
            lines[i - 1 : i + 1] = [f"{lines[i - 1].rstrip()}  {lines[i].strip()}"]
    entries: list[HeaderEntry] = []
    current: tuple[str, str, str] | None = None
    body: list[str] = []

    def close() -> None:
        if current is not None:
            name, kind, signature = current
            text = "\n".join(body).strip()
            entries.append(HeaderEntry(name, kind, signature, text, path.name))

    for line in lines:
        m = _ENTRY.match(line)
        if m:
            close()
            current = (m.group(1), m.group(3), m.group(1) + (m.group(2) or ""))
            body = [line]
        elif current is not None:
            if not line.strip() and body and not body[-1].strip():
                continue
            body.append(line)
    close()
    return entries


def describe(
    con: duckdb.DuckDBPyConnection, *, name: str | None = None, sql_dir: Path = SQL_DIR
) -> dict[str, Any]:
    """The tables, views and table macros of a catalog connection, described.

    Parameters
    ----------
    con
        A connection with the warehouse's views and macros (``Warehouse.connect``).
    name
        Only the objects whose name contains this text (case-insensitive); ``None``: all.
    sql_dir
        Where the ``sql/`` headers are read.

    Returns
    -------
    dict
        ``{"tables": [...], "views": [...], "macros": [...]}``. A table: ``name``,
        ``description``, ``partitioned_by``, ``columns`` (``name``, ``type``). A view:
        ``name``, ``description`` (its header entry), ``columns``. A table macro:
        ``name``, ``signature``, ``parameters``, ``description`` (grain, columns,
        definitions in words). Helpers without a header entry (``tw_*``, the raw file
        relations) are left out.
    """
    needle = name.lower() if name else None  # `name` is reused by the loops below
    docs = header_entries(sql_dir)
    columns: dict[str, list[dict[str, str]]] = {}
    for table, column, dtype in con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE NOT internal AND schema_name = 'main' ORDER BY table_name, column_index"
    ).fetchall():
        columns.setdefault(table, []).append({"name": column, "type": dtype})
    tables = [
        {
            "name": spec.name,
            "description": spec.doc,
            "partitioned_by": list(spec.partition_by),
            "columns": columns.get(spec.name) or [
                {"name": f.name, "type": str(f.type)} for f in spec.schema
            ],
        }
        for spec in TABLES.values()
    ]
    views = [
        {"name": name, "description": docs[name].text, "columns": columns.get(name, [])}
        for (name,) in con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal AND schema_name = 'main' "
            "ORDER BY view_name"
        ).fetchall()
        if name in docs and docs[name].kind == "view" and name not in TABLES
    ]
    macros = []
    seen: set[str] = set()
    for name, params in con.execute(
        "SELECT function_name, parameters FROM duckdb_functions() "
        "WHERE function_type = 'table_macro' AND NOT internal AND schema_name = 'main' "
        "ORDER BY function_name"
    ).fetchall():
        entry = docs.get(name)
        if entry is None or entry.kind != "table macro" or name in seen:
            continue
        seen.add(name)
        macros.append({
            "name": name, "signature": entry.signature, "parameters": list(params),
            "description": entry.text,
        })  # fmt: skip
    doc = {"tables": tables, "views": views, "macros": macros}
    if needle:
        doc = {key: [o for o in objs if needle in o["name"].lower()] for key, objs in doc.items()}
    return doc
