"""The split search of change-point detection: a series' prefix sums and each segment's candidate.

Used by :mod:`tracewh.history.changepoint` (see its docstring, step 1): the E-divisive search
over every ``(tau, kappa)`` of a segment of at most :data:`EXACT_MAX` runs, the largest t
statistic against the segment's end in a longer one. Pure numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["EXACT_MAX", "FloatArray", "Params", "Series", "candidate", "energy_candidate",
           "linear_candidate", "positions", "t_stats"]

FloatArray = NDArray[np.float64]

#: Segments of at most this many runs are searched exhaustively (E-divisive over every
#: ``(tau, kappa)``: O(len^2) time and memory); longer ones by the largest t statistic
#: against the segment's end (O(len)), so a series of n runs costs O(n) per level of the
#: recursion, not O(n^2).
EXACT_MAX = 256


class Series:
    """One series' prefix sums: sums, squares, noise and (built on first use) distances."""

    def __init__(self, y: FloatArray, noise_var: FloatArray, floor: float) -> None:
        self.y = y
        self.s1 = np.concatenate(([0.0], np.cumsum(y)))
        self.s2 = np.concatenate(([0.0], np.cumsum(y * y)))
        self.nv = np.concatenate(([0.0], np.cumsum(noise_var)))
        self.floor = floor  # least noise variance: identical values are not infinitely sure
        self._p: FloatArray | None = None

    @property
    def p(self) -> FloatArray:
        """2-D prefix sum of the distance matrix ``|y_i - y_j|``."""
        if self._p is None:
            y = self.y
            n = y.size
            p = np.zeros((n + 1, n + 1))
            p[1:, 1:] = np.abs(y[:, None] - y[None, :]).cumsum(axis=0).cumsum(axis=1)
            self._p = p
        return self._p

    def block(self, a0: NDArray[np.int64] | int, a1: NDArray[np.int64] | int,
              b0: NDArray[np.int64] | int, b1: NDArray[np.int64] | int) -> FloatArray:
        """Sum of distances over rows ``[a0, a1)`` and columns ``[b0, b1)``."""
        p = self.p
        out: FloatArray = p[a1, b1] - p[a0, b1] - p[a1, b0] + p[a0, b0]
        return out

    def sse(self, a: int, b: int) -> float:
        """Sum of squared deviations from the mean over ``[a, b)``."""
        n = b - a
        if n <= 0:
            return 0.0
        s = self.s1[b] - self.s1[a]
        return float(max(0.0, self.s2[b] - self.s2[a] - s * s / n))

    def mean(self, a: int, b: int) -> float:
        return float((self.s1[b] - self.s1[a]) / (b - a))


@dataclass(frozen=True)
class Params:
    alpha: float
    min_size: int
    tail_size: int
    min_change: float
    refine: int


def positions(s: int, e: int, n: int, prm: Params) -> range:
    """Admissible split positions of segment ``[s, e)`` (a short last part only at the end)."""
    right = prm.tail_size if e == n else prm.min_size
    return range(s + prm.min_size, e - right + 1)


def candidate(ser: Series, s: int, e: int, pos: range) -> tuple[int, int] | None:
    """The candidate split of ``[s, e)``: ``(tau, kappa)``.

    The E-divisive search (:func:`energy_candidate`) in a segment of at most
    :data:`EXACT_MAX` runs; in a longer one, the split of largest t statistic against the
    segment's end (``kappa = e``, :func:`linear_candidate`).
    """
    if len(pos) == 0:
        return None
    n = ser.y.size
    if n <= EXACT_MAX:
        return energy_candidate(ser, s, e, pos)
    if e - s > EXACT_MAX:
        return linear_candidate(ser, s, e, pos)
    # a short segment of a long series: its own distance matrix (never the whole series')
    local = Series(ser.y[s:e], np.zeros(e - s), ser.floor)
    found = energy_candidate(local, 0, e - s, range(pos.start - s, pos.stop - s))
    return None if found is None else (found[0] + s, found[1] + s)


def linear_candidate(ser: Series, s: int, e: int, pos: range) -> tuple[int, int] | None:
    """The split of ``[s, e)`` of largest pooled t statistic of ``[s, tau)`` against
    ``[tau, e)`` (prefix sums: O(e - s)); the first of equal ones."""
    taus = np.arange(pos.start, pos.stop, dtype=np.int64)
    t = t_stats(ser, s, taus, np.full_like(taus, e))
    if not np.isfinite(t).any():
        return None
    return int(taus[int(np.nanargmax(t))]), e


def energy_candidate(ser: Series, s: int, e: int, pos: range) -> tuple[int, int] | None:
    """The E-divisive split of ``[s, e)``: the ``(tau, kappa)`` maximising ``Q(tau, kappa)``."""
    if len(pos) == 0:
        return None
    taus = np.arange(pos.start, pos.stop, dtype=np.int64)[:, None]
    kappas = np.arange(s + 1, e + 1, dtype=np.int64)[None, :]
    m = (taus - s).astype(np.float64)
    k = (kappas - taus).astype(np.float64)
    valid = k >= 1
    between = ser.block(s, taus, taus, kappas)
    w_left = ser.block(s, taus, s, taus)
    w_right = ser.block(taus, kappas, taus, kappas)
    with np.errstate(divide="ignore", invalid="ignore"):
        e_stat = (
            2.0 * between / (m * k)
            - np.where(m > 1, w_left / (m * (m - 1.0)), 0.0)
            - np.where(k > 1, w_right / (k * (k - 1.0)), 0.0)
        )
        q = np.where(valid, m * k / (m + k) * e_stat, -np.inf)
    if not np.isfinite(q).any():
        return None
    i, j = np.unravel_index(int(np.nanargmax(q)), q.shape)
    return pos.start + int(i), s + 1 + int(j)



def t_stats(ser: Series, s: int, taus: NDArray[np.int64], ends: NDArray[np.int64]) -> FloatArray:
    """|t| of the pooled test of ``[s, tau)`` against ``[tau, end)``, for arrays of both."""
    n1 = (taus - s).astype(np.float64)
    n2 = (ends - taus).astype(np.float64)
    s1, s2 = ser.s1, ser.s2
    left, right = s1[taus] - s1[s], s1[ends] - s1[taus]
    sse = (s2[taus] - s2[s] - left * left / n1) + (s2[ends] - s2[taus] - right * right / n2)
    df = n1 + n2 - 2.0
    within = (ser.nv[ends] - ser.nv[s]) / (n1 + n2)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = np.maximum(np.maximum(np.maximum(sse, 0.0) / df, within), ser.floor)
        diff = np.abs(right / n2 - left / n1)
        t: FloatArray = np.where(df > 0, diff / np.sqrt(var * (1.0 / n1 + 1.0 / n2)), 0.0)
    return t
