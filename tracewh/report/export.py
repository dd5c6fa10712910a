"""Export a run back to Chrome / Perfetto trace JSON (``.json`` or ``.json.gz``).

The file opens in ui.perfetto.dev and chrome://tracing and re-ingests into
tracewh with the same kernel ranking and stream gaps:

- ``ts``/``dur`` are decimal microseconds with exactly three decimals, written
  from the stored int64 nanoseconds by integer arithmetic (never through float);
- process and thread names and sort indexes come back from ``threads``;
- duration events are properly nested per track: an event that partly overlaps
  an earlier one on its (pid, tid) moves to an extra lane of that thread
  (``tid`` ``"<tid>:<k>"``, named ``"<thread> (overlap k)"``); GPU ops keep their
  ``stream``/``device`` args, so analyses see the same streams;
- flows (``ac2g`` launch -> kernel and the others) are kept, and follow an event
  moved to an overlap lane;
- memory: besides the ``[memory]`` instants themselves, allocated and reserved bytes
  per device as counter tracks (``"cuda:0 memory"``, see
  :mod:`tracewh.report.memory_export`), kept unless ``--cat`` names neither
  ``memory`` nor ``cpu_instant_event``;
- memory is bounded by ``batch_rows`` (and the largest single track), never by
  the run's size: tracks are read a group at a time, other tables by slices of
  ``event_index``.
"""

from __future__ import annotations

import datetime as dt
import gzip
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

import polars as pl

from tracewh.core.atomic import atomic_file
from tracewh.core.errors import UsageError
from tracewh.query.runsel import RunSelector
from tracewh.report.memory_export import MEMORY_COUNTER_CAT, export_memory_counters
from tracewh.report.protocol import WarehouseLike
from tracewh.schema.arrow import GPU_OP_CATEGORIES, LAUNCH_FLOW_CATEGORIES

_NULL_KEY = -(1 << 62)
#: Metadata keys not written back: the events themselves, and a base time (ts are absolute).
_DROP_KEYS = frozenset({"traceEvents", "baseTimeNanoseconds", "displayTimeUnit"})


