"""Stream synthetic Kineto traces to disk: one file, one file per rank, or a nightly history."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import json
import math
import os
import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from tracewh.core.errors import UsageError
from tracewh.synth.catalog import capture_program, step_program
from tracewh.synth.flavors import CUDA, ROCM, FlavorSpec
from tracewh.synth.options import Regression, SynthConfig, SynthSummary
from tracewh.synth.steps import build_step
from tracewh.synth.timeline import Scales, StepTemplate

DEFAULT_BASE_NS = 1735696800 * 10**9
"""``baseTimeNanoseconds`` of a trace without a night: 2025-01-01T02:00:00Z."""
DEFAULT_START = dt.date(2025, 1, 1)
"""First night of a history when no start date is given."""
_VARIANTS = 4
_FIRST_STEP_US = 350_000
_FLUSH_CHARS = 1 << 20


def _flavor(config: SynthConfig) -> FlavorSpec:
    return ROCM if config.flavor == "rocm" else CUDA


def _base_time_ns(night: dt.date | None) -> int:
    if night is None:
        return DEFAULT_BASE_NS
    at = dt.datetime(night.year, night.month, night.day, 2, 0, tzinfo=dt.UTC)
    return int(at.timestamp()) * 10**9


def _scales(config: SynthConfig, rank: int) -> Scales:
    night_rng = random.Random(f"{config.seed}:{config.night}:night")
    overall = math.exp(night_rng.gauss(0.0, config.noise / 2))
    active = [r for r in config.regressions if r.applies(config.night)]
    cache: dict[str, float] = {}

    def kernel(name: str) -> float:
        if name not in cache:
            rng = random.Random(f"{config.seed}:{config.night}:{name}")
            factor = overall * math.exp(rng.gauss(0.0, config.noise))
            for reg in active:
                if reg.matches(name):
                    factor *= 1.0 + reg.factor
            cache[name] = factor
        return cache[name]

    s = config.straggler
    if s is None or config.ranks < 2:
        return Scales(kernel)
    if s.rank == rank:
        return Scales(kernel, compute_slowdown=s.factor)
    return Scales(kernel, comm_wait=s.factor)


def _header(config: SynthConfig, f: FlavorSpec, rank: int, base_ns: int) -> tuple[str, str]:
    n_dev = max(1, min(config.ranks, 8))
    devices = ",\n".join(
        f'    {{\n      "id": {i}, "name": "{f.device_name}", "totalGlobalMem": {f.device_mem},\n'
        f'      "computeMajor": {f.compute_major}, "computeMinor": {f.compute_minor},\n'
        '      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,\n'
        f'      "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": {f.warp_size},\n'
        '      "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 167936,\n'
        f'      "numSms": {f.num_sms}, "sharedMemPerBlockOptin": 166912\n    }}'
        for i in range(n_dev)
    )
    ranks = list(range(config.ranks))
    backend = "nccl"  # RCCL registers itself as "nccl" too
    dist = json.dumps({
        "backend": backend, "rank": rank, "world_size": config.ranks, "pg_count": 1,
        "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": f"cuda:{backend}",
                       "pg_size": config.ranks, "ranks": ranks}],
        "nccl_version": "2.21.5",
    })
    dist_line = f'  "distributedInfo": {dist},\n'
    head = (
        '{\n  "schemaVersion": 1,\n  "deviceProperties": [\n' + devices + "\n  ],\n"
        + ("" if config.distributed_info_in_trailer else dist_line)
        + f'  "displayTimeUnit": "ms",\n  "baseTimeNanoseconds": {base_ns},\n  "traceEvents": ['
    )
    trailer_dist = f',\n  "distributedInfo": {dist}' if config.distributed_info_in_trailer else ""
    name = json.dumps(f"{config.model}_rank{rank}.pt.trace.json")
    tail = f'\n  ],\n  "traceName": {name}{trailer_dist}\n}}\n'
    return head, tail


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _closing_events(f: FlavorSpec, pid: int, device: int, t0_us: int, end_us: int) -> tuple[str, Counter[str]]:
    """Metadata events, the profiler span and instants: the last elements of ``traceEvents``."""
    ts = f"{t0_us}.000"
    meta: list[tuple[int, int, str, str]] = [
        (pid, 0, "process_name", '"name": "python3.11"'),
        (pid, 0, "process_labels", '"labels": "CPU"'),
        (pid, 0, "process_sort_index", f'"sort_index": {pid}'),
        (device, 0, "process_name", '"name": "python3.11"'),
        (device, 0, "process_labels", f'"labels": "GPU {device}"'),
        (device, 0, "process_sort_index", f'"sort_index": {16777216 + device}'),
    ]
    for stream in sorted({f.compute_stream, f.comm_stream, f.copy_stream}):
        meta.append((device, stream, "thread_name", f'"name": "stream {stream} "'))
        meta.append((device, stream, "thread_sort_index", f'"sort_index": {stream}'))
    meta.append((pid, pid, "thread_name", f'"name": "thread {pid} (pt_main_thread)"'))
    meta.append((pid, pid, "thread_sort_index", f'"sort_index": {pid}'))
    parts = [
        f'\n  {{\n    "name": "{name}", "ph": "M", "ts": {ts}, "pid": {p}, "tid": {t},\n'
        f"    \"args\": {{\n      {args}\n    }}\n  }},"
        for p, t, name, args in meta
    ]
    parts.append(
        f'\n  {{\n    "ph": "X", "cat": "Trace", "ts": {ts}, "dur": {end_us - t0_us}.000,\n'
        '    "pid": "Spans", "tid": "PyTorch Profiler",\n'
        '    "name": "PyTorch Profiler (0)",\n    "args": {\n      "Op count": 0\n    }\n  },'
    )
    parts.append(
        '\n  {\n    "name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g",\n'
        f'    "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": {ts}\n  }},'
    )
    parts.append(
        '\n  {\n    "name": "Record Window End", "ph": "i", "s": "g",\n'
        f'    "pid": "", "tid": "", "ts": {end_us}.000\n  }}'
    )
    counts: Counter[str] = Counter({"__metadata": len(meta), "Trace": 1, "__instant": 2})
    return "".join(parts), counts


def _open(path: Path, level: int, *, compress: bool) -> tuple[io.BufferedIOBase, io.BufferedIOBase | None]:
    raw = path.open("wb")
    if not compress:
        return raw, None
    return gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=level, mtime=0), raw


def write_trace(path: Path | str, config: SynthConfig, *, rank: int = 0) -> SynthSummary:
    """Write one rank's synthetic Kineto trace, streaming (memory does not grow with size).

    The file is gzip-compressed when ``path`` ends in ``.gz``, plain JSON otherwise. It is
    written to a temporary name and renamed into place, so it appears complete or not at all.

    Parameters
    ----------
    path
        Output file (``.json`` or ``.json.gz``); its directory is created.
    config
        What to generate.
    rank
        The rank this file is for (``0 <= rank < config.ranks``).

    Returns
    -------
    SynthSummary
        Counts of what was written.

    Examples
    --------
    >>> from tracewh.synth import SynthConfig, write_trace
    >>> write_trace("/tmp/t.pt.trace.json.gz", SynthConfig(steps=2)).kernels  # doctest: +SKIP
    """
    path = Path(path)
    if not 0 <= rank < config.ranks:
        raise UsageError(f"rank {rank} is not in 0..{config.ranks - 1}")
    f = _flavor(config)
    pid, device = 2_910_000 + 17 * rank, rank % 8
    base_ns = _base_time_ns(config.night)
    rng = random.Random(f"{config.seed}:{config.night}:{rank}:{config.flavor}")
    program = step_program(f, config.layers, leak_bytes=config.leak_bytes if config.memory else 0,
                           compiled=config.compiled)
    scales = _scales(config, rank)
    variants: list[StepTemplate] = [
        build_step(program, f, rng=rng, scales=scales, pid=pid, device=device,
                   python=config.python, memory=config.memory,
                   profiler_step=config.profiler_steps)
        for _ in range(_VARIANTS)
    ]
    capture = (
        build_step(capture_program(f), f, rng=rng, scales=scales, pid=pid, device=device,
                   python=config.python, memory=False, profiler_step=False)
        if config.graph_capture else None
    )
    head, tail = _header(config, f, rank, base_ns)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    out, raw = _open(tmp, config.gzip_level, compress=path.suffix == ".gz")
    counts: Counter[str] = Counter()
    written = len(head)
    t_us, ext, corr, pyid, step = _FIRST_STEP_US, 0, 10_000, 0, 0
    target = config.size_bytes
    try:
        buf = [head]
        pending = len(head)
        if capture is not None:  # the graph's capture, once, before the loop
            text = capture.render(t_us, ext, corr, step, pyid)
            buf.append(text)
            pending += len(text)
            written += len(text)
            counts.update(capture.counts)
            t_us += capture.span_us
            ext, corr, pyid = ext + capture.ids[0], corr + capture.ids[1], pyid + capture.ids[2]
        while True:
            tpl = variants[rng.randrange(_VARIANTS)]
            if target is None:
                if step >= config.steps:
                    break
            elif step >= 1 and written + len(tail) + 4_000 + tpl.size // 2 >= target:
                break
            text = tpl.render(t_us, ext, corr, step, pyid)
            buf.append(text)
            pending += len(text)
            written += len(text)
            counts.update(tpl.counts)
            t_us += tpl.span_us
            ext, corr, pyid = ext + tpl.ids[0], corr + tpl.ids[1], pyid + tpl.ids[2]
            step += 1
            if pending >= _FLUSH_CHARS:
                out.write("".join(buf).encode("ascii"))
                buf, pending = [], 0
        closing, closing_counts = _closing_events(f, pid, device, _FIRST_STEP_US - 50_000, t_us)
        counts.update(closing_counts)
        buf.extend((closing, tail))
        written += len(closing) + len(tail)
        out.write("".join(buf).encode("ascii"))
    finally:
        out.close()
        if raw is not None:
            raw.close()
    os.replace(tmp, path)
    by_cat = dict(sorted(counts.items()))
    return SynthSummary(
        path=path, rank=rank, steps=step, events=sum(by_cat.values()), by_category=by_cat,
        kernels=by_cat.get("kernel", 0), uncompressed_bytes=written,
        file_bytes=path.stat().st_size, base_time_ns=base_ns,
    )


def write_traces(out_dir: Path | str, config: SynthConfig) -> list[SynthSummary]:
    """Write one gzip trace per rank, ``out_dir/rank-K.pt.trace.json.gz``."""
    out = Path(out_dir)
    return [write_trace(out / f"rank-{r}.pt.trace.json.gz", config, rank=r) for r in range(config.ranks)]


def run_labels(config: SynthConfig, night: dt.date) -> dict[str, str]:
    """The labels written to a night's ``run.json`` (model, commit, branch, night, flavor)."""
    commit = hashlib.sha1(f"{config.model}:{config.seed}:{night}".encode()).hexdigest()
    return {"model": config.model, "commit": commit, "branch": "main",
            "night": night.isoformat(), "flavor": config.flavor}


