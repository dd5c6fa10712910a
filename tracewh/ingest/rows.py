"""Turn streamed trace events into Arrow batches, staged as Parquet files.

Events are routed by phase (``ph``) and category into staging tables:

``ev``    every ``ph: X`` event except ``python_function`` (base columns)
``gpu``   typed kernel/copy args of GPU ops, keyed by ``event_index``
``py``    ``python_function`` events
``inst``  instant events (``ph: i/I``) and any phase tracewh does not model
``cnt``   counter events (``ph: C``), one row per series
``flow``  flow events (``ph: s/t/f``)
``thr``   metadata events (``ph: M``)

Timestamps are converted exactly from decimal microseconds to int64
nanoseconds (``Decimal * 1000``, never through float); they stay relative to
``baseTimeNanoseconds`` here, which may only be known after the last event.
Rows are flushed every ``batch_rows`` rows, so memory is bounded by the batch
size, not the file size.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from collections.abc import Iterable
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tracewh.schema import GPU_OP_CATEGORIES, PYTHON_CATEGORY

I64_MAX = (1 << 63) - 1
I64_MIN = -(1 << 63)
U64_MAX = (1 << 64) - 1
_THOUSAND = 1000

_S = pa.string()
_I = pa.int64()
_F = pa.float64()

_BASE = [
    ("event_index", _I),
    ("cat", _S),
    ("name", _S),
    ("pid", _I),
    ("tid", _I),
    ("pid_label", _S),
    ("tid_label", _S),
    ("ts_ns", _I),
    ("dur_ns", _I),
    ("correlation", _I),
    ("external_id", _I),
    ("stream", _I),
    ("device", _I),
    ("args_json", _S),
]

STAGING_SCHEMAS: dict[str, pa.Schema] = {
    "ev": pa.schema(_BASE),
    "py": pa.schema([*_BASE, ("python_id", _I), ("python_parent_id", _I)]),
    "gpu": pa.schema(
        [
            ("event_index", _I),
            ("grid_x", _I),
            ("grid_y", _I),
            ("grid_z", _I),
            ("block_x", _I),
            ("block_y", _I),
            ("block_z", _I),
            ("registers_per_thread", _I),
            ("shared_memory_bytes", _I),
            ("blocks_per_sm", _F),
            ("warps_per_sm", _F),
            ("occupancy_pct", _F),
            ("bytes", _I),
            ("bandwidth_gbps", _F),
            ("context", _I),
            ("graph_id", _I),
            ("graph_node_id", _I),
        ]
    ),
    "inst": pa.schema(
        [
            ("event_index", _I),
            ("ph", _S),
            ("cat", _S),
            ("name", _S),
            ("pid", _I),
            ("tid", _I),
            ("pid_label", _S),
            ("tid_label", _S),
            ("ts_ns", _I),
            ("scope", _S),
            ("bytes", _I),
            ("total_allocated", _I),
            ("total_reserved", _I),
            ("device_type", _I),
            ("device_id", _I),
            ("addr", _I),
            ("args_json", _S),
        ]
    ),
    "cnt": pa.schema(
        [
            ("event_index", _I),
            ("cat", _S),
            ("name", _S),
            ("pid", _I),
            ("tid", _I),
            ("ts_ns", _I),
            ("series", _S),
            ("value", _F),
        ]
    ),
    "flow": pa.schema(
        [
            ("event_index", _I),
            ("ph", _S),
            ("cat", _S),
            ("name", _S),
            ("flow_id", _I),
            ("pid", _I),
            ("tid", _I),
            ("ts_ns", _I),
            ("bp", _S),
        ]
    ),
    "thr": pa.schema(
        [
            ("pid", _I),
            ("tid", _I),
            ("pid_label", _S),
            ("tid_label", _S),
            ("kind", _S),
            ("value", _S),
            ("sort_index", _I),
        ]
    ),
}


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def dumps(value: Any) -> str:
    """Compact JSON text (Decimals as numbers, non-ASCII kept)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_json_default)


