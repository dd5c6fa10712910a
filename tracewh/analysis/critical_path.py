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

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from tracewh.analysis.longest_path import longest_path, mv

#: The classification of a critical path's time (HTA's ``BoundType`` plus ``dependency``).
BOUNDS: tuple[str, ...] = (
    "cpu_bound", "data_loading", "gpu_compute_bound", "gpu_communication_bound",
    "gpu_kernel_kernel_overhead", "gpu_kernel_launch_overhead", "dependency",
)
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
    merge_tids: Mapping[int, int] | None = None,
) -> CriticalPath:
    """The critical path of the graph these rows make (see the module docstring).

    Parameters
    ----------
    cpu, gpu, sync
        Rows of ``cp_cpu`` (with its ``blocking``, ``lock`` and ``loading`` flags), ``cp_gpu``
        and ``cp_sync`` (``sql/83_critical_path.sql``) for one run and window.
    merge_tids
        Threads walked as part of another (``cp_thread_merge``: the backward thread into the
        forward one, as HTA does), ``{from_tid: to_tid}``.

    Returns
    -------
    CriticalPath
        Empty (``total_ns`` 0) when there are no events. ``edges`` carry the attributed
        event's ``event_index``; its name is the caller's to look up.
    """
    if merge_tids:
        cpu = cpu.with_columns(pl.col("tid").replace(dict(merge_tids)))
    n_cpu, n_gpu = cpu.height, gpu.height
    n_ev = n_cpu + n_gpu
    if n_ev == 0:
        return CriticalPath(0, dict.fromkeys(BOUNDS, 0), _edge_frame(*(np.zeros(0, np.int64),) * 5))
    ev_index = np.concatenate([_int_col(cpu, "event_index"), _int_col(gpu, "event_index")])
    ts = np.concatenate([_int_col(cpu, "ts_ns"), _int_col(gpu, "ts_ns")])
    end = ts + np.concatenate([_int_col(cpu, "dur_ns"), _int_col(gpu, "dur_ns")])
    flags = {c: np.zeros(n_ev, np.bool_) for c in ("blocking", "lock", "loading", "comm")}
    for c in ("blocking", "lock", "loading"):
        flags[c][:n_cpu] = cpu[c].fill_null(False).to_numpy()
    flags["comm"][n_cpu:] = gpu["comm"].fill_null(False).to_numpy()
    # nodes: start (2e) and end (2e+1) of each event, numbered in (ts, event_index) order
    raw_ts = np.empty(2 * n_ev, np.int64)
    raw_ts[0::2], raw_ts[1::2] = ts, end
    del ts, end
    order = np.lexsort((np.repeat(ev_index, 2), raw_ts))
    node_ts = raw_ts[order]
    del raw_ts
    node_of = np.empty(2 * n_ev, np.int32)
    node_of[order] = np.arange(2 * n_ev, dtype=np.int32)
    node_row = (order // 2).astype(np.int32)  # event row of each node
    node_start = order % 2 == 0
    del order
    start_node, end_node = node_of[0::2].copy(), node_of[1::2].copy()
    del node_of
    edges = _Edges()
    _lock_edges(edges, flags["lock"], node_row, node_start)
    del node_row, node_start
    _call_stacks(edges, cpu, start_node, end_node, flags["lock"], flags["blocking"])
    _gpu_edges(edges, cpu, gpu, sync, n_cpu, start_node, end_node, node_ts)
    del start_node, end_node
    src, dst, kind, attr, zero = edges.arrays()
    weight = np.where(zero | (kind == DEPENDENCY) | (kind == SYNC), 0,
                      node_ts[dst] - node_ts[src]).astype(np.int64)
    weight[weight <= NEGATIVE_FLOOR_NS] = 0
    del zero
    src, dst, kind, attr, weight = _last_of_duplicates(src, dst, kind, attr, weight, 2 * n_ev)
    path = longest_path(src, dst, weight, 2 * n_ev)
    p_kind, p_attr, p_w = kind[path].astype(np.int64), attr[path].astype(np.int64), weight[path]
    bound = _bounds(p_kind, p_attr, n_cpu, flags["comm"], flags["loading"])
    by_bound = {b: int(p_w[bound == i].sum()) for i, b in enumerate(BOUNDS)}
    ev_out = np.where(p_attr >= 0, ev_index[np.maximum(p_attr, 0)], -1)
    frame = _edge_frame(p_kind, bound, ev_out, node_ts[src[path]], p_w)
    return CriticalPath(int(p_w.sum()), by_bound, frame, nodes=2 * n_ev, graph_edges=len(src))


def _edge_frame(kind: np.ndarray, bound: np.ndarray, ev: np.ndarray, ts_: np.ndarray,
                w: np.ndarray) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "kind": pl.Series(kind, dtype=pl.Int64).replace_strict(
                dict(enumerate(EDGE_TYPES)), return_dtype=pl.String),
            "bound": pl.Series(bound, dtype=pl.Int64).replace_strict(
                dict(enumerate(BOUNDS)), return_dtype=pl.String),
            "event_index": pl.Series(ev, dtype=pl.Int64),
            "ts_ns": pl.Series(ts_, dtype=pl.Int64),
            "dur_ns": pl.Series(w, dtype=pl.Int64),
        }
    ).with_columns(pl.when(pl.col("event_index") >= 0).then(pl.col("event_index")))


