"""The options of the per-run analyses, declared once.

One frozen dataclass per analysis that takes options (:class:`KernelsOptions`,
:class:`GapsOptions`, :class:`LaunchesOptions`, :class:`StepsOptions`, :class:`OpsOptions`,
:class:`ModulesOptions`, :class:`AnnotationsOptions`, :class:`RanksOptions`,
:class:`MemoryOptions`, :class:`RooflineOptions`, :class:`CollectivesOptions`) holds each option with its default, and the
tuples below the values an option may take. Every front end reads them: the API
(``Warehouse.kernels`` ...), the macro calls (:mod:`tracewh.query.macros`), the analyses
(:mod:`tracewh.analysis.memory`, :mod:`tracewh.analysis.roofline`), the CLI (``tracewh
kernels`` ...) and the MCP tools; ``tests/query/test_options.py`` holds them to it.

``top`` is the number of rows a front end shows by default (``None``: all); the API returns
every row unless asked (its ``top=None``), except where ``top`` cuts a tree (``modules``,
``annotations``: the heaviest nodes with their ancestors), where ``None`` is the whole tree.
The CLI and the MCP tools take the kernel-wait threshold in µs (:data:`KERNEL_WAIT_THRESHOLD_US`,
turned into ns by :func:`threshold_ns`), the API and SQL in ns.

Plain values only: importing this module imports nothing heavy (the CLI reads it at start).
"""

from __future__ import annotations

from dataclasses import dataclass

from tracewh.core.errors import UsageError

__all__ = [
    "COLLECTIVE_VIEWS", "KERNEL_GROUPS", "KERNEL_ORDERS", "KERNEL_WAIT_THRESHOLD_NS", "KERNEL_WAIT_THRESHOLD_US",
    "LAUNCH_VIEWS", "RANK_VIEWS", "AnnotationsOptions", "CollectivesOptions", "GapsOptions", "KernelsOptions",
    "LaunchesOptions", "MemoryOptions", "ModulesOptions", "OpsOptions", "RanksOptions",
    "RooflineOptions", "StepsOptions", "threshold_ns",
]

#: The kernel-wait threshold of the gap classification, in ns: a GPU idle gap shorter than
#: this that the host did not cause counts as launch overhead (``kernel_wait``), a longer one
#: as another wait (the default of ``kernel_wait_threshold_ns`` in ``sql/20_gaps.sql``).
KERNEL_WAIT_THRESHOLD_NS = 30_000
#: The same in µs, as the CLI (``--threshold-us``) and the MCP tools (``threshold_us``) take it.
KERNEL_WAIT_THRESHOLD_US = KERNEL_WAIT_THRESHOLD_NS / 1000

#: What ``kernels`` groups GPU ops by.
KERNEL_GROUPS: tuple[str, ...] = ("name", "short_name", "category")
#: What ``kernels`` ranks by.
KERNEL_ORDERS: tuple[str, ...] = ("total", "mean", "max", "calls")
#: The views of ``launches`` (per kernel name, per step, one row per launch, the linkage,
#: per graph launch).
LAUNCH_VIEWS: tuple[str, ...] = ("kernel", "step", "op", "linkage", "graph")
#: The views of ``ranks`` (``rank_<view>`` of ``sql/80_ranks.sql``).
RANK_VIEWS: tuple[str, ...] = ("imbalance", "kernels", "stragglers")
#: The views of ``collectives``: one row per matched collective, or per rank.
COLLECTIVE_VIEWS: tuple[str, ...] = ("collective", "rank")


def threshold_ns(threshold_us: float) -> int:
    """A kernel-wait threshold given in µs (``--threshold-us``), in ns; refused below 0."""
    if threshold_us < 0:
        raise UsageError("--threshold-us must be >= 0")
    return round(threshold_us * 1000)


@dataclass(frozen=True)
class KernelsOptions:
    """Options of the kernel ranking (``kernel_ranking``).

    Parameters
    ----------
    cats
        Trace categories kept (exact, case-sensitive; None: every GPU op).
    group_by
        One of :data:`KERNEL_GROUPS`.
    by
        One of :data:`KERNEL_ORDERS`.
    top
        Rows shown.
    """

    cats: tuple[str, ...] | None = None
    group_by: str = "name"
    by: str = "total"
    top: int | None = 20


@dataclass(frozen=True)
class GapsOptions:
    """Options of the stream gaps, the largest gaps and the idle breakdown.

    Parameters
    ----------
    threshold_ns
        Kernel-wait threshold (:data:`KERNEL_WAIT_THRESHOLD_NS`).
    largest
        Gaps listed by ``largest_gaps`` (the API's ``n``; the CLI's ``--largest N`` asks for them).
    top
        Rows shown.
    """

    threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS
    largest: int = 20
    top: int | None = None


@dataclass(frozen=True)
class LaunchesOptions:
    """Options of launch latency: ``by`` one of :data:`LAUNCH_VIEWS`; ``top`` rows shown."""

    by: str = "kernel"
    top: int | None = 20


@dataclass(frozen=True)
class StepsOptions:
    """Options of the step summary: the kernel-wait threshold (ns); ``top`` rows shown."""

    threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS
    top: int | None = None


@dataclass(frozen=True)
class OpsOptions:
    """Options of GPU time per CPU operator: ``cpu`` (CPU-side operator time instead)."""

    cpu: bool = False
    top: int | None = 20


@dataclass(frozen=True)
class ModulesOptions:
    """Options of the module tree: ``depth`` (None: full paths); ``top`` heaviest nodes shown."""

    depth: int | None = None
    top: int | None = 20


@dataclass(frozen=True)
class AnnotationsOptions:
    """Options of the annotation tree: ``gpu`` (the GPU-side spans), ``depth``, ``top``."""

    gpu: bool = False
    depth: int | None = None
    top: int | None = 20


@dataclass(frozen=True)
class RanksOptions:
    """Options of the comparison of ranks: ``view`` one of :data:`RANK_VIEWS`; ``top`` rows."""

    view: str = "imbalance"
    top: int | None = 20


@dataclass(frozen=True)
class MemoryOptions:
    """Options of device memory (:func:`tracewh.analysis.memory.memory`).

    ``view`` is a key of :data:`tracewh.analysis.memory.VIEWS`; ``device`` selects devices
    (None: all); ``top`` the N largest rows per device of the peak views (None: their own
    default) or the first rows of the others; ``buckets`` the time buckets of the timeline.
    """

    view: str = "summary"
    device: str | None = None
    top: int | None = None
    buckets: int = 1000


@dataclass(frozen=True)
class RooflineOptions:
    """Options of the roofline (:func:`tracewh.analysis.roofline.roofline`).

    ``op``: operator name pattern (None: all); ``top``: operators shown; ``peak_tflops`` and
    ``peak_tbs``: roofs instead of the device table's (None: the table's).
    """

    op: str | None = None
    top: int | None = 20
    peak_tflops: str | None = None
    peak_tbs: float | None = None


@dataclass(frozen=True)
class CollectivesOptions:
    """Options of the collectives matched across ranks (:func:`tracewh.analysis.collectives.collectives`).

    ``by`` one of :data:`COLLECTIVE_VIEWS`; ``link``: a ``link_peaks`` name instead of the
    device's link; ``link_peak_gbps``: the link's peak per direction (GB/s) instead of the
    table's; ``top``: rows shown.
    """

    by: str = "collective"
    link: str | None = None
    link_peak_gbps: float | None = None
    top: int | None = 20
