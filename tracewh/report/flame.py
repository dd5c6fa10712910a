"""GPU time as flame-graph stacks: modules ...; cpu op chain ...; kernel.

Each GPU op contributes its duration (ns) to one stack, root first:

1. the nn.Module path of the op where the trace has one, one frame per module
   (outermost first, ``gpu_ops.module_path`` split at ``/``);
2. the chain of CPU operators enclosing its launch, outermost first (from
   ``cpu_op_nesting``: the innermost op is the one ``gpu_ops`` links to, the
   chain follows its parents); when the op is not found there, just ``op_name``;
3. the kernel's ``short_name``.

GPU ops with no launch call found sit under ``(unlinked)``, linked ones whose launch no CPU
operator encloses under ``(no CPU operator)`` (the names ``diff --level op`` uses). Two formats:
Brendan Gregg's folded stacks (``frame;frame;leaf weight`` per line) and
speedscope's JSON (https://www.speedscope.app/file-format-schema.json, a
``sampled`` profile whose samples are the distinct stacks, weighted in ns).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl

from tracewh.core.atomic import atomic_file
from tracewh.core.errors import UsageError
from tracewh.query.runsel import RunSelector
from tracewh.report.protocol import WarehouseLike

FORMATS = ("folded", "speedscope")
UNLINKED = "(unlinked)"  # GPU ops with no launch call found (docs/concepts/figures.md)
NO_OPERATOR = "(no CPU operator)"  # linked GPU ops whose launch no CPU operator encloses


def gpu_stacks(wh: WarehouseLike, run: RunSelector) -> Counter[tuple[str, ...]]:
    """GPU time (ns) per stack of run ``run`` (root first)."""
    ref = wh.resolve_run(run)
    run_id: str = ref.run_id
    days = ref.days
    ops = (
        wh.scan("gpu_ops", days=days)
        .filter(pl.col("run_id") == run_id, pl.col("dur_ns").is_not_null())
        .select("short_name", "name", "dur_ns", "op_name", "op_ts_ns", "op_dur_ns",
                "launch_pid", "launch_tid", "module_path")
        .collect()
    )
    chains = _op_chains(wh, run_id, days) if ops["op_name"].is_not_null().any() else {}
    stacks: Counter[tuple[str, ...]] = Counter()
    for r in ops.iter_rows(named=True):
        frames: list[str] = []
        if r["module_path"]:
            frames.extend(r["module_path"].split("/"))
        if r["op_name"] is None:
            frames.append(UNLINKED if r["launch_pid"] is None else NO_OPERATOR)
        else:
            key = (r["launch_pid"], r["launch_tid"], r["op_ts_ns"], r["op_dur_ns"], r["op_name"])
            frames.extend(chains.get(key, (r["op_name"],)))
        frames.append(r["short_name"] or r["name"] or "?")
        stacks[tuple(_frame(f) for f in frames)] += int(r["dur_ns"])
    return stacks


def _op_chains(
    wh: WarehouseLike, run_id: str, days: set[Any] | None
) -> dict[tuple[Any, Any, Any, Any, Any], tuple[str, ...]]:
    """(pid, tid, ts_ns, dur_ns, name) of each cpu_op -> its chain of names, outermost first."""
    nest = wh.call("cpu_op_nesting", run_id, days=days).select(
        "pid", "tid", "event_index", "name", "ts_ns", "dur_ns", "parent_event_index"
    )
    parent = dict(zip(nest["event_index"].to_list(), nest["parent_event_index"].to_list(), strict=True))
    name = dict(zip(nest["event_index"].to_list(), nest["name"].to_list(), strict=True))
    memo: dict[int, tuple[str, ...]] = {}

    def chain(idx: int) -> tuple[str, ...]:
        path: list[int] = []
        cur: int | None = idx
        while cur is not None and cur not in memo and len(path) < 512:
            path.append(cur)
            cur = parent.get(cur)
        tail = memo.get(cur, ()) if cur is not None else ()
        for i in reversed(path):
            tail = (*tail, str(name[i]))
            memo[i] = tail
        return memo[idx]

    out: dict[tuple[Any, Any, Any, Any, Any], tuple[str, ...]] = {}
    for r in nest.iter_rows(named=True):
        out[(r["pid"], r["tid"], r["ts_ns"], r["dur_ns"], r["name"])] = chain(r["event_index"])
    return out


def _frame(text: str) -> str:
    """A frame name safe in folded stacks (no ';' separators, no newlines)."""
    return text.replace(";", ",").replace("\n", " ").strip() or "?"


def folded(stacks: Counter[tuple[str, ...]]) -> str:
    """Folded stacks, one ``a;b;c weight`` line per stack, sorted for stable output."""
    return "".join(f"{';'.join(stack)} {weight}\n" for stack, weight in sorted(stacks.items()))


def speedscope(stacks: Counter[tuple[str, ...]], *, name: str) -> dict[str, Any]:
    """A speedscope document: one sampled profile, weights in nanoseconds."""
    index: dict[str, int] = {}
    samples: list[list[int]] = []
    weights: list[int] = []
    for stack, weight in sorted(stacks.items()):
        samples.append([index.setdefault(f, len(index)) for f in stack])
        weights.append(weight)
    total = sum(weights)
    return {
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "shared": {"frames": [{"name": f} for f in index]},
        "profiles": [{
            "type": "sampled", "name": name, "unit": "nanoseconds",
            "startValue": 0, "endValue": total, "samples": samples, "weights": weights,
        }],
        "name": name,
        "activeProfileIndex": 0,
        "exporter": "tracewh",
    }


def write_flame(wh: WarehouseLike, run: RunSelector, out: str | Path, *, fmt: str = "folded") -> Path:
    """Write run ``run``'s GPU time as flame-graph stacks to ``out`` (atomically).

    Parameters
    ----------
    wh
        The warehouse.
    run
        A run selector.
    out
        Output file.
    fmt
        ``folded`` (Brendan Gregg's flamegraph.pl input) or ``speedscope`` (JSON).

    Returns
    -------
    Path
        The file written.
    """
    if fmt not in FORMATS:
        raise UsageError(f"the flame-graph format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    ref = wh.resolve_run(run)
    stacks = gpu_stacks(wh, ref)
    path = Path(out)
    text = (folded(stacks) if fmt == "folded"
            else json.dumps(speedscope(stacks, name=f"GPU time of run {ref.run_id}"), separators=(",", ":")))
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return path
