"""Result tables as GitHub-flavoured Markdown (``--format markdown``): for a PR or an issue.

The cells are those of the terminal table (units converted once per table, times from the
run's start: :func:`tracewh.cli.display.display`), whole (nothing elided, no width limit);
numbers are right-aligned. A text cell holding characters Markdown would read as markup
(``<>*_[]`#``) is a code span, so kernel names and template arguments show as written; a
``|`` is escaped in every cell (GFM splits cells at it, code spans included).

Pure functions: columns in, lines out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tracewh.cli.display import Column

_MARKUP = re.compile(r"[<>*_\[\]`#\\]")


def cell(text: str, *, numeric: bool) -> str:
    """One cell's Markdown: one line, pipes escaped, markup-looking text as a code span.

    Leading spaces (the indentation of a tree: modules, annotations) become no-break
    spaces, which Markdown keeps.
    """
    indent = 0 if numeric else len(text) - len(text.lstrip(" "))
    text = " ".join(text.split())
    if not numeric and text and _MARKUP.search(text):
        fence = "``" if "`" in text else "`"
        pad = " " if text.startswith("`") or text.endswith("`") else ""
        text = f"{fence}{pad}{text}{pad}{fence}"
    return "\u00a0" * indent + text.replace("|", "\\|")


def table(columns: Sequence[Column]) -> list[str]:
    """The lines of a Markdown table of ``columns`` (header, alignment row, rows)."""
    if not columns:
        return []
    head = "| " + " | ".join(cell(c.header, numeric=True) for c in columns) + " |"
    align = "|" + "|".join("---:" if c.numeric else "---" for c in columns) + "|"
    rows = len(columns[0].cells)
    body = [
        "| " + " | ".join(cell(c.cells[r], numeric=c.numeric) for c in columns) + " |"
        for r in range(rows)
    ]
    return [head, align, *body]


def document(title: str, subtitles: Sequence[str], legend: Sequence[str],
             columns: Sequence[Column], *, empty: bool) -> str:
    """A titled Markdown table: ``**title**``, sub-titles and legend as lines, the table."""
    lines = [f"**{cell(title, numeric=True)}**"]
    lines += [f"{cell(s, numeric=True)}  " for s in subtitles]
    if legend and not empty:
        lines.append(f"_{cell('; '.join(legend), numeric=True)}_")
    lines.append("")
    lines += ["(no rows)"] if empty else table(columns)
    return "\n".join(lines) + "\n"


__all__ = ["cell", "document", "table"]