def _bounds(kind: np.ndarray, attr: np.ndarray, n_cpu: int, comm: np.ndarray,
            loading: np.ndarray) -> np.ndarray:
    """Each path edge's bound, as an index into :data:`BOUNDS`."""
    b = {name: i for i, name in enumerate(BOUNDS)}
    safe = np.maximum(attr, 0)
    on_gpu = (attr >= n_cpu)
    out = np.full(len(kind), b["dependency"], np.int64)
    op = (kind == OPERATOR) & (attr >= 0)
    out[op & on_gpu & comm[safe]] = b["gpu_communication_bound"]
    out[op & on_gpu & ~comm[safe]] = b["gpu_compute_bound"]
    out[op & ~on_gpu & loading[safe]] = b["data_loading"]
    out[op & ~on_gpu & ~loading[safe]] = b["cpu_bound"]
    out[kind == KERNEL_KERNEL] = b["gpu_kernel_kernel_overhead"]
    out[kind == LAUNCH] = b["gpu_kernel_launch_overhead"]
    return out


def _lock_edges(edges: _Edges, lock: np.ndarray, node_row: np.ndarray,
                node_start: np.ndarray) -> None:
    """Runtime calls holding the CUDA runtime lock, chained in the order they completed."""
    nodes = np.flatnonzero(lock[node_row])
    rows = mv(node_row[nodes])
    starts = mv(node_start[nodes].astype(np.uint8))
    ids = mv(nodes.astype(np.int64))
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
                 lock: np.ndarray, blocking: np.ndarray) -> None:
    """Each CPU thread's nested operators, walked depth first (HTA's call-stack edges)."""
    if cpu.height == 0:
        return
    order = np.lexsort((
        cpu["event_index"].to_numpy(), -(cpu["dur_ns"].to_numpy()), cpu["ts_ns"].to_numpy(),
        cpu["tid"].fill_null(-1).to_numpy(), cpu["pid"].fill_null(-1).to_numpy(),
    ))
    pid = mv(cpu["pid"].fill_null(-1).to_numpy()[order].astype(np.int64))
    tid = mv(cpu["tid"].fill_null(-1).to_numpy()[order].astype(np.int64))
    ts = mv(cpu["ts_ns"].to_numpy()[order].astype(np.int64))
    end = mv((cpu["ts_ns"].to_numpy() + cpu["dur_ns"].to_numpy())[order].astype(np.int64))
    rows = mv(order.astype(np.int64))
    sn = mv(start_node.astype(np.int64))
    en = mv(end_node.astype(np.int64))
    lk = mv(lock.astype(np.uint8))
    blk = mv(blocking.astype(np.uint8))

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


def _rows_of(sorted_ev: np.ndarray, wanted: np.ndarray, offset: int = 0) -> np.ndarray:
    """The row (``offset`` + position in ``sorted_ev``) of each wanted event_index; -1 if absent."""
    if len(sorted_ev) == 0:
        return np.full(len(wanted), _NONE, np.int64)
    pos = np.searchsorted(sorted_ev, wanted)
    pos = np.minimum(pos, len(sorted_ev) - 1)
    return np.where(sorted_ev[pos] == wanted, pos + offset, _NONE).astype(np.int64)


def _int_col(df: pl.DataFrame, col: str, null: int = _NONE) -> np.ndarray:
    return df[col].fill_null(null).to_numpy().astype(np.int64)


