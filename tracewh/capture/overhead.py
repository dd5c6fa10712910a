"""The profiler's overhead, measured: alternating untraced and traced rounds.

Pure functions (no torch): the capture session (:mod:`tracewh.capture.session`)
times the rounds and hands them here.

Method
------
After the recorded window, the step function (or the script) runs ``2R + 1``
*rounds* in alternation, untraced first and last: ``U0 T0 U1 T1 … T(R-1) UR``.
Every round starts with one untimed step (in a traced round it is the
profiler's warm-up step; in an untraced one it lets the process settle after
the profiler stopped), then times ``K`` steps. A round's time is the median of
its timed steps, on one clock: wall time between device synchronisations when
CUDA/HIP is recorded, else the CPU time of the thread that runs the steps (the
profiler's cost on CPU is CPU work on that thread; time-slicing by other
processes on a shared machine inflates wall time, not that). Each traced round ``Ti`` is compared with the mean of its two
neighbours, ``ratio_i = Ti / ((Ui + U(i+1)) / 2)``, which cancels a linear drift
(warm-up, clock or load trends) across the three rounds.

The overhead is the median of the ``R`` ratios, minus 1, in %. Its 95 %
interval is the distribution-free interval for a median from order statistics
(the sign test inverted): ``[ratio_(k), ratio_(R+1-k)]`` with the largest ``k``
such that ``P(Binomial(R, 1/2) <= k - 1) <= 0.025``; its exact coverage,
``1 - 2 P(Binomial(R, 1/2) <= k - 1)``, is at least 95 % (96.1 % for R = 9,
97.9 % for R = 16). It needs ``R >= 6``. It assumes nothing about the shape
of the ratios' distribution, and an outlying round moves it by at most one
rank.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

RoundKind = Literal["untraced", "traced"]
Clock = Literal["wall", "cpu"]

MIN_ROUNDS = 6
"""Traced rounds needed for a 95 % order-statistic interval (2 / 2**5 > 5 %)."""
CONFIDENCE = 0.95
MAX_HALF_WIDTH_PCT = 10.0
"""An interval wider than this on average either side of the estimate is unreliable."""
MIN_PLAUSIBLE_PCT = -20.0
"""An estimate below this is implausible: noise, not a faster profiled step."""

METHOD = (
    "alternating rounds U T U ... T U after the recorded window; ratio_i = traced round / mean "
    "of its two untraced neighbours (round = median of its timed steps); estimate = median "
    "ratio - 1; 95% interval = order statistics of the ratios (sign test)"
)


@dataclass(frozen=True)
class Round:
    """One overhead round: its kind and each timed step's wall and CPU time, in ns.

    ``step_ns`` is wall time (device synchronised at both ends when CUDA/HIP is
    recorded); ``cpu_ns`` is the CPU time of the thread that ran the step
    (``time.thread_time_ns``), which time-slicing by other processes does not inflate.
    """

    kind: RoundKind
    step_ns: tuple[int, ...]
    cpu_ns: tuple[int, ...] = ()

    def times(self, clock: Clock) -> tuple[int, ...]:
        """The timed steps on ``clock`` (``wall`` or ``cpu``)."""
        return self.cpu_ns if clock == "cpu" else self.step_ns

    def median(self, clock: Clock) -> float:
        """Median of the timed steps on ``clock``, in ns."""
        return float(statistics.median(self.times(clock)))

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``run.json``'s ``capture.rounds``)."""
        return {"kind": self.kind, "step_ns": list(self.step_ns), "cpu_ns": list(self.cpu_ns)}


@dataclass(frozen=True)
class OverheadEstimate:
    """The profiler overhead and how far to trust it.

    Attributes
    ----------
    pct
        Median of the per-round ratios minus 1, in %.
    ci_low_pct, ci_high_pct
        The 95 % interval, in % (None with fewer than :data:`MIN_ROUNDS` ratios).
    coverage
        Exact coverage of that interval under the sign test (>= 0.95), or None.
    ratios
        ``traced / untraced`` of each traced round, in time order.
    reliable
        False when the interval is missing or wider than ±10 points, or the
        estimate is below -20 %.
    reasons
        Why it is unreliable, in words (empty when reliable).
    clock
        The clock the steps were compared on: ``wall`` or ``cpu``.
    """

    pct: float
    ci_low_pct: float | None
    ci_high_pct: float | None
    coverage: float | None
    ratios: tuple[float, ...]
    reliable: bool
    reasons: tuple[str, ...]
    clock: Clock = "wall"

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``run.json``'s ``capture.overhead``)."""
        return {
            "method": METHOD,
            "clock": self.clock,
            "estimate_pct": round(self.pct, 2),
            "ci_low_pct": _round_or_none(self.ci_low_pct),
            "ci_high_pct": _round_or_none(self.ci_high_pct),
            "confidence": CONFIDENCE,
            "coverage": _round_or_none(self.coverage, 4),
            "ratios": [round(r, 5) for r in self.ratios],
            "reliable": self.reliable,
            "unreliable_reasons": list(self.reasons),
        }


