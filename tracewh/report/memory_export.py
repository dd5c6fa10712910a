"""Memory counter tracks for the Perfetto export: allocated and reserved bytes per device.

Each ``[memory]`` event of a run becomes one ``ph: C`` counter event named
``"<device> memory"`` (``cuda:0 memory``, ``cpu memory``) with the args
``allocated_bytes`` and ``reserved_bytes`` (the levels after the event, as
``memory_events`` of ``sql/65_memory.sql`` defines them), so ui.perfetto.dev draws
two counter tracks per device. A GPU's tracks go in the process that holds that
device's kernels, next to its streams (the kernels' ``device`` equal to the memory
events' Device Id, or the only GPU of both when a single-GPU trace numbers them
differently, as ROCm's logical and physical ids do); otherwise, and for the CPU, in
the process that allocated.
The events are read a device and ``batch_rows`` events at a time (memory bounded by
the batch, not by the run). With a time window, each device's track opens at the
window's start with the level held then. Their category, ``tracewh_memory``, marks
them as derived: a re-ingested export keeps them in ``counters``, and a second export
writes them again from the ``[memory]`` instants, not twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import polars as pl

#: Category of the memory counter events (derived from the [memory] instants).
MEMORY_COUNTER_CAT = "tracewh_memory"


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
        The warehouse (``sql`` and ``scan`` are used).
    run_id, day
        The run and its partition day.
    window
        ``[start, end)`` in ns to keep, or ``None`` for the whole run.
    batch_rows
        Events read per query.
    write
        Called with the JSON text of each event.
    fmt_ts
        Integer ns -> the trace's decimal µs text.
    """
    devices = wh.sql(
        "SELECT device_type, device_kind, device, device_name, count(*) AS n "
        "FROM memory_events(?) GROUP BY ALL ORDER BY device_kind, device",
        [run_id], days=[day],
    )
    if devices.is_empty():
        return 0
    gpu_pids = {
        r[0]: r[1]
        for r in wh.scan("gpu_ops").filter(pl.col("run_id") == run_id, pl.col("pid").is_not_null())
        .group_by("device").agg(pl.col("pid").min()).collect().iter_rows()
    }
    n_gpus = devices.filter(pl.col("device_type") == "gpu").height
    written = 0
    for dev in devices.iter_rows(named=True):
        name = json.dumps(f"{dev['device_name']} memory")
        pid_of_gpu = None
        if dev["device_type"] == "gpu":
            pid_of_gpu = gpu_pids.get(dev["device"])
            if pid_of_gpu is None and n_gpus == 1 and len(gpu_pids) == 1:
                # one GPU on each side, numbered differently (ROCm: logical vs physical id)
                pid_of_gpu = next(iter(gpu_pids.values()))
        opening: dict[str, Any] | None = None
        opened, done = window is None, False
        for start in range(1, int(dev["n"]) + 1, batch_rows):
            if done:
                break
            chunk = wh.sql(
                "SELECT pid, ts_ns, allocated_bytes, reserved_bytes FROM memory_events(?) "
                "WHERE device_kind = ? AND device IS NOT DISTINCT FROM ? AND seq BETWEEN ? AND ? "
                "ORDER BY seq",
                [run_id, dev["device_kind"], dev["device"], start, start + batch_rows - 1], days=[day],
            )
            for r in chunk.iter_rows(named=True):
                ts = r["ts_ns"]
                if window is not None:
                    if ts < window[0]:
                        opening = r
                        continue
                    if ts >= window[1]:
                        done = True
                        break
                    if not opened and opening is not None:
                        write(_event(name, pid_of_gpu, opening, window[0], fmt_ts))
                        written += 1
                    opened = True
                write(_event(name, pid_of_gpu, r, ts, fmt_ts))
                written += 1
        if window is not None and not opened and opening is not None:
            write(_event(name, pid_of_gpu, opening, window[0], fmt_ts))  # no event in the window
            written += 1
    return written


def _event(name: str, pid: int | None, row: dict[str, Any], ts: int, fmt_ts: Callable[[int], str]) -> str:
    args: dict[str, int] = {"allocated_bytes": row["allocated_bytes"]}
    if row["reserved_bytes"] is not None:
        args["reserved_bytes"] = row["reserved_bytes"]
    return (
        f'{{"ph": "C", "cat": "{MEMORY_COUNTER_CAT}", "name": {name}, '
        f'"pid": {json.dumps(row["pid"] if pid is None else pid)}, "ts": {fmt_ts(ts)}, '
        f'"args": {json.dumps(args)}}}'
    )


__all__ = ["MEMORY_COUNTER_CAT", "export_memory_counters"]