def _gpu_edges(edges: _Edges, cpu: pl.DataFrame, gpu: pl.DataFrame, sync: pl.DataFrame,
               n_cpu: int, start_node: np.ndarray, end_node: np.ndarray,
               node_ts: np.ndarray) -> None:
    """GPU ops: their spans, launch and kernel-kernel delays, and the sync edges."""
    cpu_ev = _int_col(cpu, "event_index")
    gpu_ev = _int_col(gpu, "event_index")
    n_g = gpu.height
    # ops by start, sync events by end (a Stream Sync overlapping the op it waits for comes after)
    keys = np.concatenate([_int_col(gpu, "ts_ns"), _int_col(sync, "end_ns")])
    tie = np.concatenate([gpu_ev, _int_col(sync, "event_index")])
    order = mv(np.lexsort((tie, keys)).astype(np.int64))
    sn, en, nts = mv(start_node.astype(np.int64)), mv(end_node.astype(np.int64)), mv(node_ts)
    g_event = mv(gpu_ev)
    g_dev = mv(_int_col(gpu, "device"))
    g_stream = mv(_int_col(gpu, "stream"))
    g_launch_row = mv(_rows_of(cpu_ev, _int_col(gpu, "launch_index", -2)))
    g_launch_ts = mv(_int_col(gpu, "launch_ts_ns", 0))
    g_ql = mv(_int_col(gpu, "q_launch", -99))
    g_qo = mv(_int_col(gpu, "q_op", -99))
    kinds = {"Context Sync": 0, "Stream Sync": 1, "Event Sync": 2, "Stream Wait Event": 3}
    s_kind = mv(sync["kind"].replace_strict(kinds, default=-1, return_dtype=pl.Int64)
                 .to_numpy().astype(np.int64))
    s_dev = mv(_int_col(sync, "device"))
    s_stream = mv(_int_col(sync, "stream"))
    s_rt_row = mv(_rows_of(cpu_ev, _int_col(sync, "runtime_index", -2)))
    src_ev = _int_col(sync, "src_op", -2)
    s_src_ev = mv(src_ev)
    s_src_row = mv(_rows_of(gpu_ev, src_ev, n_cpu))
    s_dest = mv(_int_col(sync, "dest_op", -2))
    last: dict[tuple[int, int], int] = {}  # per (device, stream): the last op's end node
    kernel_sync: dict[int, int] = {}  # op event_index -> the op event_index it waits for
    for i in range(len(order)):
        j = order[i]
        if j >= n_g:
            k = j - n_g
            kind, rt = s_kind[k], s_rt_row[k]
            if kind in (2, 3):  # Event Sync, Stream Wait Event
                if s_src_ev[k] == -2:
                    continue
                if kind == 3:
                    if s_dest[k] != -2:
                        kernel_sync[s_dest[k]] = s_src_ev[k]
                elif s_src_row[k] >= 0 and rt >= 0:
                    edges.add(en[s_src_row[k]], en[rt], SYNC)
                continue
            if rt < 0:
                continue
            if kind == 0:
                for node in list(last.values()):
                    edges.add(node, en[rt], SYNC)
            elif kind == 1:
                one = last.get((s_dev[k], s_stream[k]))
                if one is not None:
                    edges.add(one, en[rt], SYNC)
            continue
        row = n_cpu + j
        s_node, e_node = sn[row], en[row]
        edges.add(s_node, e_node, OPERATOR, row)
        key = (g_dev[j], g_stream[j])
        ks_src = kernel_sync.pop(g_event[j], None)
        ks_end = _NONE
        if ks_src is not None:
            ks_row = int(_rows_of(gpu_ev, np.asarray([ks_src], np.int64), n_cpu)[0])
            if ks_row < 0:
                ks_src = None
            else:
                ks_end = en[ks_row]
                edges.add(ks_end, s_node, SYNC)
        prev = last.get(key)
        launch_row, lts = g_launch_row[j], g_launch_ts[j]
        if (g_ql[j] == 1 and g_qo[j] == 0 and launch_row >= 0
                and (prev is None or nts[prev] < lts)
                and (ks_src is None or nts[ks_end] < lts)):
            edges.add(sn[launch_row], s_node, LAUNCH)
        elif (prev is not None and nts[s_node] - nts[prev] < KERNEL_KERNEL_MAX_NS
              and (ks_src is None or nts[ks_end] < nts[prev])):
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
