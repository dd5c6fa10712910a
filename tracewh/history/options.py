"""The options of the regression check and of change points, declared once.

:class:`CheckOptions` and :class:`ChangesOptions` hold every option with its default; the
API (:meth:`tracewh.api.Warehouse.check`, :meth:`~tracewh.api.Warehouse.changes`), the
functions that do the work (:func:`tracewh.history.check.check`,
:func:`tracewh.history.alerts.changes`) and the CLI (``tracewh check``, ``tracewh changes``)
take their defaults from here (``tests/history/test_options.py`` holds them to it). Plain
values only: importing this module imports nothing heavy (the CLI reads it at start).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_ALPHA", "DEFAULT_KEYS", "ChangesOptions", "CheckOptions"]

#: Default family-wise significance of one split (after the correction for the search).
DEFAULT_ALPHA = 0.01

#: Labels that name a workload by default.
DEFAULT_KEYS: tuple[str, ...] = ("model", "branch")


@dataclass(frozen=True)
class CheckOptions:
    """Options of the regression check (see :func:`tracewh.history.check.check`).

    Parameters
    ----------
    baseline
        At most this many last runs of the segment before the change (None: all of it).
    threshold
        Relative change that counts (0.10 = 10%).
    min_ms
        Check kernels, categories and modules of at least this many ms per step.
    k_mad
        A change must also exceed ``k_mad`` times the noise the change-point test measured.
    floor_ms
        Smallest absolute change that counts, ms per step.
    min_runs
        Fewest comparable earlier runs to check at all.
    alpha
        Significance of a change point.
    keys
        Labels that name a workload.
    all_ranks
        Check the other ranks of the run's job instance too.
    include_unusable
        Keep runs flagged unusable for comparison in the baselines.
    op
        Also check the achieved TFLOP/s of the CPU operators matching this pattern.
    critical_path
        Also check the critical path's shares by bound (:mod:`tracewh.history.cpseries`).
    """

    baseline: int | None = None
    threshold: float = 0.10
    min_ms: float = 0.1
    k_mad: float = 3.0
    floor_ms: float = 0.01
    min_runs: int = 3
    alpha: float = DEFAULT_ALPHA
    keys: tuple[str, ...] = DEFAULT_KEYS
    all_ranks: bool = True
    include_unusable: bool = False
    op: str | None = None
    critical_path: bool = False


@dataclass(frozen=True)
class ChangesOptions:
    """Options of change points over the history (see :func:`tracewh.history.alerts.changes`).

    Parameters
    ----------
    since
        ``90d``, ``12w`` or a date (None: all history).
    alpha
        Significance of a change.
    min_change
        Smallest relative change reported (0.02 = 2%).
    min_ms
        Series whose values stay under this many ms per step are not analysed.
    floor_ms
        Smallest absolute change reported, ms per step.
    keys
        Labels that name a workload.
    include_unusable
        Keep runs flagged unusable for comparison.
    critical_path
        Analyse the critical path's shares by bound instead (:mod:`tracewh.history.cpseries`).
    """

    since: str | None = "90d"
    alpha: float = DEFAULT_ALPHA
    min_change: float = 0.0
    min_ms: float = 0.1
    floor_ms: float = 0.01
    keys: tuple[str, ...] = DEFAULT_KEYS
    include_unusable: bool = False
    critical_path: bool = False
