"""Terminal tables that fit: column widths, wrapped headers, names elided in the middle.

A table is laid out for a given width (the terminal's): every column is kept. When the
columns do not fit at their natural widths, headers wrap (at spaces and after ``_``), then
text columns shrink, their values elided in the middle so that what tells them apart stays
visible (see :func:`fit_names`); when even that is too wide, the table is split into blocks of
columns printed one after the other, each repeating the first text column (the row's name),
and each block after the first says which columns it holds. Numbers are never cut.

Pure functions: columns of text in, lines out.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from tracewh.cli.display import Column, cell_len

#: Spaces between columns.
SEP = 2
#: Text columns are not shrunk below this (unless their values are shorter).
TEXT_MIN = 16
#: Text columns get this wide before headers are unwrapped.
READABLE = 40
ELLIPSIS = "…"

_TOKEN = re.compile(r"[^ _]*(?:_+| +|$)")
_BOUNDARY = re.compile(r"[_:<>,( ]")
_QUALIFIER = re.compile(r"\b(?:at::native::|at::cuda::|at::detail::|at::|c10::|std::)")


def wrap_header(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` cells, broken at spaces and after ``_``."""
    if cell_len(text) <= width:
        return [text]
    tokens = [t for t in _TOKEN.findall(text) if t]
    lines: list[str] = []
    line = ""
    for tok in tokens:
        if line and cell_len(line + tok.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        while cell_len(tok.rstrip()) > width:  # a token longer than the column: hard cut
            lines.append(tok[:width])
            tok = tok[width:]
        line += tok
    if line.strip():
        lines.append(line.rstrip())
    return lines


def _clip(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` cells (wide characters count 2)."""
    while cell_len(text) > width:
        text = text[:-1]
    return text


def elide(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, the middle replaced by ``…`` (60% head, 40% tail)."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = math.ceil((width - 1) * 0.6)
    tail = width - 1 - head
    out = text[:head] + ELLIPSIS + (text[-tail:] if tail else "")
    return _clip(out, width)


def _matching(text: str, start: int) -> int | None:
    """Index of the ``>`` closing the ``<`` at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "<":
            depth += 1
        elif text[i] == ">":
            depth -= 1
            if depth == 0:
                return i
    return None


def _close_paren(text: str) -> int | None:
    """Index of the ``(`` opening the trailing ``(...)`` of ``text`` (a C++ argument list)."""
    if not text.endswith(")"):
        return None
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        ch = text[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                return i if i > 0 else None
    return None


def compact_name(name: str) -> str:
    """A long kernel signature without what rarely tells kernels apart.

    Drops a leading ``void `` or ``std::enable_if<...>::type ``, ``(anonymous namespace)::``,
    the PyTorch and standard-library namespaces (``at::native::``, ``c10::``, ``std::``) and
    the trailing argument list (written ``(…)``); the template arguments, which carry the
    configuration, and other namespaces (``gemvx::kernel``) stay.
    """
    out = " ".join(name.split())
    out = out.replace("(anonymous namespace)::", "")
    if out.startswith("void "):
        out = out[5:]
    out = _QUALIFIER.sub("", out)
    if out.startswith("enable_if<"):  # std::enable_if<...>::type: a return type
        end = _matching(out, len("enable_if"))
        if end is not None and out.startswith("::type ", end + 1):
            out = out[end + len("::type ") + 1 :]
    start = _close_paren(out)
    if start is not None and start > 0 and len(out) - start > 3:
        out = out[:start] + "(" + ELLIPSIS + ")"
    return out


def _without_args(name: str, width: int) -> str:
    """Drop a trailing ``(…)`` when the name is too long anyway."""
    suffix = "(" + ELLIPSIS + ")"
    if cell_len(name) > width and name.endswith(suffix):
        return name[: -len(suffix)]
    return name


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _head(text: str, width: int) -> int:
    """How much of the start to keep: the short name (up to the first ``<`` or ``(``) if it fits."""
    cut = min((i for i in (text.find("<"), text.find("(")) if i > 0), default=-1)
    want = cut + 1 if cut > 0 else width // 4
    return max(6, min(want, width // 2))


def _distinct_elide(text: str, width: int, lcp: int) -> str:
    """Elide ``text`` keeping its head and the part from ``lcp`` on, where it first differs."""
    head = _head(text, width)
    if width < 12 or lcp <= head + 2:
        return elide(text, width)
    # start the window a token or two before the first difference (MT128x..., tile sizes)
    start = lcp
    for _ in range(2):
        prev = [m.end() for m in _BOUNDARY.finditer(text, 0, max(start - 1, 0))]
        if prev and prev[-1] > head:
            start = prev[-1]
    start = max(head, min(start, lcp))
    rest = width - head - 1
    if len(text) - start <= rest:
        return _clip(text[:head] + ELLIPSIS + text[start:], width)
    tail = max(0, min(width // 6, 10))
    window = rest - 1 - tail
    if window < 6:
        tail, window = 0, rest - 1
    out = text[:head] + ELLIPSIS + text[start : start + window] + ELLIPSIS
    return _clip(out + (text[-tail:] if tail else ""), width)


def fit_names(values: Sequence[str], width: int) -> list[str]:
    """Each value in at most ``width`` cells, keeping the values told apart where possible.

    Values that fit stay whole. Longer ones are compacted (:func:`compact_name`, unless that
    would merge two of them), then elided in the middle; where the first character in which
    a value differs from the values most like it would fall in the elided middle (three
    Tensile GEMMs sharing their first 50 characters), the elision keeps the head (the short
    name) and a window from that character on (the tile or configuration suffix).
    """
    distinct = list(dict.fromkeys(values))
    done: dict[str, str] = {v: v for v in distinct if cell_len(v) <= width}
    long = [v for v in distinct if v not in done]
    if not long:
        return list(values)
    compact = {v: _without_args(compact_name(v), width) for v in long}
    merged = Counter(compact.values())
    forms = {v: (compact[v] if merged[compact[v]] == 1 else v) for v in long}
    ordered = sorted(set(forms.values()))
    nearest: dict[str, int] = {}
    for i, f in enumerate(ordered):
        near = [ordered[j] for j in (i - 1, i + 1) if 0 <= j < len(ordered)]
        nearest[f] = max((_common_prefix(f, o) for o in near), default=0)
    for v in long:
        f = forms[v]
        if cell_len(f) <= width:
            done[v] = f
            continue
        plain = elide(f, width)
        shown = len(plain.split(ELLIPSIS, 1)[0])
        done[v] = plain if nearest[f] < shown - 1 else _distinct_elide(f, width, nearest[f])
    return [done[v] for v in values]


def _need(col: Column) -> tuple[int, int, int]:
    """(content width, full header width, widest header token) of a column."""
    content = max((cell_len(c) for c in col.cells), default=0)
    tokens = [t.rstrip() for t in _TOKEN.findall(col.header) if t.strip()]
    token = max((cell_len(t) for t in tokens), default=0)
    return content, cell_len(col.header), token


def _total(widths: Sequence[int]) -> int:
    return sum(widths) + SEP * max(len(widths) - 1, 0)


def _grow(widths: list[int], wants: list[int], idx: Sequence[int], extra: int) -> int:
    """Give ``extra`` cells to columns ``idx`` towards ``wants``, smallest need first."""
    order = sorted(idx, key=lambda i: wants[i] - widths[i])
    left = len(order)
    for i in order:
        share = extra // left if left else 0
        give = min(max(wants[i] - widths[i], 0), share)
        widths[i] += give
        extra -= give
        left -= 1
    return extra


def _key_column(columns: Sequence[Column]) -> int | None:
    """The column naming a row (repeated in every block, kept a third of the width): the
    first ``name``-like text column (``name``, ``*_name``, ``kernel``, ``module_path``,
    ``metric``), else the first text column."""
    text = [i for i, c in enumerate(columns) if not c.numeric]
    named = [i for i in text if columns[i].source in ("name", "kernel", "module_path", "metric")
             or columns[i].source.endswith("name")]
    pick = named or text
    return pick[0] if pick else None


def plan(columns: Sequence[Column], width: int) -> list[list[tuple[int, int]]]:
    """Blocks of ``(column index, width)`` that fit ``width`` (one block when they all fit)."""
    needs = [_need(c) for c in columns]
    desired = [max(content, head) for content, head, _ in needs]
    if _total(desired) <= width or len(columns) <= 1:
        return [[(i, min(w, width) if not columns[i].fixed else w) for i, w in enumerate(desired)]]
    key = _key_column(columns)
    for text_min in (TEXT_MIN, TEXT_MIN * 3 // 4):
        minimal = [
            max(content, token) if col.fixed else max(min(content, text_min), token)
            for col, (content, _, token) in zip(columns, needs, strict=True)
        ]
        if key is not None and not columns[key].fixed:  # the row's name keeps a third of the width
            minimal[key] = max(minimal[key], min(needs[key][0], max(TEXT_MIN, width // 3)))
        if _total(minimal) <= width:
            return [_fill(list(range(len(columns))), minimal, needs, columns, width)]
    rest = [i for i in range(len(columns)) if i != key]
    groups = _balanced(rest, minimal, [minimal[key]] if key is not None else [], width)
    return [_fill(([key] if key is not None else []) + g, minimal, needs, columns, width) for g in groups]


def _balanced(rest: list[int], minimal: list[int], base: list[int], width: int) -> list[list[int]]:
    """``rest`` in as few consecutive groups as fit beside ``base``, of similar widths."""
    def greedy(limit: int) -> list[list[int]]:
        groups: list[list[int]] = []
        group: list[int] = []
        for i in rest:
            if group and _total([*base, *(minimal[j] for j in group), minimal[i]]) > limit:
                groups.append(group)
                group = []
            group.append(i)
        return [*groups, group] if group else groups

    fewest = greedy(width)
    # the narrowest limit that still needs no more groups: blocks of even widths, so that
    # each has room left for its text columns
    lo, hi = max(minimal[i] for i in rest), width
    while lo < hi:
        mid = (lo + hi) // 2
        if len(greedy(mid)) <= len(fewest):
            hi = mid
        else:
            lo = mid + 1
    return greedy(hi)


def _fill(
    members: list[int],
    minimal: list[int],
    needs: list[tuple[int, int, int]],
    columns: Sequence[Column],
    width: int,
) -> list[tuple[int, int]]:
    """Widths of ``members`` from their minimum, grown into the room left (text first)."""
    widths = list(minimal)
    extra = width - _total([minimal[i] for i in members])
    text = [i for i in members if not columns[i].fixed]
    wants = [max(n[0], minimal[i]) for i, n in enumerate(needs)]
    # names first up to a readable width, then whole headers, then names in full
    readable = [max(min(w, READABLE), minimal[i]) for i, w in enumerate(wants)]
    extra = _grow(widths, readable, text, extra)
    heads = [max(n[1], widths[i]) for i, n in enumerate(needs)]
    extra = _grow(widths, heads, members, extra)
    _grow(widths, [max(w, widths[i]) for i, w in enumerate(wants)], text, extra)
    return [(i, widths[i]) for i in members]


def _pad(text: str, width: int, numeric: bool) -> str:
    gap = " " * max(width - cell_len(text), 0)
    return gap + text if numeric else text + gap


def render_block(columns: Sequence[Column], block: Sequence[tuple[int, int]]) -> list[str]:
    """The lines of one block: wrapped headers (bottom-aligned), a rule, the rows."""
    heads = [wrap_header(columns[i].header, w) for i, w in block]
    depth = max((len(h) for h in heads), default=1)
    heads = [[""] * (depth - len(h)) + h for h in heads]
    cells = [
        columns[i].cells if columns[i].fixed else fit_names(columns[i].cells, w)
        for i, w in block
    ]
    sep = " " * SEP
    lines = []
    for k in range(depth):
        lines.append(sep.join(
            _pad(heads[j][k], w, columns[i].numeric) for j, (i, w) in enumerate(block)
        ).rstrip())
    lines.append(sep.join("─" * w for _, w in block))
    rows = len(columns[block[0][0]].cells) if block else 0
    for r in range(rows):
        lines.append(sep.join(
            _pad(cells[j][r], w, columns[i].numeric) for j, (i, w) in enumerate(block)
        ).rstrip())
    return lines


def render(columns: Sequence[Column], width: int) -> list[str]:
    """The whole table in lines of at most ``width`` cells (numbers permitting)."""
    blocks = plan(columns, width)
    lines: list[str] = []
    keyed = len(blocks) > 1 and not columns[blocks[0][0][0]].numeric
    for n, block in enumerate(blocks):
        if len(blocks) > 1:
            key = f", each with {columns[block[0][0]].header}" if keyed else ""
            note = (f"(block {n + 1} of {len(blocks)}: the table is wider than the terminal, "
                    f"its columns follow in {len(blocks)} blocks{key})") if not n else (
                    f"(block {n + 1} of {len(blocks)})")
            lines += ([""] if n else []) + [elide(note, width)]
        lines += render_block(columns, block)
    return lines
