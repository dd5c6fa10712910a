"""`tracewh schema`: what `tracewh sql` can query, described (tables, views, table macros).

The description is :func:`tracewh.query.sqldocs.describe` over the catalog (the ``sql/``
definitions over empty tables: no warehouse is needed): the tables from the schema
declaration (:data:`tracewh.schema.TABLES`), the views and table macros from the ``sql/``
file headers. The table shows one row per object: its kind, its name (a macro with its
parameters), one line (a table's description, an entry's grain) and its columns;
``--format json`` prints the whole description (every column with its type, a view's or
macro's header entry in full).
"""

from __future__ import annotations

import json
import re
from typing import Any

import typer

from tracewh.cli.common import app, check_format, format_option, handle_errors
from tracewh.cli.output import show, terminal_width
from tracewh.core.errors import UsageError
from tracewh.core.textsafe import escape_control

#: The kinds in the order they are listed, as the table names them.
KINDS = (("tables", "table"), ("views", "view"), ("macros", "table macro"))
_FIELD = re.compile(r"^(\s*)([A-Za-z_]+(?: [A-Za-z_]+)?)\s*:\s*(.*)$")


def header_field(text: str, field: str) -> str:
    """The ``field:`` paragraph of a header entry (``grain``, ``columns``) on one line.

    The paragraph ends at a blank line, at a less indented line, or at the next ``key:``
    line (one or two words) of the same indentation.
    """
    out: list[str] = []
    indent = 0
    for line in text.splitlines():
        match = _FIELD.match(line)
        if out:
            depth = len(line) - len(line.lstrip())
            if not line.strip() or depth < indent or (match and depth == indent):
                break
            out.append(line.strip())
        elif match and match.group(2).lower() == field:
            indent = len(match.group(1))
            out.append(match.group(3).strip())
    return " ".join(out)


def column_names(text: str) -> list[str]:
    """The names of a header's ``columns:`` text (definitions in parentheses left out)."""
    depth, flat = 0, []
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0 and ch not in ")]}":
            flat.append(ch)
    names = []
    for part in "".join(flat).split(","):
        word = part.strip().split(" ")[0].strip("`'.;") if part.strip() else ""
        if re.fullmatch(r"[A-Za-z_*][\w*]*", word):
            names.append(word)
    return names


def first_sentence(text: str) -> str:
    """The first sentence of a table's description, on one line."""
    flat = " ".join(text.split())
    end = re.search(r"(?<=[a-z0-9)])\.(\s|$)", flat)
    return flat[: end.start() + 1] if end else flat


def escape_lines(text: str) -> str:
    """``text`` with control characters made visible (header text is data, not markup)."""
    return escape_control(text)


def rows(doc: dict[str, Any]) -> list[dict[str, str]]:
    """One row per object of ``doc`` (:func:`tracewh.query.sqldocs.describe`)."""
    out = []
    for key, kind in KINDS:
        for obj in doc[key]:
            if key == "tables":
                line = first_sentence(obj["description"])
                columns = [c["name"] for c in obj["columns"]]
            else:
                line = header_field(obj["description"], "grain")
                columns = ([c["name"] for c in obj.get("columns", [])]
                           or column_names(header_field(obj["description"], "columns")))
            out.append({
                "kind": kind, "name": obj.get("signature") or obj["name"], "description": line,
                "columns": ", ".join(columns),
            })  # fmt: skip
    return out


#: What each section of the terminal listing holds.
SECTIONS = {
    "table": ("Tables", "the warehouse's tables, their visible rows (raw_<table>: every row)"),
    "view": ("Views", ""),
    "table macro": ("Table macros", "SELECT * FROM name(run_id, ...); run('latest') names a run"),
}


def listing(items: list[dict[str, str]], width: int) -> list[str]:
    """The terminal listing: a section per kind, each object's name and one line, then its
    columns, wrapped to ``width``."""
    import textwrap

    lines: list[str] = []
    for kind, (title, what) in SECTIONS.items():
        mine = [i for i in items if i["kind"] == kind]
        if not mine:
            continue
        lines += ([""] if lines else []) + [f"{title} ({len(mine)})" + (f": {what}" if what else "")]
        for item in mine:
            head = item["name"] + (f" — {item['description']}" if item["description"] else "")
            lines += textwrap.wrap(head, width, initial_indent="  ", subsequent_indent="      ",
                                   break_on_hyphens=False)
            if item["columns"]:
                lines += textwrap.wrap(item["columns"], width, initial_indent="      ",
                                       subsequent_indent="      ", break_on_hyphens=False)
    return lines


@app.command()
def schema(
    name: str | None = typer.Argument(None, metavar="[NAME]", help="Only the objects whose name contains NAME (case-insensitive), e.g. gaps.", show_default=False),
    fmt: str = format_option(),
) -> None:
    """List the tables, views and table macros `tracewh sql` can query, with their columns.

    One row per object: kind, name (a macro with its parameters), one line (a table's
    description, a view's or macro's grain) and its columns. --format json: everything,
    with each column's type and each view's and macro's definitions in full.

    Example: tracewh schema
    Example: tracewh schema gaps --format json
    """
    from tracewh.query.db import connect_catalog
    from tracewh.query.sqldocs import describe

    with handle_errors():
        check_format(fmt)
        con = connect_catalog()
        try:
            doc = describe(con, name=name)
        finally:
            con.close()
        if fmt == "json":
            typer.echo(json.dumps(doc, indent=2))
            return
        items = rows(doc)
        if not items and name:
            raise UsageError(f"no table, view or macro name contains {name!r} "
                             "(tracewh schema lists them all)")
        if fmt == "table":
            typer.echo("\n".join(escape_lines(line) for line in listing(items, terminal_width())))
            return
        import polars as pl

        frame = pl.DataFrame(items, schema=dict.fromkeys(("kind", "name", "description", "columns"), pl.String))
        show(frame, fmt, title="tables, views and table macros of `tracewh sql`", top=0)