def write_history(
    out_dir: Path | str,
    config: SynthConfig,
    *,
    runs: int,
    start: dt.date = DEFAULT_START,
    regressions: Iterable[Regression] = (),
) -> list[SynthSummary]:
    """Write a nightly history: ``out_dir/YYYY-MM-DD/rank-K.pt.trace.json.gz`` plus ``run.json``.

    Night ``i`` is ``start + i`` days; its ``baseTimeNanoseconds`` is 02:00 UTC that day, its
    kernel durations carry their own few-percent noise (``config.noise``), and each
    regression multiplies matching kernels from its date on.

    Parameters
    ----------
    out_dir
        Root of the history.
    config
        What each night's traces contain (``config.night`` is set per night).
    runs
        Number of nights.
    start
        The first night.
    regressions
        Slowdowns to inject (added to ``config.regressions``).

    Returns
    -------
    list[SynthSummary]
        One summary per trace file, night by night, rank by rank.
    """
    if runs < 1:
        raise UsageError(f"runs must be at least 1, got {runs}")
    root = Path(out_dir)
    regs = (*config.regressions, *regressions)
    summaries: list[SynthSummary] = []
    for i in range(runs):
        night = start + dt.timedelta(days=i)
        night_dir = root / night.isoformat()
        cfg = replace(config, night=night, regressions=regs)
        summaries.extend(write_traces(night_dir, cfg))
        (night_dir / "run.json").write_text(json.dumps(run_labels(cfg, night), indent=2) + "\n")
    return summaries


def synthesize(
    out: Path | str,
    config: SynthConfig,
    *,
    runs: int | None = None,
    start: dt.date | None = None,
    regressions: Iterable[Regression] = (),
) -> list[SynthSummary]:
    """Write what ``tracewh synth OUT`` asks for.

    ``OUT`` ending in ``.json`` or ``.gz`` is a single trace file (one rank only).
    Otherwise ``OUT`` is a directory: with ``runs`` a nightly history (see
    :func:`write_history`), else one ``rank-K.pt.trace.json.gz`` per rank.
    """
    out = Path(out)
    regs = tuple(regressions)
    if runs is not None:
        return write_history(out, config, runs=runs, start=start or DEFAULT_START, regressions=regs)
    if regs or start is not None:
        raise UsageError("--regress and --start need --runs (they describe a nightly history)")
    if out.suffix in (".json", ".gz"):
        if config.ranks > 1:
            raise UsageError(f"{out}: several ranks need a directory as OUT, not a file name")
        return [write_trace(out, config)]
    return write_traces(out, config)
