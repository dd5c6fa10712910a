"""Memory counter tracks for the Perfetto export: allocated and reserved bytes per device.

Each ``[memory]`` event of a run becomes one ``ph: C`` counter event named
``"<device> memory"`` (``cuda:0 memory``, ``cpu memory``) with the args
``allocated_bytes`` and ``reserved_bytes`` (the levels after the event, as
``memory_events`` of ``sql/65_memory.sql`` defines them), so ui.perfetto.dev draws
two counter tracks per device. A GPU's tracks go in the process that holds that
device's kernels, next to its streams (the kernels' ``device`` equal to the memory
events' Device Id, or the only GPU of both when a single-GPU trace numbers them
differently, as ROCm's logical and physical ids do); otherwise, and for the CPU, in
the process that allocated. The events come from one query, streamed ``batch_rows``
at a time under DuckDB's memory limit of the memory analyses (memory is bounded by
the batch, not by the run), and are formatted a batch at a time. With a time window,
each device's track opens at the window's start with the level held then. Their
category, ``tracewh_memory``, marks them as derived: a re-ingested export keeps them
in ``counters``, and a second export writes them again from the ``[memory]``
instants, not twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import polars as pl

from tracewh.core.errors import QueryError

#: Category of the memory counter events (derived from the [memory] instants).
MEMORY_COUNTER_CAT = "tracewh_memory"
#: DuckDB memory limits of the query (bytes), tried in turn while it runs out of memory:
#: the first as tracewh.analysis.memory.QUERY_MEMORY_LIMIT, the last 4 GiB.
_LIMITS = (256 << 20, 1 << 30, 4 << 30)
#: Events formatted at a time at most (their text is held until written).
_BATCH = 65_536

_QUERY = (
    "SELECT device_type, device_kind, device, device_name, pid, ts_ns, allocated_bytes, "
    "reserved_bytes FROM memory_events(?) ORDER BY device_kind, device, seq"
)


def export_memory_counters(
    wh: Any,
    run_id: str,
    day: Any,
    *,
    window: tuple[int, int] | None,
    batch_rows: int,
    write: Callable[[str], None],
    fmt_ts: Callable[[int], str],
) -> int:
    """Write the run's memory counter events with ``write``; the number written.

    Parameters
    ----------
    wh
        The warehouse (``connect`` and ``scan`` are used).
    run_id, day
        The run and its partition day.
    window
        ``[start, end)`` in ns to keep, or ``None`` for the whole run.
    batch_rows
        Events read and formatted at a time.
    write
        Called with the JSON text of each event.
    fmt_ts
        Integer ns -> the trace's decimal µs text (for an event before the epoch; others
        are formatted the same way, vectorised).
    """
    days = None if day is None else {day}  # the run's partition: the same cost at any history length
    gpu_pids = {
        r[0]: r[1]
        for r in wh.scan("gpu_ops", days=days).filter(pl.col("run_id") == run_id, pl.col("pid").is_not_null())
        .group_by("device").agg(pl.col("pid").min()).collect().iter_rows()
    }
    mem_gpus = (
        wh.scan("instants", days=days)
        .filter(pl.col("run_id") == run_id, pl.col("name") == "[memory]", pl.col("device_type") != 0)
        .select(pl.col("device_type"), pl.col("device_id")).unique().collect().height
    )
    # one GPU on each side, numbered differently (ROCm: logical vs physical id): the same GPU
    only = next(iter(gpu_pids.values())) if mem_gpus == 1 and len(gpu_pids) == 1 else None
    written = 0
    state: dict[tuple[Any, Any], _Track] = {}
    for batch in _batches(wh, run_id, day, batch_rows):
        for (kind, device), rows in batch.group_by(["device_kind", "device"], maintain_order=True):
            key = (kind, device)
            if key not in state:
                state[key] = _Track(rows.row(0, named=True), gpu_pids, only)
            written += state[key].feed(rows, window, write, fmt_ts)
    for track in state.values():
        written += track.close(window, write, fmt_ts)
    return written


def _batches(wh: Any, run_id: str, day: Any, batch_rows: int) -> Iterator[pl.DataFrame]:
    """The run's memory events in (device, seq) order, ``batch_rows`` at a time."""
    import duckdb

    con = wh.connect(days=[day])
    try:
        # the ORDER BY runs (and spills) before the first batch: where it still runs out, it
        # runs again under a larger limit (as tracewh.ingest.memory.retry_on_oom does)
        for limit in _LIMITS:
            con.execute(f"SET memory_limit = '{limit >> 20}MiB'")
            try:
                reader = con.sql(_QUERY, params=[run_id]).to_arrow_reader(min(batch_rows, _BATCH))
                break
            except duckdb.OutOfMemoryException:
                if limit == _LIMITS[-1]:
                    raise
        for rb in reader:
            frame = pl.from_arrow(rb)
            if isinstance(frame, pl.DataFrame):
                yield frame
    except duckdb.Error as exc:
        text = str(exc).strip().splitlines()
        raise QueryError(_QUERY, text[0] if text else type(exc).__name__) from exc
    finally:
        con.close()


