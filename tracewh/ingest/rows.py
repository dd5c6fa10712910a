"""Prepare streamed trace events for staging: the only per-event Python of an ingest.

Each event dict is fixed up in place, as cheaply as possible, then encoded in
batches with orjson and shredded into typed staging tables by DuckDB
(:mod:`tracewh.ingest.shred`, ``sql/ingest/02_shred.sql``). The Python pass
does what SQL cannot do exactly:

- ``ts``/``dur`` (decimal microseconds, parsed as ``Decimal``) become exact
  int64 nanoseconds (``Decimal * 1000``, never through float); they stay
  relative to ``baseTimeNanoseconds``, which may only be known at the end;
- string and otherwise mistyped pids/tids get a stable int and keep their label;
- ``correlation``, ``External id``, ``stream``, ``device`` (and the Python ids of
  ``python_function`` events) are popped from ``args`` into typed keys, so
  ``args`` keeps the remaining args only;
- anomalies are counted.

Keys it adds: ``_i`` (event index in the part), ``pid_label``/``tid_label``,
``_c``/``_e``/``_s``/``_d``, ``_py``/``_pp``, ``_f`` (flow id) and ``_raw`` (the
JSON text of an element of ``traceEvents`` that is not an object).
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from decimal import Decimal, InvalidOperation
from typing import Any

from tracewh.core.categories import MODULE_PREFIX, PYTHON_CATEGORY

I64_MAX = (1 << 63) - 1
I64_MIN = -(1 << 63)
U64_MAX = (1 << 64) - 1
_THOUSAND = 1000
_FLOW_PHASES = frozenset({"s", "t", "f"})
_KNOWN_PHASES = frozenset({"X", "s", "t", "f", "M", "C", "i", "I"})


#: Deepest nesting of lists/objects kept (the value itself is level 1): orjson's limit.
MAX_DEPTH = 254
DEEP_MARKER = f"<nested deeper than {MAX_DEPTH} levels>"


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def clip_depth(value: Any, limit: int = MAX_DEPTH) -> tuple[Any, int]:
    """``value`` with each list/object nested deeper than ``limit`` levels replaced by a marker.

    Returns the value (``value`` itself when nothing was too deep, else a
    copy of the changed path) and how many subtrees were replaced by
    :data:`DEEP_MARKER`. Recursion stops at ``limit`` levels, so any depth is safe.
    """
    if type(value) is dict:
        if limit <= 0:
            return DEEP_MARKER, 1
        out: Any = None
        n = 0
        for key, item in value.items():
            if type(item) is dict or type(item) is list:
                new, k = clip_depth(item, limit - 1)
                if k:
                    if out is None:
                        out = dict(value)
                    out[key] = new
                    n += k
        return (value if out is None else out), n
    if type(value) is list:
        if limit <= 0:
            return DEEP_MARKER, 1
        out = None
        n = 0
        for i, item in enumerate(value):
            if type(item) is dict or type(item) is list:
                new, k = clip_depth(item, limit - 1)
                if k:
                    if out is None:
                        out = list(value)
                    out[i] = new
                    n += k
        return (value if out is None else out), n
    return value, 0


def dumps(value: Any, anomalies: Counter[str] | None = None) -> str:
    """Compact JSON text (Decimals as numbers, non-ASCII kept).

    Lists/objects nested deeper than :data:`MAX_DEPTH` levels are written as
    :data:`DEEP_MARKER`, each counted as a ``deep_nesting`` anomaly.
    """
    if type(value) is dict or type(value) is list:
        value, n = clip_depth(value)
        if n and anomalies is not None:
            anomalies["deep_nesting"] += n
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
            return (None, dumps(value, self._anomalies)[:200])
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
            digits = text.lstrip("-")
            if digits.isascii() and digits.isdigit():  # not "²": str.isdigit is Unicode's
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




def _typed_int(args: dict[str, Any], key: str, anomalies: Counter[str]) -> Any:
    value = args.pop(key, None)
    if value is None or (type(value) is int and I64_MIN <= value <= I64_MAX):
        return value
    return _int(value, anomalies, key)


def prepare_events(
    events: Iterable[Any],
    sink: Callable[[list[dict[str, Any]]], None],
    *,
    skip_python: bool = False,
    anomalies: Counter[str],
    batch: int = 512,
    indexed: bool = False,
) -> int:
    """Fix up every event in place and hand them to ``sink`` in small batches.

    Returns the number of elements of ``traceEvents`` seen (skipped ones included).
    Small batches keep the events hot in the CPU cache until they are encoded.
    With ``indexed``, ``events`` yields ``(event index, event)`` pairs (the events
    :mod:`tracewh.ingest._fastshred` handed back) and the return value is
    the last index + 1.
    """
    ids = _Ids(anomalies)
    python_cat = PYTHON_CATEGORY
    dec = Decimal
    rows: list[dict[str, Any]] = []
    append = rows.append
    idx = -1
    ev: Any
    ts: Any
    dur: Any
    tsn: int | None
    durn: int | None
    pairs: Iterable[tuple[int, Any]] = events if indexed else enumerate(events)
    for idx, ev in pairs:
        if type(ev) is not dict:
            anomalies["non_object_event"] += 1
            ev = {"_raw": dumps(ev, anomalies)[:10_000]}
        ev["_i"] = idx
        ph = ev.get("ph")
        ts = ev.get("ts")
        tt = type(ts)
        if tt is dec:
            tsn = int(ts * _THOUSAND)
            if not I64_MIN <= tsn <= I64_MAX:
                tsn = _ns(ts, anomalies, "ts")
            ev["ts"] = tsn
        elif tt is int and I64_MIN // 1000 <= ts <= I64_MAX // 1000:
            ev["ts"] = ts * _THOUSAND
        elif ts is not None:
            ev["ts"] = _ns(ts, anomalies, "ts")
        if ts is None and ph != "M":
            anomalies["missing_ts"] += 1
        pid = ev.get("pid")
        if pid is not None and (type(pid) is not int or not I64_MIN <= pid <= I64_MAX):
            ev["pid"], ev["pid_label"] = ids(pid)
        tid = ev.get("tid")
        if tid is not None and (type(tid) is not int or not I64_MIN <= tid <= I64_MAX):
            ev["tid"], ev["tid_label"] = ids(tid)
        name = ev.get("name")
        if name is not None and type(name) is not str:
            anomalies["mistyped_name"] += 1
            ev["name"] = name = dumps(name, anomalies)
        cat = ev.get("cat")
        if cat is not None and type(cat) is not str:
            anomalies["mistyped_cat"] += 1
            ev["cat"] = cat = dumps(cat, anomalies)
        args = ev.get("args")
        if args is not None and type(args) is not dict:
            anomalies["mistyped_args"] += 1
            ev["args"] = args = {"_args": args}
        if args:
            cap_long_args(args, anomalies)
        if ph == "X":
            if (
                cat == python_cat
                and skip_python
                and not (type(name) is str and name.startswith(MODULE_PREFIX))
            ):  # --skip-python keeps the nn.Module spans (module attribution needs them)
                anomalies["skipped_python"] += 1
                continue
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
            ev["dur"] = durn
            if args:
                ev["_c"] = _typed_int(args, "correlation", anomalies)
                v = _typed_int(args, "External id", anomalies)
                ev["_e"] = v if v is not None else _typed_int(args, "external id", anomalies)
                ev["_s"] = _typed_int(args, "stream", anomalies)
                ev["_d"] = _typed_int(args, "device", anomalies)
                if cat == python_cat:
                    ev["_py"] = _typed_int(args, "Python id", anomalies)
                    ev["_pp"] = _typed_int(args, "Python parent id", anomalies)
                if not args:
                    ev["args"] = None
        else:
            if "dur" in ev:
                del ev["dur"]
            if ph is not None and type(ph) is not str:
                ev["ph"] = ph = dumps(ph, anomalies)  # a mistyped phase: its JSON text
            if ph in _FLOW_PHASES:
                fid = ev.get("id")
                if type(fid) is not int or not I64_MIN <= fid <= I64_MAX:
                    fid = _flow_id(fid, anomalies)
                ev["_f"] = fid
                bp = ev.get("bp")
                if bp is not None and type(bp) is not str:
                    ev["bp"] = None
            elif ph not in _KNOWN_PHASES:
                if ph is None:
                    anomalies["missing_ph"] += 1
                else:
                    anomalies[f"other_ph:{ph[:8]}"] += 1
            scope = ev.get("s")
            if scope is not None and type(scope) is not str:
                ev["s"] = None
        append(ev)
        if len(rows) >= batch:
            sink(rows)
            rows = []
            append = rows.append
    if rows:
        sink(rows)
    return idx + 1


#: A list or object argument value (``Input Dims`` of a ``cat`` of a million tensors) with
#: more items than this (nested items counted) is replaced by :func:`long_value_marker`:
#: stored as JSON text and parsed again in SQL, it cost ~1 KB of memory per item.
ARG_CAP_ITEMS = 65_536


def _items(value: Any) -> int:
    """Lists' and objects' items inside ``value``, nested ones included."""
    n = 0
    todo = [value]
    while todo:
        v = todo.pop()
        if type(v) is list:
            n += len(v)
            todo.extend(x for x in v if type(x) is list or type(x) is dict)
        elif type(v) is dict:
            n += len(v)
            todo.extend(x for x in v.values() if type(x) is list or type(x) is dict)
    return n


def long_value_marker(items: int) -> str:
    """What an over-long argument value is stored as (a string, so the column's JSON stays valid)."""
    return f"<tracewh: truncated, {items} items>"


def cap_long_args(args: dict[str, Any], anomalies: Counter[str]) -> None:
    """Replace each list or object value of ``args`` longer than :data:`ARG_CAP_ITEMS` items by
    :func:`long_value_marker`, counting each in the ``truncated_args`` anomaly."""
    for key, value in args.items():
        if (type(value) is list or type(value) is dict) and len(value) and (
                len(value) > ARG_CAP_ITEMS or _items(value) > ARG_CAP_ITEMS):
            args[key] = long_value_marker(_items(value))
            anomalies["truncated_args"] += 1


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
