"""Critical path of a run (HTA's event graph), over columnar rows in bounded memory.

The graph is the one HTA 0.6 (``hta.analyzers.critical_path_analysis.CPGraph``) builds, from
the rows of ``sql/83_critical_path.sql``, held in numpy arrays (never one Python object per
event); the longest path is found in topological order (Kahn), exact in ns.

Nodes: the start and the end of every CPU operator and runtime/driver call (``cp_cpu``) and
of every GPU op linked to a runtime call (``cp_gpu``). Edges, each with a weight in ns:

- *operator*: along each CPU thread, between consecutive enter/exit points of the nested
  operators (a span of the enclosing operator's time; zero into the end of a blocking call:
  cudaDeviceSynchronize, cudaStreamSynchronize, cudaEventQuery, cudaEventSynchronize,
  cudaMemcpy, cudaMemcpyAsync); from a GPU op's start to its end;
- *dependency* (weight 0): from one top-level operator of a thread to the next, and between
  runtime calls that hold the CUDA runtime lock (cudaHostAlloc, cudaLaunchKernel,
  cudaMemcpyAsync) in the order they completed;
- *kernel launch delay*: from a launch call's start to its op's start, when the stream's queue
  was empty (queue length 1 after the launch, 0 when the op started), the previous op on the
  stream had ended before the launch and so had any op it waits for;
- *kernel-kernel delay*: otherwise, from the previous op's end on the same stream to this
  op's start, when that gap is under 1500 us;
- *sync* (weight 0): from the last op on a stream (Stream Sync; every stream for Context
  Sync) or the op recorded by the waited event (Event Sync) to the end of the synchronising
  runtime call; from the recorded op to the next op launched onto a stream that waits for
  it (Stream Wait Event).

Edges of -1 us or less (overlaps that nesting cannot explain) weigh 0, as in HTA. Each
edge on the path is classified (``BOUNDS``): kernel-kernel delay ->
``gpu_kernel_kernel_overhead``, launch delay -> ``gpu_kernel_launch_overhead``, dependency and
sync -> ``dependency``, an operator edge of a GPU op -> ``gpu_communication_bound`` (a
communication kernel) or ``gpu_compute_bound``, of a CPU event -> ``data_loading`` (its name
matches a data-loading pattern) or ``cpu_bound``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import polars as pl

#: The classification of a critical path's time (HTA's ``BoundType`` plus ``dependency``).
BOUNDS: tuple[str, ...] = (
    "cpu_bound", "data_loading", "gpu_compute_bound", "gpu_communication_bound",
    "gpu_kernel_kernel_overhead", "gpu_kernel_launch_overhead", "dependency",
)
#: Runtime calls whose exit edge weighs 0 (the time is the GPU's, reached by a sync edge).
BLOCKING_CALLS = frozenset({
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventQuery", "cudaEventSynchronize",
    "cudaMemcpy", "cudaMemcpyAsync",
})
#: Runtime calls that hold the CUDA runtime lock.
LOCK_CALLS = frozenset({"cudaHostAlloc", "cudaLaunchKernel", "cudaMemcpyAsync"})
#: Largest gap between two ops of a stream still taken as a kernel-kernel delay.
KERNEL_KERNEL_MAX_NS = 1_500_000
#: Edges at or below this (ns) weigh 0.
NEGATIVE_FLOOR_NS = -1_000

OPERATOR, DEPENDENCY, LAUNCH, KERNEL_KERNEL, SYNC = range(5)
EDGE_TYPES = ("operator", "dependency", "kernel_launch_delay", "kernel_kernel_delay", "sync")
_NONE = -1


@dataclass(frozen=True)
class CriticalPath:
    """A critical path: its length, its time by bound, its edges in path order.

    ``edges``: one row per edge, ``kind`` (operator, dependency, kernel_launch_delay,
    kernel_kernel_delay, sync), ``bound`` (one of :data:`BOUNDS`), ``event_index`` (the event
    the edge is attributed to; NULL for delays between events), ``name``, ``ts_ns`` (where
    the edge starts), ``dur_ns`` (its weight).
    """

    total_ns: int
    by_bound: dict[str, int]
    edges: pl.DataFrame
    nodes: int = 0
    graph_edges: int = 0
    extra: dict[str, object] = field(default_factory=dict)


def _mv(a: np.ndarray) -> memoryview:
    """A zero-copy view of an array whose items read as Python ints (fast in a loop)."""
    return memoryview(cast("Any", np.ascontiguousarray(a)))


class _Edges:
    """Growing edge arrays (chunks of numpy arrays)."""

    def __init__(self) -> None:
        self.parts: list[tuple[np.ndarray, ...]] = []
        self.src: list[int] = []
        self.dst: list[int] = []
        self.kind: list[int] = []
        self.attr: list[int] = []
        self.zero: list[bool] = []

    def add(self, src: int, dst: int, kind: int, attr: int = _NONE, zero: bool = False) -> None:
        self.src.append(src)
        self.dst.append(dst)
        self.kind.append(kind)
        self.attr.append(attr)
        self.zero.append(zero)
        if len(self.src) >= 65_536:
            self.flush()

    def flush(self) -> None:
        if self.src:
            self.parts.append((
                np.asarray(self.src, dtype=np.int32), np.asarray(self.dst, dtype=np.int32),
                np.asarray(self.kind, dtype=np.int8), np.asarray(self.attr, dtype=np.int32),
                np.asarray(self.zero, dtype=np.bool_),
            ))
            self.src, self.dst, self.kind, self.attr, self.zero = [], [], [], [], []

    def arrays(self) -> tuple[np.ndarray, ...]:
        self.flush()
        if not self.parts:
            return (np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int8),
                    np.zeros(0, np.int32), np.zeros(0, np.bool_))
        out = tuple(np.concatenate([p[i] for p in self.parts]) for i in range(5))
        self.parts = []
        return out


def critical_path(
    cpu: pl.DataFrame,
    gpu: pl.DataFrame,
    sync: pl.DataFrame,
    *,
    data_loading: Sequence[str] = (),
    merge_tids: Mapping[int, int] | None = None,
) -> CriticalPath:
    """The critical path of the graph these rows make (see the module docstring).

    Parameters
    ----------
    cpu, gpu, sync
        Rows of ``cp_cpu``, ``cp_gpu`` and ``cp_sync`` (``sql/83_critical_path.sql``) for one
        run and window.
    data_loading
        Regular expressions: CPU events whose name matches one count as ``data_loading``.
    merge_tids
        Threads walked as part of another (``cp_thread_merge``: the backward thread into the
        forward one, as HTA does), ``{from_tid: to_tid}``.

    Returns
    -------
    CriticalPath
        Empty (``total_ns`` 0) when there are no events.
    """
    if merge_tids:
        cpu = cpu.with_columns(pl.col("tid").replace(dict(merge_tids)))
    n_cpu, n_gpu = cpu.height, gpu.height
    n_ev = n_cpu + n_gpu
    if n_ev == 0:
        return CriticalPath(0, dict.fromkeys(BOUNDS, 0), _edge_frame([], [], [], [], [], []))
    ev_index = np.concatenate([cpu["event_index"].to_numpy(), gpu["event_index"].to_numpy()])
    ts = np.concatenate([cpu["ts_ns"].to_numpy(), gpu["ts_ns"].to_numpy()]).astype(np.int64)
    dur = np.concatenate([cpu["dur_ns"].to_numpy(), gpu["dur_ns"].to_numpy()]).astype(np.int64)
    cpu_names = cpu["name"].fill_null("")
    blocking = np.zeros(n_ev, np.bool_)
    lock = np.zeros(n_ev, np.bool_)
    blocking[:n_cpu] = cpu_names.is_in(list(BLOCKING_CALLS)).to_numpy()
    lock[:n_cpu] = cpu_names.is_in(list(LOCK_CALLS)).to_numpy()
    # nodes: start (2e) and end (2e+1) of each event, numbered in (ts, event_index) order
    raw_ts = np.empty(2 * n_ev, np.int64)
    raw_ts[0::2] = ts
    raw_ts[1::2] = ts + dur
    raw_ev = np.repeat(ev_index, 2)
    order = np.lexsort((raw_ev, raw_ts))
    node_of = np.empty(2 * n_ev, np.int32)
    node_of[order] = np.arange(2 * n_ev, dtype=np.int32)
    node_ts = raw_ts[order]
    node_row = (order // 2).astype(np.int32)  # event row of each node
    node_start = (order % 2 == 0)
    start_node = node_of[0::2]
    end_node = node_of[1::2]
    del raw_ts, raw_ev, order, node_of
    edges = _Edges()
    _lock_edges(edges, lock, node_row, node_start)
    _call_stacks(edges, cpu, start_node, end_node, node_ts, node_start, node_row, lock, blocking)
    _gpu_edges(edges, cpu, gpu, sync, n_cpu, start_node, end_node, node_ts)
    src, dst, kind, attr, zero = edges.arrays()
    weight = np.where(zero | (kind == DEPENDENCY) | (kind == SYNC), 0,
                      node_ts[dst] - node_ts[src]).astype(np.int64)
    weight[weight <= NEGATIVE_FLOOR_NS] = 0
    src, dst, kind, attr, weight = _last_of_duplicates(src, dst, kind, attr, weight, 2 * n_ev)
    path = _longest_path(src, dst, weight, 2 * n_ev)
    is_gpu = np.zeros(n_ev, np.bool_)
    is_gpu[n_cpu:] = True
    comm = np.zeros(n_ev, np.bool_)
    comm[n_cpu:] = gpu["comm"].fill_null(False).to_numpy()
    names = pl.concat([cpu_names, gpu["name"].fill_null("")])
    loading = np.zeros(n_ev, np.bool_)
    if data_loading:
        rx = "|".join(f"(?:{p})" for p in data_loading)
        re.compile(rx)
        loading[:n_cpu] = cpu_names.str.contains(rx).to_numpy()
    p_kind, p_attr, p_w = kind[path], attr[path], weight[path]
    bound = _bounds(p_kind, p_attr, is_gpu, comm, loading)
    by_bound = dict.fromkeys(BOUNDS, 0)
    for b, w in zip(bound, p_w.tolist(), strict=True):
        by_bound[b] += int(w)
    ev_out = [int(ev_index[a]) if a >= 0 else None for a in p_attr.tolist()]
    name_out = [names[int(a)] if a >= 0 else None for a in p_attr.tolist()]
    frame = _edge_frame(
        [EDGE_TYPES[k] for k in p_kind.tolist()], bound, ev_out, name_out,
        node_ts[src[path]].tolist(), p_w.tolist(),
    )
    return CriticalPath(int(p_w.sum()), by_bound, frame, nodes=2 * n_ev, graph_edges=len(src))


def _edge_frame(types: list[str], bound: list[str], ev: list[int | None],
                names: list[str | None], ts_: list[int], w: list[int]) -> pl.DataFrame:
    return pl.DataFrame(
        {"kind": types, "bound": bound, "event_index": ev, "name": names, "ts_ns": ts_[: len(w)],
         "dur_ns": w},
        schema={"kind": pl.String, "bound": pl.String, "event_index": pl.Int64,
                "name": pl.String, "ts_ns": pl.Int64, "dur_ns": pl.Int64},
    )


def _bounds(kind: np.ndarray, attr: np.ndarray, is_gpu: np.ndarray, comm: np.ndarray,
            loading: np.ndarray) -> list[str]:
    out = []
    for k, a in zip(kind.tolist(), attr.tolist(), strict=True):
        if k == KERNEL_KERNEL:
            out.append("gpu_kernel_kernel_overhead")
        elif k == LAUNCH:
            out.append("gpu_kernel_launch_overhead")
        elif k in (DEPENDENCY, SYNC) or a < 0:
            out.append("dependency")
        elif is_gpu[a]:
            out.append("gpu_communication_bound" if comm[a] else "gpu_compute_bound")
        else:
            out.append("data_loading" if loading[a] else "cpu_bound")
    return out


def _lock_edges(edges: _Edges, lock: np.ndarray, node_row: np.ndarray,
                node_start: np.ndarray) -> None:
    """Runtime calls holding the CUDA runtime lock, chained in the order they completed."""
    nodes = np.flatnonzero(lock[node_row])
    rows = _mv(node_row[nodes])
    starts = _mv(node_start[nodes].astype(np.uint8))
    ids = _mv(nodes.astype(np.int64))
    stack: list[tuple[int, int]] = []
    last = _NONE
    last_start = True
    for i in range(len(ids)):
        n, e = ids[i], rows[i]
        if starts[i]:
            stack.append((n, e))
        else:
            while stack:
                p, pe = stack.pop()
                if pe == e:
                    edges.add(p, n, OPERATOR, e)
                else:
                    edges.add(p, n, DEPENDENCY)
            if last != _NONE and not last_start:
                edges.add(last, n, DEPENDENCY)
        last, last_start = n, bool(starts[i])


def _call_stacks(edges: _Edges, cpu: pl.DataFrame, start_node: np.ndarray, end_node: np.ndarray,
                 node_ts: np.ndarray, node_start: np.ndarray, node_row: np.ndarray,
                 lock: np.ndarray, blocking: np.ndarray) -> None:
    """Each CPU thread's nested operators, walked depth first (HTA's call-stack edges)."""
    if cpu.height == 0:
        return
    order = np.lexsort((
        cpu["event_index"].to_numpy(), -(cpu["dur_ns"].to_numpy()), cpu["ts_ns"].to_numpy(),
        cpu["tid"].fill_null(-1).to_numpy(), cpu["pid"].fill_null(-1).to_numpy(),
    ))
    pid = _mv(cpu["pid"].fill_null(-1).to_numpy()[order].astype(np.int64))
    tid = _mv(cpu["tid"].fill_null(-1).to_numpy()[order].astype(np.int64))
    ts = _mv(cpu["ts_ns"].to_numpy()[order].astype(np.int64))
    end = _mv((cpu["ts_ns"].to_numpy() + cpu["dur_ns"].to_numpy())[order].astype(np.int64))
    rows = _mv(order.astype(np.int64))
    sn = _mv(start_node.astype(np.int64))
    en = _mv(end_node.astype(np.int64))
    nts = _mv(node_ts)
    lk = _mv(lock.astype(np.uint8))
    blk = _mv(blocking.astype(np.uint8))
    del node_start, node_row  # the walk knows which node is a start

    thread: tuple[int, int] | None = None
    stack: list[int] = []  # rows, innermost last (with their end ts in ends)
    ends: list[int] = []
    last, last_is_start, last_row = _NONE, False, _NONE

    def shares_lock(a_row: int, a_start: bool, b_row: int, b_start: bool) -> bool:
        return bool(lk[a_row] and lk[b_row] and (a_start or not b_start))

    def leave() -> None:
        nonlocal last, last_is_start, last_row
        r = stack.pop()
        ends.pop()
        e_node = en[r]
        if last != _NONE and not shares_lock(last_row, last_is_start, r, False):
            # case 2 (last is this event's start) and case 3 (an end into an end): this event
            edges.add(last, e_node, OPERATOR, r, bool(blk[r]))
        last, last_is_start, last_row = e_node, False, r

    for i in range(len(rows)):
        key = (pid[i], tid[i])
        if key != thread:
            while stack:
                leave()
            thread = key
            last, last_is_start, last_row = _NONE, False, _NONE
        t = ts[i]
        while stack and ends[-1] <= t:
            leave()
        r = rows[i]
        s_node = sn[r]
        if last != _NONE and not shares_lock(last_row, last_is_start, r, True):
            if not stack:
                edges.add(last, s_node, DEPENDENCY)
            else:
                # case 1: from the enclosing event's start (that event); case 4: from a
                # sibling's end (the enclosing event)
                edges.add(last, s_node, OPERATOR, last_row if last_is_start else stack[-1])
        last, last_is_start, last_row = s_node, True, r
        stack.append(r)
        ends.append(end[i])
    while stack:
        leave()
    del nts


def _gpu_edges(edges: _Edges, cpu: pl.DataFrame, gpu: pl.DataFrame, sync: pl.DataFrame,
               n_cpu: int, start_node: np.ndarray, end_node: np.ndarray,
               node_ts: np.ndarray) -> None:
    """GPU ops: their spans, launch and kernel-kernel delays, and the sync edges."""
    cpu_row = {int(e): i for i, e in enumerate(cpu["event_index"].to_list())} if cpu.height else {}
    gpu_row = {int(e): n_cpu + i for i, e in enumerate(gpu["event_index"].to_list())}
    # ops by start, sync events by end (a Stream Sync overlapping the op it waits for comes after)
    keys = np.concatenate([gpu["ts_ns"].to_numpy(), sync["end_ns"].to_numpy()]).astype(np.int64)
    tie = np.concatenate([gpu["event_index"].to_numpy(), sync["event_index"].to_numpy()])
    order = np.lexsort((tie, keys))
    sn, en, nts = start_node, end_node, node_ts
    g_event = [int(e) for e in gpu["event_index"].to_list()]
    g_dev = gpu["device"].fill_null(-1).to_list()
    g_stream = gpu["stream"].fill_null(-1).to_list()
    g_launch = gpu["launch_index"].to_list()
    g_launch_ts = gpu["launch_ts_ns"].to_list()
    g_ql = gpu["q_launch"].to_list()
    g_qo = gpu["q_op"].to_list()
    s_kind = sync["kind"].to_list()
    s_dev = sync["device"].fill_null(-1).to_list()
    s_stream = sync["stream"].fill_null(-1).to_list()
    s_rt = sync["runtime_index"].to_list()
    s_src = sync["src_op"].to_list()
    s_dest = sync["dest_op"].to_list()
    last: dict[tuple[int, int], int] = {}
    kernel_sync: dict[int, int] = {}
    n_g = gpu.height
    for j in order.tolist():
        if j >= n_g:
            k = j - n_g
            kind = s_kind[k]
            rt = cpu_row.get(s_rt[k]) if s_rt[k] is not None else None
            if kind in ("Stream Wait Event", "Event Sync"):
                src = s_src[k]
                if src is None:
                    continue
                if kind == "Stream Wait Event":
                    if s_dest[k] is not None:
                        kernel_sync[int(s_dest[k])] = int(src)
                    continue
                src_row = gpu_row.get(int(src))
                if src_row is not None and rt is not None:
                    edges.add(int(en[src_row]), int(en[rt]), SYNC)
                continue
            if rt is None:
                continue
            if kind == "Context Sync":
                targets = list(last.values())
            else:
                one = last.get((s_dev[k], s_stream[k]))
                targets = [one] if one is not None else []
            for node in targets:
                edges.add(node, int(en[rt]), SYNC)
            continue
        row = n_cpu + j
        s_node, e_node = int(sn[row]), int(en[row])
        edges.add(s_node, e_node, OPERATOR, row)
        key = (g_dev[j], g_stream[j])
        ks_src = kernel_sync.pop(g_event[j], None)
        ks_end = None
        if ks_src is not None:
            ks_row = gpu_row.get(ks_src)
            if ks_row is None:
                ks_src = None
            else:
                ks_end = int(en[ks_row])
                edges.add(ks_end, s_node, SYNC)
        prev = last.get(key)
        launch_row = cpu_row.get(g_launch[j]) if g_launch[j] is not None else None
        lts = g_launch_ts[j]
        if (g_ql[j] == 1 and g_qo[j] == 0 and launch_row is not None
                and (prev is None or nts[prev] < lts)
                and (ks_src is None or (ks_end is not None and nts[ks_end] < lts))):
            edges.add(int(sn[launch_row]), s_node, LAUNCH)
        elif (prev is not None and nts[s_node] - nts[prev] < KERNEL_KERNEL_MAX_NS
              and (ks_src is None or (ks_end is not None and nts[ks_end] < nts[prev]))):
            edges.add(prev, s_node, KERNEL_KERNEL, row)
        last[key] = e_node


def _last_of_duplicates(src: np.ndarray, dst: np.ndarray, kind: np.ndarray, attr: np.ndarray,
                        weight: np.ndarray, n: int) -> tuple[np.ndarray, ...]:
    """One edge per (src, dst): the one added last (a graph keeps one edge per node pair)."""
    key = src.astype(np.int64) * n + dst.astype(np.int64)
    rev = key[::-1]
    _, first_in_rev = np.unique(rev, return_index=True)
    keep = np.sort(len(key) - 1 - first_in_rev)
    return src[keep], dst[keep], kind[keep], attr[keep], weight[keep]


def _longest_path(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, n: int) -> np.ndarray:
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
    out_dst = _mv(dst[by_src].astype(np.int64))
    out_w = _mv(weight[by_src])
    out_id = _mv(by_src.astype(np.int64))
    pv = _mv(ptr)
    indeg_np = np.bincount(dst, minlength=n).astype(np.int64)
    indeg = _mv(indeg_np)
    floor = np.iinfo(np.int64).min
    best_np = np.full(n, floor, np.int64)
    best = _mv(best_np)
    pred_np = np.full(n, -1, np.int64)
    pred = _mv(pred_np)
    dist_np = np.zeros(n, np.int64)
    dist = _mv(dist_np)
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
    path = []
    e = pred_np[end]
    while e >= 0:
        path.append(int(e))
        e = pred_np[src[e]]
    return np.asarray(path[::-1], dtype=np.int64)
