"""Align a graph replay's GPU ops with the nodes of a capture, by kernel name in order.

A replay need not have as many ops as its capture has nodes (a compiled region that
records one more copy, a profiler that drops an op at the edge of its window): the
alignment is a longest common subsequence of the two name sequences, so nodes may be
inserted or deleted anywhere (start, middle, end, several places) and the rest still
pair up in order. ``sql/45_graphs.sql`` reads the mapping through the DuckDB scalar
function ``graph_align`` (registered by :func:`tracewh.query.db.apply_sql` and, on a query
connection, when a statement first needs it: :mod:`tracewh.query.udfs`); this module is pure Python and imports nothing of tracewh.

Definitions (used by ``graph_replay_map``):

- a replayed op is *matched* when the alignment pairs it with a node of the same kernel
  name (a NULL name never matches);
- a capture without any kernel name (CUDA: ``cudaLaunchKernel`` args carry only ids)
  cannot be aligned by name: when it has exactly as many nodes as the replay has ops
  it is paired by position (the order TraceLens uses), with no op *matched*; with any
  other count nothing is paired (no guessing).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

__all__ = ["EXACT_CELLS", "align", "graph_align", "match_note"]

#: the largest middle part (replay ops x capture nodes, after the common prefix and suffix
#: are paired) aligned by the exact dynamic programme; larger ones use difflib's matching
#: blocks (a longest-matching-block recursion: the same answer on replays that differ by a
#: few nodes, bounded memory on huge graphs)
EXACT_CELLS = 16_000_000


def align(replay: Sequence[str | None], capture: Sequence[str | None]) -> list[int | None]:
    """The capture node (0-based) of each replayed op, or None where it has none.

    Parameters
    ----------
    replay
        Kernel names of the replay's ops, in graph-position order.
    capture
        Kernel names of the capture's nodes in order (None where the launch named none).

    Returns
    -------
    list
        One entry per replayed op: the index of the node it pairs with. Pairs are
        strictly increasing on both sides and always join equal, non-null names, except
        for a capture without names of the replay's length (paired by position).

    Examples
    --------
    >>> align(["a", "b", "c"], ["a", "c"])
    [0, None, 1]
    """
    n, m = len(replay), len(capture)
    if m and all(k is None for k in capture):
        return list(range(n)) if n == m else [None] * n
    out: list[int | None] = [None] * n
    lo = 0
    while lo < n and lo < m and replay[lo] is not None and replay[lo] == capture[lo]:
        out[lo] = lo
        lo += 1
    hi_r, hi_c = n, m
    while hi_r > lo and hi_c > lo and replay[hi_r - 1] is not None and replay[hi_r - 1] == capture[hi_c - 1]:
        hi_r -= 1
        hi_c -= 1
        out[hi_r] = hi_c
    mid_r, mid_c = replay[lo:hi_r], capture[lo:hi_c]
    if not mid_r or not mid_c:
        return out
    pairs = (_lcs_pairs(mid_r, mid_c) if len(mid_r) * len(mid_c) <= EXACT_CELLS
             else _block_pairs(mid_r, mid_c))
    for i, j in pairs:
        out[lo + i] = lo + j
    return out


def _lcs_pairs(a: Sequence[str | None], b: Sequence[str | None]) -> list[tuple[int, int]]:
    """Index pairs of one longest common subsequence of ``a`` and ``b`` (None never equal).

    Row ``i`` of the LCS table is ``L[i][j] = max_{k<=j} max(L[i-1][k], L[i-1][k-1] + eq(i, k))``
    (a running maximum), so each row is two vectorised numpy steps. The traceback walks
    back from the ends and pairs two equal names whenever that pair lies on a longest
    common subsequence.
    """
    import numpy as np

    codes: dict[str, int] = {}
    ca = np.array([-1 if x is None else codes.setdefault(x, len(codes)) for x in a], dtype=np.int64)
    cb = np.array([-2 if x is None else codes.get(x, -3) for x in b], dtype=np.int64)
    n, m = len(ca), len(cb)
    table = np.zeros((n + 1, m + 1), dtype=np.int32)
    for i in range(1, n + 1):
        prev = table[i - 1]
        cand = np.maximum(prev[1:], prev[:-1] + (cb == ca[i - 1]))
        table[i, 1:] = np.maximum.accumulate(cand)
    pairs: list[tuple[int, int]] = []
    i, j = n, m
    while i > 0 and j > 0:
        if ca[i - 1] == cb[j - 1] and table[i, j] == table[i - 1, j - 1] + 1:
            pairs.append((i - 1, j - 1))
            i -= 1
            j -= 1
        elif table[i - 1, j] >= table[i, j - 1]:
            i -= 1
        else:
            j -= 1
    pairs.reverse()
    return pairs


def _block_pairs(a: Sequence[str | None], b: Sequence[str | None]) -> list[tuple[int, int]]:
    """Index pairs from difflib's matching blocks (for middles too big for the table)."""
    sa = ["\x00r" if x is None else x for x in a]
    sb = ["\x00c" if x is None else x for x in b]
    blocks = difflib.SequenceMatcher(None, sa, sb, autojunk=False).get_matching_blocks()
    return [(blk.a + k, blk.b + k) for blk in blocks for k in range(blk.size)]