def _round_or_none(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _binom_cdf_half(n: int, k: int) -> float:
    """P(Binomial(n, 1/2) <= k)."""
    return float(sum(math.comb(n, i) for i in range(k + 1))) / float(2**n)


def median_interval_ranks(n: int, confidence: float = CONFIDENCE) -> tuple[int, float] | None:
    """The rank ``k`` of a distribution-free interval for a median, and its coverage.

    The interval is ``[x_(k), x_(n+1-k)]`` (1-based order statistics) with the
    largest ``k`` whose coverage ``1 - 2 P(Binomial(n, 1/2) <= k - 1)`` is at
    least ``confidence``.

    Parameters
    ----------
    n
        Sample size.
    confidence
        Wanted coverage, e.g. 0.95.

    Returns
    -------
    tuple of (int, float) or None
        ``(k, coverage)``, or None when even ``[min, max]`` covers less.

    Examples
    --------
    >>> median_interval_ranks(9)
    (2, 0.9609375)
    >>> median_interval_ranks(5) is None
    True
    """
    alpha = (1.0 - confidence) / 2.0
    best: tuple[int, float] | None = None
    for k in range(1, n // 2 + 1):
        tail = _binom_cdf_half(n, k - 1)
        if tail > alpha:
            break
        best = (k, 1.0 - 2.0 * tail)
    return best


def round_ratios(rounds: Sequence[Round], clock: Clock = "wall") -> list[float]:
    """``traced / untraced`` for each traced round, against its untraced neighbours.

    A traced round's reference is the mean of the untraced rounds just before
    and just after it (only the one before when the sequence ends with it).
    Rounds must alternate, untraced first.

    Examples
    --------
    >>> rs = [Round("untraced", (100,)), Round("traced", (150,)), Round("untraced", (200,))]
    >>> round_ratios(rs)
    [1.0]
    """
    ratios: list[float] = []
    for i, rnd in enumerate(rounds):
        expected: RoundKind = "untraced" if i % 2 == 0 else "traced"
        if rnd.kind != expected or not rnd.times(clock):
            raise ValueError(
                f"round {i} is {rnd.kind!r} with {len(rnd.times(clock))} {clock} times: "
                "rounds must alternate untraced/traced, untraced first, non-empty"
            )
        if rnd.kind == "untraced":
            continue
        before = rounds[i - 1].median(clock)
        ref = (before + rounds[i + 1].median(clock)) / 2.0 if i + 1 < len(rounds) else before
        if ref > 0:
            ratios.append(rnd.median(clock) / ref)
    return ratios


def estimate_overhead(
    rounds: Sequence[Round], *, clock: Clock = "wall", planned: int | None = None
) -> OverheadEstimate | None:
    """The overhead estimate, its 95 % interval and whether it is reliable.

    Parameters
    ----------
    rounds
        The rounds in time order (``U T U T … U``), as timed.
    clock
        Compare wall times (``step_ns``) or thread CPU times (``cpu_ns``).
    planned
        Traced rounds the capture planned; when fewer ran (the script ended),
        the estimate is marked unreliable.

    Returns
    -------
    OverheadEstimate or None
        None when no traced round has an untraced neighbour.

    Examples
    --------
    >>> u, t = (100,), (130,)
    >>> rs = [Round("untraced", u)] + [Round("traced", t), Round("untraced", u)] * 6
    >>> est = estimate_overhead(rs)
    >>> round(est.pct, 6), round(est.ci_low_pct, 6), round(est.ci_high_pct, 6), est.reliable
    (30.0, 30.0, 30.0, True)
    """
    ratios = round_ratios(rounds, clock)
    if not ratios:
        return None
    n = len(ratios)
    ordered = sorted(ratios)
    pct = (statistics.median(ordered) - 1.0) * 100.0
    ranks = median_interval_ranks(n)
    low = high = coverage = None
    reasons: list[str] = []
    if ranks is None:
        reasons.append(f"{n} traced round(s): a 95% interval needs at least {MIN_ROUNDS}")
    else:
        k, coverage = ranks
        low = (ordered[k - 1] - 1.0) * 100.0
        high = (ordered[n - k] - 1.0) * 100.0
        if (high - low) / 2.0 > MAX_HALF_WIDTH_PCT:
            reasons.append(
                f"the 95% interval [{low:+.1f}%, {high:+.1f}%] is wider than "
                f"±{MAX_HALF_WIDTH_PCT:g} points: run-to-run noise is large"
            )
    if pct < MIN_PLAUSIBLE_PCT:
        reasons.append(f"the estimate {pct:+.1f}% is implausible (below {MIN_PLAUSIBLE_PCT:g}%)")
    if planned is not None and n < planned:
        reasons.append(f"only {n} of {planned} traced rounds ran (the steps ran out)")
    return OverheadEstimate(
        pct=pct,
        ci_low_pct=low,
        ci_high_pct=high,
        coverage=coverage,
        ratios=tuple(ratios),
        reliable=not reasons,
        reasons=tuple(reasons),
        clock=clock,
    )