@dataclass(frozen=True)
class ExportFilter:
    """Which events to export: a step range, GPU streams, categories (``None``: all)."""

    steps: tuple[int, int] | None = None
    streams: frozenset[int] | None = None
    cats: frozenset[str] | None = None


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_trace` wrote."""

    path: Path
    run_id: str
    events: int
    flows: int
    overlap_lanes: int


def us(ns: int) -> str:
    """Decimal microseconds with three decimals, exactly, from integer nanoseconds.

    Examples
    --------
    >>> us(1712195495505775402)
    '1712195495505775.402'
    >>> us(-1500)
    '-1.500'
    """
    q, r = divmod(abs(ns), 1000)
    return f"{'-' if ns < 0 else ''}{q}.{r:03d}"


def parse_steps(text: str) -> tuple[int, int]:
    """``"A-B"`` or ``"A"`` -> an inclusive step range."""
    a, sep, b = text.partition("-")
    try:
        lo = int(a)
        hi = int(b) if sep else lo
    except ValueError:
        raise UsageError(f"--steps must be A-B or A (ProfilerStep numbers), not {text!r}") from None
    if hi < lo:
        raise UsageError(f"--steps {text!r}: the range is empty")
    return lo, hi


def export_trace(
    wh: WarehouseLike,
    run: RunSelector,
    out: str | Path,
    *,
    where: ExportFilter | None = None,
    batch_rows: int = 200_000,
) -> ExportResult:
    """Write run ``run`` as Chrome trace JSON to ``out`` (gzip when it ends in ``.gz``).

    Parameters
    ----------
    wh
        The warehouse.
    run
        A run selector.
    out
        The file to write (atomically: temp name, then rename).
    where
        Filters: step range, GPU streams, categories.
    batch_rows
        Rows read at a time (tracks are grouped up to this many rows).

    Returns
    -------
    ExportResult
    """
    where = where or ExportFilter()
    ref = wh.resolve_run(run)
    run_id: str = ref.run_id
    meta_rows = wh.scan("runs").filter(pl.col("run_id") == run_id).select("metadata_json").collect()
    meta_text = meta_rows["metadata_json"][0] if meta_rows.height else None
    one = _OneRun(wh, ref.days)  # the run's day partition only: the same cost at any history length
    window = _step_window(one, run_id, where.steps)
    path = Path(out)
    with atomic_file(path) as tmp:
        raw: Any = gzip.open(tmp, "wb", compresslevel=6) if path.name.endswith(".gz") else open(tmp, "wb")  # noqa: SIM115
        with raw, io.TextIOWrapper(raw, encoding="utf-8") as fh:
            fh.write("{")
            meta = _metadata(meta_text)
            for key, value in meta.items():
                fh.write(f"{json.dumps(key)}: {json.dumps(value)},\n")
            fh.write('"traceEvents": [\n')
            writer = _Writer(fh)
            names = _thread_names(one, run_id)
            moved: dict[tuple[int | None, int | None, int], str] = {}
            lanes: set[tuple[int | None, int | None, str, str | None]] = set()
            for table in ("events", "python"):
                _export_slices(one, table, run_id, where, window, batch_rows, writer, moved, lanes)
            _export_threads(one, run_id, writer, names, lanes)
            n_flows = _export_flows(one, run_id, where, window, batch_rows, writer, moved)
            _export_instants(one, run_id, where, window, batch_rows, writer)
            _export_counters(one, run_id, where, window, batch_rows, writer)
            if where.cats is None or where.cats & {"memory", "cpu_instant_event", MEMORY_COUNTER_CAT}:
                export_memory_counters(wh, run_id, ref.day, window=window, batch_rows=batch_rows,
                                       write=writer.write, fmt_ts=us)
            fh.write('\n],\n"displayTimeUnit": "ns"}\n')
    return ExportResult(path, run_id, writer.count, n_flows, len(lanes))


class _Scans(Protocol):
    """What the export's helpers read: the rows of a table."""

    def scan(self, table: str) -> pl.LazyFrame: ...


class _OneRun:
    """``wh``'s scans of run tables restricted to one run's ``day`` partition (all of them
    for a run without one: a run's rows are all in its day)."""

    def __init__(self, wh: WarehouseLike, days: set[dt.date] | None) -> None:
        self._wh = wh
        self._days = days

    def scan(self, table: str) -> pl.LazyFrame:
        return self._wh.scan(table, days=self._days)


class _Writer:
    """Writes comma-separated event objects and counts them."""

    def __init__(self, fh: IO[str]) -> None:
        self.fh = fh
        self.count = 0

    def write(self, text: str) -> None:
        self.fh.write(text if self.count == 0 else ",\n" + text)
        self.count += 1


def _metadata(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    try:
        meta = json.loads(text)
    except ValueError:
        return {}
    return {k: v for k, v in meta.items() if k not in _DROP_KEYS} if isinstance(meta, dict) else {}


def _step_window(wh: _Scans, run_id: str, steps: tuple[int, int] | None) -> tuple[int, int] | None:
    """[start, end) of steps A..B: their CPU spans and the GPU ops they launched."""
    if steps is None:
        return None
    lo, hi = steps
    span = (
        wh.scan("steps")
        .filter(pl.col("run_id") == run_id, pl.col("step").is_between(lo, hi))
        .select(pl.col("ts_ns").min().alias("s"), (pl.col("ts_ns") + pl.col("dur_ns")).max().alias("e"))
        .collect()
    )
    if span["s"][0] is None:
        raise UsageError(f"--steps {lo}-{hi}: run {run_id} has no ProfilerStep in that range")
    gpu_end = (
        wh.scan("gpu_ops")
        .filter(pl.col("run_id") == run_id, pl.col("step").is_between(lo, hi))
        .select((pl.col("ts_ns") + pl.col("dur_ns")).max())
        .collect()
        .item()
    )
    return int(span["s"][0]), max(int(span["e"][0]), int(gpu_end or 0))


def _rows(wh: _Scans, table: str, run_id: str, window: tuple[int, int] | None) -> pl.LazyFrame:
    lf = wh.scan(table).filter(pl.col("run_id") == run_id)
    if window is not None:
        lf = lf.filter(pl.col("ts_ns") >= window[0], pl.col("ts_ns") < window[1])
    return lf


def _export_slices(
    wh: _Scans, table: str, run_id: str, where: ExportFilter,
    window: tuple[int, int] | None, batch_rows: int, writer: _Writer,
    moved: dict[tuple[int | None, int | None, int], str],
    lanes: set[tuple[int | None, int | None, str, str | None]],
) -> None:
    """Duration events of ``table``, a group of (pid, tid) tracks at a time, nested per track."""
    lf = _rows(wh, table, run_id, window)
    if where.cats is not None:
        lf = lf.filter(pl.col("cat").is_in(list(where.cats)))
    if where.streams is not None:
        lf = lf.filter(
            ~pl.col("cat").is_in(list(GPU_OP_CATEGORIES)) | pl.col("stream").is_in(list(where.streams))
        )
    lf = lf.with_columns(
        pl.col("pid").fill_null(_NULL_KEY).alias("_pk"), pl.col("tid").fill_null(_NULL_KEY).alias("_tk")
    )
    tracks = lf.group_by("_pk", "_tk").len().sort("_pk", "_tk").collect()
    for group in _groups(tracks, batch_rows):
        chunk = (
            lf.join(group.lazy(), on=["_pk", "_tk"], how="semi")
            .sort("_pk", "_tk", "ts_ns", pl.col("dur_ns").fill_null(0), "event_index",
                  descending=[False, False, False, True, False], nulls_last=True)
            .collect()
        )
        _write_tracks(chunk, table, writer, moved, lanes)


def _groups(tracks: pl.DataFrame, batch_rows: int) -> Iterator[pl.DataFrame]:
    start, total = 0, 0
    lens = tracks["len"].to_list()
    for i, n in enumerate(lens):
        if total and total + n > batch_rows:
            yield tracks[start:i].select("_pk", "_tk")
            start, total = i, 0
        total += n
    if start < len(lens):
        yield tracks[start:].select("_pk", "_tk")


def _write_tracks(
    chunk: pl.DataFrame, table: str, writer: _Writer,
    moved: dict[tuple[int | None, int | None, int], str],
    lanes: set[tuple[int | None, int | None, str, str | None]],
) -> None:
    python = table == "python"
    key: tuple[int, int] | None = None
    stacks: list[list[int]] = []
    for ev in chunk.iter_rows(named=True):
        if (ev["_pk"], ev["_tk"]) != key:
            key, stacks = (ev["_pk"], ev["_tk"]), [[]]
        ts, dur = ev["ts_ns"], ev["dur_ns"]
        lane = 0
        if ts is not None:
            end = ts + (dur or 0)
            for lane, stack in enumerate(stacks):  # noqa: B007
                while stack and stack[-1] <= ts:
                    stack.pop()
                if not stack or end <= stack[-1]:
                    break
            else:
                stacks.append([])
                lane = len(stacks) - 1
            stacks[lane].append(end)
        tid: Any = ev["tid_label"] if ev["tid_label"] is not None else ev["tid"]
        if lane:
            tid = f"{tid}:{lane}"
            moved[(ev["pid"], ev["tid"], ts)] = tid
            lanes.add((ev["pid"], ev["tid"], tid, ev["pid_label"]))
        args: dict[str, Any] = json.loads(ev["args_json"]) if ev["args_json"] else {}
        for col, name in (("correlation", "correlation"), ("external_id", "External id"),
                          ("stream", "stream"), ("device", "device")):
            if ev[col] is not None:
                args[name] = ev[col]
        if python:
            for col, name in (("python_id", "Python id"), ("python_parent_id", "Python parent id")):
                if ev[col] is not None:
                    args[name] = ev[col]
        pid: Any = ev["pid_label"] if ev["pid_label"] is not None else ev["pid"]
        parts = [f'"ph": "X", "cat": {json.dumps(ev["cat"])}, "name": {json.dumps(ev["name"])}',
                 f'"pid": {json.dumps(pid)}, "tid": {json.dumps(tid)}']
        if ts is not None:
            parts.append(f'"ts": {us(ts)}')
        if dur is not None:
            parts.append(f'"dur": {us(dur)}')
        if args:
            parts.append(f'"args": {json.dumps(args)}')
        writer.write("{" + ", ".join(parts) + "}")


def _thread_names(wh: _Scans, run_id: str) -> dict[tuple[int | None, int | None], str]:
    df = (
        wh.scan("threads")
        .filter(pl.col("run_id") == run_id, pl.col("kind") == "thread_name")
        .select("pid", "tid", "value")
        .collect()
    )
    return {(r[0], r[1]): str(r[2]) for r in df.iter_rows()}


def _export_threads(
    wh: _Scans, run_id: str, writer: _Writer,
    names: dict[tuple[int | None, int | None], str],
    lanes: set[tuple[int | None, int | None, str, str | None]],
) -> None:
    df = wh.scan("threads").filter(pl.col("run_id") == run_id).collect()
    for r in df.iter_rows(named=True):
        kind = r["kind"]
        if kind is None:
            continue
        if kind.endswith("sort_index"):
            args: dict[str, Any] = {"sort_index": r["sort_index"]}
        elif kind == "process_labels":
            args = {"labels": r["value"]}
        else:
            args = {"name": r["value"]}
        pid: Any = r["pid_label"] if r["pid_label"] is not None else r["pid"]
        tid: Any = r["tid_label"] if r["tid_label"] is not None else r["tid"]
        writer.write(json.dumps({"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": args}))
    for pid_i, tid_i, lane_tid, pid_label in sorted(lanes, key=lambda x: str(x)):
        base = names.get((pid_i, tid_i), f"thread {tid_i}")
        k = lane_tid.rsplit(":", 1)[1]
        pid_out: Any = pid_label if pid_label is not None else pid_i
        writer.write(json.dumps({"ph": "M", "name": "thread_name", "pid": pid_out, "tid": lane_tid,
                                 "args": {"name": f"{base} (overlap {k})"}}))


def _index_slices(lf: pl.LazyFrame, batch_rows: int) -> Iterator[pl.DataFrame]:
    """Rows of ``lf`` in ``event_index`` order, ``batch_rows`` indexes at a time."""
    bounds = lf.select(pl.col("event_index").min().alias("lo"), pl.col("event_index").max().alias("hi")).collect()
    lo, hi = bounds["lo"][0], bounds["hi"][0]
    if lo is None:
        return
    for start in range(int(lo), int(hi) + 1, batch_rows):
        yield lf.filter(pl.col("event_index").is_between(start, start + batch_rows - 1)).sort("event_index").collect()


def _export_flows(
    wh: _Scans, run_id: str, where: ExportFilter, window: tuple[int, int] | None,
    batch_rows: int, writer: _Writer, moved: dict[tuple[int | None, int | None, int], str],
) -> int:
    lf = _rows(wh, "flows", run_id, window)
    if where.cats is not None:
        keep = list(where.cats | LAUNCH_FLOW_CATEGORIES)
        lf = lf.filter(pl.col("cat").is_in(keep))
    n = 0
    for chunk in _index_slices(lf, batch_rows):
        for r in chunk.iter_rows(named=True):
            tid: Any = moved.get((r["pid"], r["tid"], r["ts_ns"]), r["tid"])
            parts = [f'"ph": {json.dumps(r["ph"])}, "id": {json.dumps(r["flow_id"])}',
                     f'"pid": {json.dumps(r["pid"])}, "tid": {json.dumps(tid)}',
                     f'"cat": {json.dumps(r["cat"])}, "name": {json.dumps(r["name"])}']
            if r["ts_ns"] is not None:
                parts.append(f'"ts": {us(r["ts_ns"])}')
            if r["bp"] is not None:
                parts.append(f'"bp": {json.dumps(r["bp"])}')
            writer.write("{" + ", ".join(parts) + "}")
            n += 1
    return n


def _export_instants(
    wh: _Scans, run_id: str, where: ExportFilter, window: tuple[int, int] | None,
    batch_rows: int, writer: _Writer,
) -> None:
    lf = _rows(wh, "instants", run_id, window)
    if where.cats is not None:
        lf = lf.filter(pl.col("cat").is_in(list(where.cats)))
    for chunk in _index_slices(lf, batch_rows):
        for r in chunk.iter_rows(named=True):
            if r["ph"] is None or r["ts_ns"] is None:
                continue
            pid: Any = r["pid_label"] if r["pid_label"] is not None else r["pid"]
            tid: Any = r["tid_label"] if r["tid_label"] is not None else r["tid"]
            parts = [f'"ph": {json.dumps(r["ph"])}, "cat": {json.dumps(r["cat"])}',
                     f'"name": {json.dumps(r["name"])}, "pid": {json.dumps(pid)}, "tid": {json.dumps(tid)}',
                     f'"ts": {us(r["ts_ns"])}']
            if r["scope"] is not None:
                parts.append(f'"s": {json.dumps(r["scope"])}')
            if r["args_json"]:
                parts.append(f'"args": {r["args_json"]}')
            writer.write("{" + ", ".join(parts) + "}")


def _export_counters(
    wh: _Scans, run_id: str, where: ExportFilter, window: tuple[int, int] | None,
    batch_rows: int, writer: _Writer,
) -> None:
    # memory counters are derived from the [memory] instants: written again below, not twice
    lf = _rows(wh, "counters", run_id, window).filter(pl.col("cat").ne_missing(MEMORY_COUNTER_CAT))
    if where.cats is not None:
        lf = lf.filter(pl.col("cat").is_in(list(where.cats)))
    for chunk in _index_slices(lf, batch_rows):
        grouped = chunk.group_by("event_index", maintain_order=True).agg(
            pl.col("cat", "name", "pid", "tid", "ts_ns").first(), pl.col("series"), pl.col("value")
        )
        for r in grouped.iter_rows(named=True):
            if r["ts_ns"] is None:
                continue
            args = dict(zip(r["series"], r["value"], strict=True))
            writer.write(
                f'{{"ph": "C", "cat": {json.dumps(r["cat"])}, "name": {json.dumps(r["name"])}, '
                f'"pid": {json.dumps(r["pid"])}, "tid": {json.dumps(r["tid"])}, '
                f'"ts": {us(r["ts_ns"])}, "args": {json.dumps(args)}}}'
            )


__all__ = ["ExportFilter", "ExportResult", "export_trace", "parse_steps", "us"]
