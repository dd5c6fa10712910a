"""Show trace strings literally: control characters made visible, markup never interpreted.

Kernel, operator and thread names are data written by whoever produced the
trace. Printed raw, an ``ESC]0;...`` sets the terminal's title, ``ESC[2J`` clears
the screen, a bidirectional override reorders what is shown, and a NUL or other
C0 character makes an XML renderer (vl-convert's SVG/PNG) panic. Rich markup
(``[/bold]``, ``[link=...]``) is a separate hazard: table cells must be
:class:`rich.text.Text` objects, never markup strings (:mod:`tracewh.cli.output`).

:func:`escape_control` is the one definition of "made visible", shared by the
terminal tables, the charts and every line the CLI prints from data.
"""

from __future__ import annotations

import re
from typing import Any

#: C0 controls, DEL, C1 controls; bidirectional embeddings, overrides and isolates
#: (U+202A-U+202E, U+2066-U+2069), the Unicode line/paragraph separators, lone
#: surrogates, and the noncharacters U+FFFE/U+FFFF (not allowed in XML).
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff]"
)


#: The control characters everyone reads as escapes.
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(match: re.Match[str]) -> str:
    ch = match.group()
    short = _SHORT.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_control(text: str) -> str:
    r"""``text`` with every unsafe character written as ``\n``, ``\r``, ``\t``, ``\xNN`` or ``\uNNNN``.

    Unsafe: C0 and C1 control characters (tab and newline included: a table cell
    is one line), DEL, bidirectional controls, line/paragraph separators, lone
    surrogates and U+FFFE/U+FFFF. Everything else, backslashes included, is kept
    as it is, so ordinary names are shown unchanged.

    Examples
    --------
    >>> escape_control("gemm\x1b[2J")
    'gemm\\x1b[2J'
    >>> escape_control("[/bold] ok")
    '[/bold] ok'
    """
    return _UNSAFE.sub(_visible, text) if _UNSAFE.search(text) else text


def escape_lines(text: str) -> str:
    """:func:`escape_control` of each line of ``text``, the newlines kept (printed reports)."""
    return "\n".join(escape_control(line) for line in text.split("\n"))


def has_control(text: str) -> bool:
    """Whether :func:`escape_control` would change ``text``."""
    return _UNSAFE.search(text) is not None


def escape_nested(value: Any) -> Any:
    """:func:`escape_control` applied to every string (keys too) inside lists and dicts."""
    if isinstance(value, str):
        return escape_control(value)
    if isinstance(value, list):
        return [escape_nested(v) for v in value]
    if isinstance(value, tuple):
        return tuple(escape_nested(v) for v in value)
    if isinstance(value, dict):
        return {escape_nested(k): escape_nested(v) for k, v in value.items()}
    return value


#: Characters that change a Markdown document wherever they stand in a line.
#: ``_`` between two letters or digits opens no emphasis (CommonMark): ``gemm_kernel`` stays.
#: Brackets make a link or an image only as ``[text](url)``: the ``(`` after ``]`` is escaped
#: (a reference link needs a definition at a line's start, which data never has), so shapes
#: such as ``[[64,256],[64,256]]`` read as they are.
_MD_INLINE = re.compile(r"([\\`*|~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])|(?<=\])\()")
#: What changes a Markdown document at the start of a line (a heading, a quote, a list item).
_MD_LINE_START = re.compile(r"^(\s*)(#|[-+*](?=\s))")
_MD_ORDERED = re.compile(r"^(\s*\d+)([.)])(?=\s)")


def escape_markdown(text: str) -> str:
    r"""``text`` as literal Markdown: one line, no markup, no raw HTML.

    :func:`escape_control` first (a newline becomes ``\n``, so no data starts a line of
    its own: no heading, list or quote can be injected), then ``&``, ``<``, ``>`` as HTML
    entities (no raw HTML: ``<script>``, ``<img onerror=...>``) and a backslash before
    every character that is Markdown syntax inside a line (emphasis, code, tables,
    strikethrough, the ``(`` of a link or image after ``]``), and before a heading or list
    marker at the start. Rendered, the text reads exactly as it was.

    Examples
    --------
    >>> print(escape_markdown("<b>[a](b)</b> | *y* [[64,256]]"))
    &lt;b&gt;[a]\(b)&lt;/b&gt; \| \*y\* [[64,256]]
    """
    text = escape_control(text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_INLINE.sub(r"\\\1", text)
    text = _MD_ORDERED.sub(r"\1\\\2", text)
    return _MD_LINE_START.sub(r"\1\\\2", text)
