"""Real traces for the benchmarks: the shared ones as they are, and tiled to a target size.

A tiled trace repeats a real trace's ``traceEvents`` text N times, in the file's own
formatting (pretty-printed stays pretty-printed), tile ``k`` shifted by ``k`` spans in
time and by ``k`` id ranges: every ``"ts"`` gets ``k * shift`` microseconds added by
exact decimal arithmetic on its digits (never through a float), and every
``"correlation"``, ``"External id"``, flow ``"id"``, ``"Python id"`` and
``"Python parent id"`` gets ``k * id_shift``, so each tile's launches link to its own
kernels. Header and trailer keys are kept once. Written once under ``data/bench/real/``
(gzip level 1), never into the project: they are generated from ``../shared/traces``.
"""

from __future__ import annotations

import gzip
import json
import math
import re
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "traces"
OUT = ROOT / "data" / "bench" / "real"

#: The real trace the big workloads tile: an H100 inference trace (TimeSformer) with the
#: module tree's python_function spans (42k of its 50k events), pretty-printed, 18 MB.
BIG_SOURCE = "tracelens__h100__timesformer-base-k400.json.gz"
#: Small real traces (70-450 KB gzip, with GPU ops and a rank) and their rank.
SMALL = {
    "tracelens__mi300__bert-small-uncased.json.gz": 0,
    "timeline_analysis__sampled_rank-0.json.gz": 0,
    "trace_filter__sampled_rank-1.json.gz": 1,
}
#: A tiny real trace (33 events) for the per-file cost.
TINY_SOURCE = "trace_compare__base__base.json.gz"

_TS = re.compile(r'("ts"\s*:\s*)(-?)(\d+)(\.\d+)?')
_IDS = re.compile(r'("(?:correlation|External id|id|Python id|Python parent id)"\s*:\s*)(\d+)\b')


def available() -> bool:
    """Whether ``../shared/traces`` is there."""
    return (SHARED / BIG_SOURCE).is_file()


def _split(text: str) -> tuple[str, str, str]:
    """(header up to and with ``[``, the events' text, ``]`` and the trailer)."""
    key = text.index('"traceEvents"')
    start = text.index("[", key)
    _, end = json.JSONDecoder().raw_decode(text, start)
    return text[: start + 1], text[start + 1 : end - 1], text[end - 1 :]


def _span_and_ids(events: str) -> tuple[Decimal, int]:
    parsed = json.loads("[" + events + "]", parse_float=Decimal, parse_int=Decimal)
    lo, hi, top = None, None, 0
    for e in parsed:
        if not isinstance(e, dict) or not isinstance(e.get("ts"), Decimal):
            continue
        ts = e["ts"]
        end = ts + (e["dur"] if isinstance(e.get("dur"), Decimal) else 0)
        lo = ts if lo is None or ts < lo else lo
        hi = end if hi is None or end > hi else hi
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        for v in (e.get("id"), *(args.get(k) for k in ("correlation", "External id", "Python id", "Python parent id"))):
            if isinstance(v, Decimal) and v == v.to_integral_value():
                top = max(top, int(v))
    assert lo is not None and hi is not None
    return hi - lo, top


def _shift(events: str, us: int, ids: int) -> str:
    """The events' text with every ts + ``us`` µs and every id + ``ids``, digit-exact."""
    if us == 0:
        return events

    def ts(m: re.Match[str]) -> str:
        whole = int(m.group(3)) * (-1 if m.group(2) else 1) + us
        frac = m.group(4) or ""
        if whole < 0 and frac:  # -0.5 + 1 is not "1.5": keep it exact via Decimal
            return m.group(1) + str(Decimal(m.group(2) + m.group(3) + frac) + us)
        return f"{m.group(1)}{whole}{frac}"

    out = _TS.sub(ts, events)
    return _IDS.sub(lambda m: f"{m.group(1)}{int(m.group(2)) + ids}", out)


def tiled(source: str, size_bytes: int, *, name: str | None = None) -> Path:
    """``source`` (a shared trace) tiled to at least ``size_bytes`` of JSON; cached."""
    label = name or f"{source.split('__')[0]}-{size_bytes // 10**6}mb"
    path = OUT / f"tiled-{label}.json.gz"
    if path.exists():
        return path
    text = gzip.decompress((SHARED / source).read_bytes()).decode("utf-8")
    head, events, tail = _split(text)
    span, top = _span_and_ids(events)
    shift = math.ceil(span) + 1000  # a millisecond of quiet between tiles
    n = max(1, math.ceil(size_bytes / len(text.encode("utf-8"))))
    print(f"writing {path.name}: {n} tiles of {source} ...", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    sep = ",\n" if "\n" in events else ","
    with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=1) as f:
        f.write(head)
        for k in range(n):
            if k:
                f.write(sep)
            f.write(_shift(events, k * shift, k * (top + 1)).strip("\n"))
        f.write("\n" + tail.lstrip() if "\n" in events else tail)
    tmp.replace(path)
    return path


def variants(source: str, n: int) -> list[Path]:
    """``n`` copies of a small shared trace, copy ``k`` shifted by ``k`` seconds (distinct runs)."""
    folder = OUT / f"variants-{source.split('__')[0]}-{n}"
    paths = [folder / f"rank-{k}.json.gz" for k in range(n)]
    if all(p.exists() for p in paths):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    text = gzip.decompress((SHARED / source).read_bytes()).decode("utf-8")
    head, events, tail = _split(text)
    for k, p in enumerate(paths):
        p.write_bytes(gzip.compress((head + _shift(events, k * 1_000_000, 0) + tail).encode(), 1))
    return paths


#: The nightly folder's traces: the shared Kineto traces up to 1.4 MB gzip (small and
#: medium: 2 KB to 1.4 MB), each trace once per round, every copy shifted in time.
NIGHTLY_MAX_GZ = 1_400_000
NIGHTLY_SKIP = frozenset({
    "execution_trace__benchmark_simple_add_et.json.gz",  # not a Kineto trace
    "call_stack__backward_thread.json",  # 7 events, uncompressed
})


def nightly_sources() -> list[str]:
    """The shared traces a nightly folder cycles through (name order)."""
    return sorted(
        p.name for p in SHARED.glob("*.json.gz")
        if p.name not in NIGHTLY_SKIP and p.stat().st_size <= NIGHTLY_MAX_GZ
    )


def nightly(folder: Path, n: int = 120) -> list[Path]:
    """``n`` real traces in ``folder`` (a nightly folder of many small and medium traces):
    :func:`nightly_sources` in turn, copy ``k`` shifted by ``k`` seconds (distinct runs);
    written once (gzip level 6, as the profiler writes them)."""
    sources = nightly_sources()
    paths = [folder / f"{k:03d}-{sources[k % len(sources)].split('__')[0]}.json.gz" for k in range(n)]
    if all(p.exists() for p in paths):
        return paths
    folder.mkdir(parents=True, exist_ok=True)
    texts: dict[str, tuple[str, str, str]] = {}
    for k, p in enumerate(paths):
        source = sources[k % len(sources)]
        if source not in texts:
            texts[source] = _split(gzip.decompress((SHARED / source).read_bytes()).decode("utf-8"))
        head, events, tail = texts[source]
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_bytes(gzip.compress((head + _shift(events, (k + 1) * 1_000_000, 0) + tail).encode(), 6))
        tmp.replace(p)
    return paths