def graph_align(replay: list[str | None] | None, capture: list[str | None] | None) -> list[int | None]:
    """DuckDB scalar ``graph_align(VARCHAR[], VARCHAR[]) -> INTEGER[]``: :func:`align`, 1-based.

    Entry ``p`` (1-based, a replayed op's ``graph_position``) is the capture node's
    ``position`` it pairs with, NULL where it has none.
    """
    got = align(replay or [], capture or [])
    return [None if j is None else j + 1 for j in got]


def match_note(summary: dict[str, object]) -> str | None:
    """One line saying how a run's graph replays map to captures (``graph_match`` row).

    None when the run replays no graph. Every screen that shows operators, modules or
    annotations taken from a capture prints it beside them.

    Examples
    --------
    >>> match_note({"graph_launches": 1, "replayed_ops": 421, "mapped_launches": 1,
    ...             "paired_ops": 420, "name_matches": 420, "position_ops": 0,
    ...             "unpaired_ops": 1, "match_quality": 420 / 421, "min_match_quality": 420 / 421})
    'graph replays: 420 of 421 replayed GPU ops matched to their capture by kernel name (match quality 99.8%, 1 of 1 launch mapped); 1 unmatched op keeps its own launch attribution'
    """
    launches = _int(summary.get("graph_launches"))
    if not launches:
        return None
    ops = _int(summary.get("replayed_ops"))
    mapped = _int(summary.get("mapped_launches"))
    named = _int(summary.get("name_matches"))
    by_position = _int(summary.get("position_ops"))
    unpaired = _int(summary.get("unpaired_ops"))
    word = "launch" if launches == 1 else "launches"
    if not mapped:
        return (f"graph replays: no capture matches the {launches} graph {word} ({ops} GPU ops): "
                "their ops keep the launch's own attribution")
    quality = summary.get("match_quality")
    pct = f"{100 * float(quality):.1f}%" if isinstance(quality, int | float) else "n/a"
    parts = [f"graph replays: {named} of {ops} replayed GPU ops matched to their capture by "
             f"kernel name (match quality {pct}, {mapped} of {launches} {word} mapped)"]
    if by_position:
        parts.append(f"{by_position} paired by position only: the capture names no kernels "
                     "(CUDA), so the pairing is unverified (low quality)")
    if unpaired:
        parts.append(f"{unpaired} unmatched op{'s' if unpaired != 1 else ''} "
                     f"keep{'s' if unpaired == 1 else ''} {'its' if unpaired == 1 else 'their'} "
                     "own launch attribution")
    return "; ".join(parts)


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) else 0