class _Ids:
    """Typed ids for pid/tid values: ints as they are, uint64 wrapped, strings hashed.

    A string id (``"Spans"``, ``""``) maps to a stable negative int
    ``-(crc32(label) + 1)`` and keeps its label; an integer in
    ``[2**63, 2**64)`` (ROCm queue handles) wraps to int64 and keeps its
    decimal text as label.
    """

    def __init__(self, anomalies: Counter[str]) -> None:
        self._cache: dict[Any, tuple[int | None, str | None]] = {}
        self._anomalies = anomalies

    def __call__(self, value: Any) -> tuple[int | None, str | None]:
        try:
            return self._cache[value]
        except KeyError:
            pass
        except TypeError:  # unhashable (a list, a dict)
            self._anomalies["mistyped_id"] += 1
            return (None, dumps(value)[:200])
        out = self._convert(value)
        self._cache[value] = out
        return out

    def _convert(self, value: Any) -> tuple[int | None, str | None]:
        if value is None:
            return (None, None)
        if type(value) is int:
            if I64_MIN <= value <= I64_MAX:
                return (value, None)
            if I64_MAX < value <= U64_MAX:
                return (value - (1 << 64), str(value))
            self._anomalies["id_out_of_range"] += 1
            return (None, str(value))
        if isinstance(value, str):
            text = value.strip()
            if text.lstrip("-").isdigit():
                return self._convert(int(text))[0], value
            return (-(zlib.crc32(value.encode("utf-8", "surrogatepass")) + 1), value)
        if isinstance(value, bool):
            self._anomalies["mistyped_id"] += 1
            return (int(value), str(value))
        if isinstance(value, Decimal):
            self._anomalies["mistyped_id"] += 1
            try:
                return (int(value), str(value))
            except (InvalidOperation, ValueError, OverflowError):
                return (None, str(value))
        self._anomalies["mistyped_id"] += 1
        return (None, str(value)[:200])


def _ns(value: Any, anomalies: Counter[str], what: str) -> int | None:
    """Exact int64 nanoseconds from decimal microseconds (slow path)."""
    if value is None:
        return None
    out: int | None
    try:
        if type(value) is int:
            out = value * _THOUSAND
        elif isinstance(value, Decimal):
            out = int(value * _THOUSAND)
        elif isinstance(value, str):
            anomalies[f"{what}_as_string"] += 1
            out = int(Decimal(value.strip()) * _THOUSAND)
        else:
            anomalies[f"mistyped_{what}"] += 1
            return None
    except (InvalidOperation, ValueError, OverflowError):
        anomalies[f"mistyped_{what}"] += 1
        return None
    if not I64_MIN <= out <= I64_MAX:
        anomalies[f"{what}_out_of_range"] += 1
        return None
    return out


def _int(value: Any, anomalies: Counter[str], key: str) -> int | None:
    if value is None:
        return None
    if type(value) is int:
        if I64_MIN <= value <= I64_MAX:
            return value
        anomalies[f"int64_overflow:{key}"] += 1
        return None
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return _int(int(value), anomalies, key)
    if isinstance(value, str):
        try:
            return _int(int(value.strip(), 0), anomalies, key)
        except ValueError:
            pass
    anomalies[f"mistyped:{key}"] += 1
    return None


def _float(value: Any, anomalies: Counter[str], key: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, int | Decimal) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    anomalies[f"mistyped:{key}"] += 1
    return None


def _triple(value: Any, anomalies: Counter[str], key: str) -> tuple[Any, Any, Any]:
    if isinstance(value, list) and len(value) == 3:
        return (
            _int(value[0], anomalies, key),
            _int(value[1], anomalies, key),
            _int(value[2], anomalies, key),
        )
    if value is not None:
        anomalies[f"mistyped:{key}"] += 1
    return (None, None, None)


class StagingWriter:
    """Buffers rows per staging table and writes them as Parquet files in ``folder``."""

    def __init__(self, folder: Path, *, batch_rows: int = 50_000) -> None:
        self.folder = folder
        self.batch_rows = batch_rows
        self.rows: dict[str, list[tuple[Any, ...]]] = {name: [] for name in STAGING_SCHEMAS}
        self.counts: Counter[str] = Counter()
        self._writers: dict[str, pq.ParquetWriter] = {}

    def path(self, name: str) -> Path:
        return self.folder / f"{name}.parquet"

    def flush(self, name: str) -> None:
        rows = self.rows[name]
        if not rows:
            return
        schema = STAGING_SCHEMAS[name]
        columns = list(zip(*rows, strict=True))
        arrays = [
            pa.array(col, type=field.type) for col, field in zip(columns, schema, strict=True)
        ]
        batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
        writer = self._writers.get(name)
        if writer is None:
            writer = pq.ParquetWriter(self.path(name), schema, compression="lz4")
            self._writers[name] = writer
        writer.write_batch(batch)
        self.counts[name] += len(rows)
        rows.clear()

    def close(self) -> dict[str, Path]:
        """Flush and close; write empty files for tables that got no rows."""
        for name in STAGING_SCHEMAS:
            self.flush(name)
            writer = self._writers.pop(name, None)
            if writer is None:
                pq.write_table(STAGING_SCHEMAS[name].empty_table(), self.path(name))
            else:
                writer.close()
        return {name: self.path(name) for name in STAGING_SCHEMAS}

    def abort(self) -> None:
        for writer in self._writers.values():
            try:
                writer.close()
            except Exception:  # closing after a failure; the folder is removed anyway
                pass
        self._writers.clear()


