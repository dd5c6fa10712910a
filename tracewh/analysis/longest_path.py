"""The longest path of a weighted DAG, in linear time: the critical path's last step.

Kahn's topological order over edges sorted by source, relaxing each node's outgoing edges
once. Used by :mod:`tracewh.analysis.critical_path`.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

__all__ = ["longest_path", "mv"]


def mv(a: np.ndarray) -> memoryview:
    """A zero-copy view of an array whose items read as Python ints (fast in a loop)."""
    return memoryview(cast("Any", np.ascontiguousarray(a)))


def longest_path(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, n: int) -> np.ndarray:
    """Edge ids of the longest path of the DAG, in path order (Kahn's topological order).

    As networkx's ``dag_longest_path``: a node's distance is the largest over its incoming
    edges of the source's distance plus the weight, restarting at 0 where that is negative;
    the path ends at the node of largest distance.
    """
    if len(src) == 0:
        return np.zeros(0, np.int64)
    by_src = np.argsort(src, kind="stable")
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=ptr[1:])
    out_dst = mv(dst[by_src].astype(np.int64))
    out_w = mv(weight[by_src])
    out_id = mv(by_src.astype(np.int64))
    pv = mv(ptr)
    indeg_np = np.bincount(dst, minlength=n).astype(np.int64)
    indeg = mv(indeg_np)
    floor = np.iinfo(np.int64).min
    best_np = np.full(n, floor, np.int64)
    best = mv(best_np)
    pred_np = np.full(n, -1, np.int64)
    pred = mv(pred_np)
    dist_np = np.zeros(n, np.int64)
    dist = mv(dist_np)
    ready = np.flatnonzero(indeg_np == 0)[::-1].tolist()
    while ready:
        u = ready.pop()
        b = best[u]
        if b == floor or b < 0:
            d = 0
            pred[u] = -1
        else:
            d = b
        dist[u] = d
        for i in range(pv[u], pv[u + 1]):
            v = out_dst[i]
            c = d + out_w[i]
            if c > best[v]:
                best[v] = c
                pred[v] = out_id[i]
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    end = int(np.argmax(dist_np))
    del best_np, dist_np, indeg_np
    path = np.empty(n, np.int64)  # filled from the end backwards
    k = n
    e = int(pred_np[end])
    while e >= 0:
        k -= 1
        path[k] = e
        e = int(pred_np[src[e]])
    return path[k:].copy()