class _Track:
    """One device's counter track: its name, process, and the window's opening level."""

    def __init__(self, first: dict[str, Any], gpu_pids: dict[Any, Any], only: Any) -> None:
        self.name = json.dumps(f"{first['device_name']} memory")
        self.pid: Any = None
        if first["device_type"] == "gpu":
            self.pid = gpu_pids.get(first["device"], only)
        self.opening: dict[str, Any] | None = None
        self.opened = False
        self.done = False

    def feed(self, rows: pl.DataFrame, window: tuple[int, int] | None,
             write: Callable[[str], None], fmt_ts: Callable[[int], str]) -> int:
        if self.done:
            return 0
        n = 0
        if window is not None:
            lo, hi = window
            before = rows.filter(pl.col("ts_ns") < lo)
            if before.height:
                self.opening = before.row(-1, named=True)
            if rows.filter(pl.col("ts_ns") >= hi).height:
                self.done = True
            rows = rows.filter(pl.col("ts_ns") >= lo, pl.col("ts_ns") < hi)
            if rows.height and not self.opened:
                n += self._opening(lo, write, fmt_ts)
        if rows.height:
            self.opened = True
            for text in self._texts(rows, fmt_ts):
                write(text)
            n += rows.height
        return n

    def close(self, window: tuple[int, int] | None, write: Callable[[str], None],
              fmt_ts: Callable[[int], str]) -> int:
        if window is not None and not self.opened:
            return self._opening(window[0], write, fmt_ts)  # no event inside the window
        return 0

    def _opening(self, lo: int, write: Callable[[str], None], fmt_ts: Callable[[int], str]) -> int:
        if self.opening is None:
            return 0
        self.opened = True
        row = pl.DataFrame([{**self.opening, "ts_ns": lo}], schema=None)
        for text in self._texts(row, fmt_ts):
            write(text)
        return 1

    def _texts(self, rows: pl.DataFrame, fmt_ts: Callable[[int], str]) -> list[str]:
        """The events' JSON text, built column-wise."""
        if rows["ts_ns"].min() < 0:  # type: ignore[operator]
            ts = pl.Series([fmt_ts(int(t)) for t in rows["ts_ns"]], dtype=pl.String)
        else:
            ts = (rows["ts_ns"] // 1000).cast(pl.String) + "." + (rows["ts_ns"] % 1000).cast(
                pl.String).str.zfill(3)
        pid = (pl.lit(json.dumps(self.pid)) if self.pid is not None
               else pl.col("pid").cast(pl.String).fill_null("null"))
        reserved = pl.when(pl.col("reserved_bytes").is_null()).then(pl.lit("")).otherwise(
            pl.lit(', "reserved_bytes": ') + pl.col("reserved_bytes").cast(pl.String))
        out = rows.with_columns(ts.alias("_ts")).select(pl.concat_str([
            pl.lit(f'{{"ph": "C", "cat": "{MEMORY_COUNTER_CAT}", "name": {self.name}, "pid": '), pid,
            pl.lit(', "ts": '), pl.col("_ts"), pl.lit(', "args": {"allocated_bytes": '),
            pl.col("allocated_bytes").cast(pl.String), reserved, pl.lit("}}"),
        ]).alias("t"))
        texts: list[str] = out["t"].to_list()
        return texts


__all__ = ["MEMORY_COUNTER_CAT", "export_memory_counters"]