def stage_events(
    events: Iterable[Any],
    writer: StagingWriter,
    *,
    skip_python: bool = False,
    anomalies: Counter[str],
) -> int:
    """Route every event to its staging table; returns the number of events seen."""
    ids = _Ids(anomalies)
    gpu_cats = GPU_OP_CATEGORIES
    python_cat = PYTHON_CATEGORY
    batch = writer.batch_rows
    rows = writer.rows
    ev_rows, gpu_rows, py_rows = rows["ev"], rows["gpu"], rows["py"]
    inst_rows, cnt_rows, flow_rows, thr_rows = rows["inst"], rows["cnt"], rows["flow"], rows["thr"]
    flush = writer.flush
    idx = -1
    dec = Decimal
    for idx, ev in enumerate(events):  # noqa: B007 - idx is returned
        if type(ev) is not dict:
            anomalies["non_object_event"] += 1
            inst_rows.append((idx, None, None, None, None, None, None, None, None, None,
                              None, None, None, None, None, None, dumps(ev)[:10_000]))
            continue
        ph = ev.get("ph")
        ts = ev.get("ts")
        tt = type(ts)
        if tt is dec:
            tsn = int(ts * _THOUSAND)
            if not I64_MIN <= tsn <= I64_MAX:
                tsn = _ns(ts, anomalies, "ts")
        elif tt is int and I64_MIN // 1000 <= ts <= I64_MAX // 1000:
            tsn = ts * _THOUSAND
        else:
            tsn = _ns(ts, anomalies, "ts")
            if ts is None and ph != "M":
                anomalies["missing_ts"] += 1
        name = ev.get("name")
        if name is not None and type(name) is not str:
            anomalies["mistyped_name"] += 1
            name = dumps(name)
        cat = ev.get("cat")
        if cat is not None and type(cat) is not str:
            anomalies["mistyped_cat"] += 1
            cat = dumps(cat)
        pid, pid_label = ids(ev.get("pid"))
        tid, tid_label = ids(ev.get("tid"))
        args = ev.get("args")
        if args is not None and type(args) is not dict:
            anomalies["mistyped_args"] += 1
            args = {"_args": args}
        if ph == "X":
            if name is None:
                anomalies["missing_name"] += 1
            dur = ev.get("dur")
            td = type(dur)
            if td is dec:
                durn = int(dur * _THOUSAND)
            elif td is int:
                durn = dur * _THOUSAND
            else:
                durn = _ns(dur, anomalies, "dur")
            if durn is not None and (durn < 0 or durn > I64_MAX):
                anomalies["negative_dur" if durn < 0 else "dur_out_of_range"] += 1
                durn = None
            if args:
                corr = args.pop("correlation", None)
                ext = args.pop("External id", None)
                if ext is None:
                    ext = args.pop("external id", None)
                stream = args.pop("stream", None)
                device = args.pop("device", None)
                if type(corr) is not int or not I64_MIN <= corr <= I64_MAX:
                    corr = _int(corr, anomalies, "correlation")
                if type(ext) is not int or not I64_MIN <= ext <= I64_MAX:
                    ext = _int(ext, anomalies, "External id")
                if stream is not None and type(stream) is not int:
                    stream = _int(stream, anomalies, "stream")
                if device is not None and type(device) is not int:
                    device = _int(device, anomalies, "device")
            else:
                corr = ext = stream = device = None
            if cat == python_cat:
                if skip_python:
                    anomalies["skipped_python"] += 1
                    continue
                pyid = _int(args.pop("Python id", None), anomalies, "Python id") if args else None
                pypar = (
                    _int(args.pop("Python parent id", None), anomalies, "Python parent id")
                    if args
                    else None
                )
                py_rows.append((idx, cat, name, pid, tid, pid_label, tid_label, tsn, durn, corr,
                                ext, stream, device, dumps(args) if args else None, pyid, pypar))
                if len(py_rows) >= batch:
                    flush("py")
                continue
            if cat in gpu_cats:
                if stream is None:
                    stream = tid
                if device is None:
                    device = pid
                if args:
                    g = _triple(args.get("grid"), anomalies, "grid")
                    b = _triple(args.get("block"), anomalies, "block")
                    gpu_rows.append((
                        idx, g[0], g[1], g[2], b[0], b[1], b[2],
                        _int(args.get("registers per thread"), anomalies, "registers per thread"),
                        _int(args.get("shared memory"), anomalies, "shared memory"),
                        _float(args.get("blocks per SM"), anomalies, "blocks per SM"),
                        _float(args.get("warps per SM"), anomalies, "warps per SM"),
                        _float(args.get("est. achieved occupancy %"), anomalies, "occupancy"),
                        _int(args.get("bytes"), anomalies, "bytes"),
                        _float(args.get("memory bandwidth (GB/s)"), anomalies, "bandwidth"),
                        _int(args.get("context"), anomalies, "context"),
                        _int(args.get("graph id"), anomalies, "graph id"),
                        _int(args.get("graph node id"), anomalies, "graph node id"),
                    ))
                    if len(gpu_rows) >= batch:
                        flush("gpu")
            ev_rows.append((idx, cat, name, pid, tid, pid_label, tid_label, tsn, durn, corr, ext,
                            stream, device, dumps(args) if args else None))
            if len(ev_rows) >= batch:
                flush("ev")
        elif ph == "s" or ph == "f" or ph == "t":
            fid = ev.get("id")
            if type(fid) is not int or not I64_MIN <= fid <= I64_MAX:
                fid = _flow_id(fid, anomalies)
            bp = ev.get("bp")
            flow_rows.append((idx, ph, cat, name, fid, pid, tid, tsn,
                              bp if type(bp) is str else None))
            if len(flow_rows) >= batch:
                flush("flow")
        elif ph == "M":
            a = args or {}
            value = a.get("name", a.get("labels"))
            sort_index = _int(a.get("sort_index"), anomalies, "sort_index")
            thr_rows.append((pid, tid, pid_label, tid_label, name,
                             value if value is None or type(value) is str else dumps(value),
                             sort_index))
            if len(thr_rows) >= batch:
                flush("thr")
        elif ph == "C":
            for series, value in (args or {}).items():
                cnt_rows.append((idx, cat, name, pid, tid, tsn, str(series),
                                 _float(value, anomalies, "counter")))
            if len(cnt_rows) >= batch:
                flush("cnt")
        else:
            if ph is None:
                anomalies["missing_ph"] += 1
            elif ph not in ("i", "I"):
                anomalies[f"other_ph:{str(ph)[:8]}"] += 1
            a = args or {}
            scope = ev.get("s")
            inst_rows.append((
                idx, ph if ph is None or type(ph) is str else dumps(ph), cat, name, pid, tid,
                pid_label, tid_label, tsn, scope if type(scope) is str else None,
                _int(a.get("Bytes"), anomalies, "Bytes") if a else None,
                _int(a.get("Total Allocated"), anomalies, "Total Allocated") if a else None,
                _int(a.get("Total Reserved"), anomalies, "Total Reserved") if a else None,
                _int(a.get("Device Type"), anomalies, "Device Type") if a else None,
                _int(a.get("Device Id"), anomalies, "Device Id") if a else None,
                _int(a.get("Addr"), anomalies, "Addr") if a else None,
                dumps(a) if a else None,
            ))
            if len(inst_rows) >= batch:
                flush("inst")
    return idx + 1


def _flow_id(value: Any, anomalies: Counter[str]) -> int | None:
    if value is None:
        return None
    if type(value) is int:
        if I64_MAX < value <= U64_MAX:
            return value - (1 << 64)
        anomalies["flow_id_out_of_range"] += 1
        return None
    if isinstance(value, str):
        try:
            return _flow_id(int(value, 0), anomalies)
        except ValueError:
            return -(zlib.crc32(value.encode("utf-8", "surrogatepass")) + 1)
    anomalies["mistyped_flow_id"] += 1
    return None
