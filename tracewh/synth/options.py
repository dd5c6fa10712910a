"""Options of the synthetic trace generator and the parsers of their string forms.

Everything a user can type on the command line (sizes, regression specs,
straggler specs, dates) is parsed here, raising :class:`~tracewh.core.errors.UsageError`
on bad input, so that the CLI only maps errors to exit codes.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tracewh.core.errors import UsageError

Flavor = Literal["cuda", "rocm"]

_SIZE_UNITS: Mapping[str, int] = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "k": 1000,
    "m": 1000**2,
    "g": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")
_PCT_RE = re.compile(r"^\s*([+-]?\d+(?:\.\d*)?)\s*%?\s*$")


def parse_size(text: str) -> int:
    """Parse a byte size such as ``"1GB"``, ``"500MB"``, ``"2GiB"`` or ``"12345"``.

    ``KB``/``MB``/``GB``/``TB`` (and ``K``/``M``/``G``) are decimal (SI, powers of 1000);
    ``KiB``/``MiB``/``GiB``/``TiB`` are binary (powers of 1024). Units are case-insensitive.

    Parameters
    ----------
    text
        The size as typed.

    Returns
    -------
    int
        The size in bytes (at least 1).

    Raises
    ------
    UsageError
        If the text is not a positive size with a known unit.

    Examples
    --------
    >>> parse_size("1GB"), parse_size("1GiB"), parse_size("2.5 kb")
    (1000000000, 1073741824, 2500)
    """
    m = _SIZE_RE.match(text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _SIZE_UNITS:
        raise UsageError(f"invalid size {text!r}: expected e.g. 500MB, 1GB (1000-based) or 1GiB (1024-based)")
    value = int(float(m.group(1)) * _SIZE_UNITS[unit])
    if value < 1:
        raise UsageError(f"invalid size {text!r}: must be at least 1 byte")
    return value


def parse_percent(text: str) -> float:
    """Parse ``"+30%"``, ``"30%"``, ``"-10%"`` or ``"30"`` into a fraction (``0.30``).

    Raises
    ------
    UsageError
        If the text is not a percentage, or the slowdown is -100% or less.
    """
    m = _PCT_RE.match(text)
    if m is None:
        raise UsageError(f"invalid percentage {text!r}: expected e.g. +30%")
    value = float(m.group(1)) / 100.0
    if value <= -1.0:
        raise UsageError(f"invalid percentage {text!r}: a duration cannot shrink by 100% or more")
    return value


def parse_flavor(text: str) -> Flavor:
    """Parse ``"cuda"`` or ``"rocm"`` (case-insensitive); raises :class:`UsageError` otherwise."""
    value = text.strip().lower()
    if value == "cuda":
        return "cuda"
    if value == "rocm":
        return "rocm"
    raise UsageError(f"invalid flavor {text!r}: expected cuda or rocm")


def parse_date(text: str) -> dt.date:
    """Parse an ISO date ``YYYY-MM-DD``; raises :class:`UsageError` otherwise."""
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError as exc:
        raise UsageError(f"invalid date {text!r}: expected YYYY-MM-DD") from exc


@dataclass(frozen=True)
class Regression:
    """A known slowdown injected into a nightly history.

    Parameters
    ----------
    pattern
        Kernel-name pattern. With any of ``*?[`` it is a case-sensitive glob matched
        against the whole kernel name (``fnmatch``); otherwise a case-sensitive substring.
    factor
        Relative change of the matching kernels' durations: ``0.30`` means 30% slower.
    since
        First night (inclusive) that carries the slowdown.
    """

    pattern: str
    factor: float
    since: dt.date

    def matches(self, kernel_name: str) -> bool:
        """Whether ``kernel_name`` is affected (glob if the pattern has ``*?[``, else substring)."""
        if any(c in self.pattern for c in "*?["):
            return fnmatch.fnmatchcase(kernel_name, self.pattern)
        return self.pattern in kernel_name

    def applies(self, night: dt.date | None) -> bool:
        """Whether the slowdown is active on ``night`` (never for a trace without a date)."""
        return night is not None and night >= self.since


def parse_regression(spec: str) -> Regression:
    """Parse ``KERNEL_PATTERN:+30%@YYYY-MM-DD`` into a :class:`Regression`.

    The pattern may itself contain ``:`` (C++ names do); the spec is split at the
    last ``@`` and then at the last ``:``.

    Examples
    --------
    >>> parse_regression("flash_fwd:+30%@2025-01-10").factor
    0.3
    """
    head, sep, date_text = spec.rpartition("@")
    pattern, sep2, pct_text = head.rpartition(":")
    if not sep or not sep2 or not pattern:
        raise UsageError(f"invalid regression {spec!r}: expected KERNEL_PATTERN:+30%@YYYY-MM-DD")
    return Regression(pattern=pattern, factor=parse_percent(pct_text), since=parse_date(date_text))


@dataclass(frozen=True)
class Straggler:
    """One rank whose compute kernels are slower; the others wait for it in NCCL.

    Parameters
    ----------
    rank
        The slow rank.
    factor
        Relative slowdown of its compute kernels: ``0.2`` means 20% slower.
    """

    rank: int
    factor: float


def parse_straggler(spec: str) -> Straggler:
    """Parse ``RANK:PCT`` (e.g. ``"1:20%"`` or ``"1:+20"``) into a :class:`Straggler`."""
    rank_text, sep, pct_text = spec.partition(":")
    if not sep or not rank_text.strip().isdigit():
        raise UsageError(f"invalid straggler {spec!r}: expected RANK:PCT, e.g. 1:20%")
    return Straggler(rank=int(rank_text), factor=parse_percent(pct_text))


@dataclass(frozen=True)
class SynthConfig:
    """What to generate. All fields have defaults; the same config and seed give the same bytes.

    Parameters
    ----------
    flavor
        ``"cuda"`` (NVIDIA A100, CUDA runtime names) or ``"rocm"`` (AMD MI250X, HIP names).
    steps
        Number of ``ProfilerStep#N`` denoising steps (ignored when ``size_bytes`` is set).
    size_bytes
        Target uncompressed size: steps are added until the file reaches it (within a step).
    layers
        Transformer blocks per step (each adds ~40 events).
    ranks
        Number of ranks (one file per rank).
    straggler
        Optional slow rank.
    seed
        Random seed; output is byte-identical for the same config.
    python
        Emit ``python_function`` events (as ``with_stack=True`` does).
    memory
        Emit ``[memory]`` instant events (as ``profile_memory=True`` does). Every step
        allocates and frees the same blocks; 2 GB are allocated before the trace begins
        (the first event's Total Allocated minus its Bytes); Total Reserved is the step's
        peak allocated in 20 MiB segments plus 512 MiB of cached blocks.
    leak_bytes
        A leak: each step ends with an ``aten::clone`` whose output of this many bytes is
        never freed (a new address every step), so allocated and reserved memory rise by
        it every step (0: no leak; needs ``memory``).
    profiler_steps
        Wrap each step in a ``ProfilerStep#N`` span (as ``torch.profiler``'s ``step()``
        does); without, a trace as a plain ``with profile():`` block records it.
    compiled
        Run the transformer blocks inside a ``Torch-Compiled Region: 0/0`` cpu_op (the
        marker ``torch.compile`` leaves), once per step.
    graph_capture
        Begin the trace with the capture of the CUDA/HIP graph every step replays
        (``*StreamBeginCapture``, its kernels' launches inside their operators and modules,
        ``*StreamEndCapture``), as ``torch.cuda.graph`` records it: the replays then map to
        it.
    model
        Model name, used for labels and the trace name.
    gzip_level
        Compression level (1-9) of ``.gz`` output; 1 is fastest.
    distributed_info_in_trailer
        Write ``distributedInfo`` after ``traceEvents`` (as some Kineto versions do).
    noise
        Standard deviation of the per-night multiplicative noise on kernel durations.
    night
        The night this trace belongs to (sets ``baseTimeNanoseconds`` to 02:00 UTC that
        day and activates regressions); ``None`` for a standalone trace.
    regressions
        Injected slowdowns, active from their date on.
    """

    flavor: Flavor = "cuda"
    steps: int = 4
    size_bytes: int | None = None
    layers: int = 4
    ranks: int = 1
    straggler: Straggler | None = None
    seed: int = 0
    python: bool = False
    memory: bool = True
    leak_bytes: int = 0
    profiler_steps: bool = True
    compiled: bool = False
    graph_capture: bool = False
    model: str = "dit-xl-2"
    gzip_level: int = 1
    distributed_info_in_trailer: bool = False
    noise: float = 0.03
    night: dt.date | None = None
    regressions: tuple[Regression, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.flavor not in ("cuda", "rocm"):
            raise UsageError(f"invalid flavor {self.flavor!r}: expected cuda or rocm")
        if self.steps < 1:
            raise UsageError(f"steps must be at least 1, got {self.steps}")
        if self.layers < 1:
            raise UsageError(f"layers must be at least 1, got {self.layers}")
        if self.ranks < 1:
            raise UsageError(f"ranks must be at least 1, got {self.ranks}")
        if self.size_bytes is not None and self.size_bytes < 1:
            raise UsageError(f"size must be positive, got {self.size_bytes}")
        if not 0 <= self.gzip_level <= 9:
            raise UsageError(f"gzip level must be 0-9, got {self.gzip_level}")
        if self.straggler is not None and not 0 <= self.straggler.rank < self.ranks:
            raise UsageError(f"straggler rank {self.straggler.rank} is not in 0..{self.ranks - 1}")
        if self.leak_bytes < 0:
            raise UsageError(f"leak must be at least 0 bytes, got {self.leak_bytes}")
        if self.leak_bytes and not self.memory:
            raise UsageError("a leak needs memory events (--memory)")
        if not 0 <= self.noise < 0.5:
            raise UsageError(f"noise must be in [0, 0.5), got {self.noise}")


@dataclass(frozen=True)
class SynthSummary:
    """What one generated trace file contains.

    Attributes
    ----------
    path
        The file written.
    rank
        Its rank.
    steps
        Number of ``ProfilerStep#N`` spans.
    events
        Number of elements of ``traceEvents``.
    by_category
        Event count per ``cat`` (metadata events under ``"__metadata"``, flows under
        ``"ac2g"``, ``[memory]`` instants under ``"cpu_instant_event"``).
    kernels
        Number of GPU ``kernel`` events.
    uncompressed_bytes
        Size of the JSON text.
    file_bytes
        Size on disk (compressed for ``.gz``).
    base_time_ns
        The trace's ``baseTimeNanoseconds``.
    """

    path: Path
    rank: int
    steps: int
    events: int
    by_category: Mapping[str, int]
    kernels: int
    uncompressed_bytes: int
    file_bytes: int
    base_time_ns: int
