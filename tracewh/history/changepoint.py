"""Change points of one series: E-divisive means with a selection-corrected significance test.

The detector finds the runs where a per-run metric (a kernel's time per step, the step time,
...) moved to a new level and stayed there, over the whole history at once, as Apache Otava
(formerly DataStax Hunter) and MongoDB's CI analysis do:

1. **Candidates: E-divisive means** (Matteson & James, 2014). For a segment ``[s, e)`` of the
   series, the energy statistic of a split at ``tau`` against a right end ``kappa`` is
   ``Q(tau, kappa) = m k / (m + k) * (2/(m k) B - 1/(m (m-1)) W_L - 1/(k (k-1)) W_R)`` with
   ``m = tau - s``, ``k = kappa - tau``, ``B`` the sum of the distances ``|x_i - x_j|`` across
   the split and ``W_L``, ``W_R`` those within each side (both orders). The candidate is the
   ``tau`` of the largest ``Q`` over every ``(tau, kappa)``. All sums come from one 2-D prefix
   sum of the distance matrix, so a segment costs ``O(len^2)`` vectorised operations: this
   exhaustive search is done in segments of at most :data:`EXACT_MAX` (256) runs. In a
   longer segment the candidate is the split of largest t statistic (step 2's, without the
   correction) of ``[s, tau)`` against ``[tau, e)``, from prefix sums in ``O(len)``: binary
   segmentation, whose splits cut the series down to segments searched exhaustively. A
   series of ``n`` runs then costs ``O(n)`` per level of the recursion, not ``O(n^2)`` time
   and memory (a history of 10,000 runs per series would need an 800 MB distance matrix).
   A change later undone (a bump) inside a segment longer than 256 runs is found once the
   recursion has cut a segment of at most 256 runs around it, or when it moves the mean of
   the whole segment significantly.
2. **Significance: a two-sample t-test corrected for the search.** The candidate splits the
   segment into a left and a right part; their means are compared with Student's t-test on
   the pooled variance (so a right part of one run, the newest night, can be tested). The
   noise variance is the larger of the pooled between-run variance and the runs' own
   *within-run* variance of their mean (the spread across a run's steps, divided by its step
   count): a history that happens to look quieter than its runs' own step-to-step noise does
   not make changes significant. The candidate was chosen as the best of ``M`` possible
   split positions, so its p-value is multiplied by ``M`` (Bonferroni): under pure noise a
   segment is split with probability at most ``alpha``, which bounds the false alarms of a
   change-free series (Otava's plain t-test p-value of the best split has no such bound).
3. **Recursion and merge.** Accepted splits are applied recursively to both parts (binary
   segmentation); then, as in Otava's merge step, every change point is re-tested between
   its neighbours, the weakest failing one is dropped and its neighbours re-tested, until all
   pass.
4. **Location.** Each change point is finally placed at the split of least squared error
   (the maximum-likelihood location of a step in Gaussian noise) within ``refine`` runs of
   the E-divisive candidate and between its neighbours.

Values are analysed on a log scale when all are positive (timings: noise and changes are
relative); ``before`` and ``after`` are the plain means of the segments either side.
Segments are at least ``min_size`` runs long, except the last one, which may be as short as
``tail_size`` runs (a change on the newest night is found the night it appears; it is
``provisional`` while fewer than ``min_size`` runs show it).

Pure numpy: arrays in, dataclasses out; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tracewh.history.options import DEFAULT_ALPHA as DEFAULT_ALPHA
from tracewh.history.segments import EXACT_MAX as EXACT_MAX
from tracewh.history.segments import FloatArray
from tracewh.history.segments import Params as _Params
from tracewh.history.segments import Series as _Series
from tracewh.history.segments import candidate as _candidate
from tracewh.history.segments import positions as _positions
from tracewh.history.segments import t_stats as _t_stats
from tracewh.history.stats import student_t_sf2


@dataclass(frozen=True)
class ChangePoint:
    """A change of level at ``index`` (the first position after the change).

    Attributes
    ----------
    index
        Position of the first value of the new level.
    before, after
        Means of the values of the segment before and after (the series' unit).
    p_value
        Significance of the change between its neighbouring change points (corrected for
        the number of split positions searched; at most 1).
    noise
        Noise standard deviation used by the test, relative (log scale) or in the series'
        unit (linear scale).
    relative
        Whether the test ran on the log scale (``noise`` is then relative).
    runs_after
        Length of the segment after the change.
    provisional
        Whether the segment after is shorter than ``min_size`` (the newest runs).
    """

    index: int
    before: float
    after: float
    p_value: float
    noise: float
    relative: bool
    runs_after: int
    provisional: bool

    @property
    def change(self) -> float | None:
        """Relative change ``after / before - 1`` (None for a zero ``before``)."""
        return self.after / self.before - 1.0 if self.before else None


@dataclass(frozen=True)
class _Test:
    p_value: float
    noise: float
    before: float
    after: float


def _test(ser: _Series, s: int, tau: int, e: int, m_positions: int) -> _Test:
    """Pooled two-sample t-test of ``[s, tau)`` against ``[tau, e)``, corrected for the search."""
    n1, n2 = tau - s, e - tau
    df = n1 + n2 - 2
    mean1, mean2 = ser.mean(s, tau), ser.mean(tau, e)
    within = float((ser.nv[e] - ser.nv[s]) / (e - s))
    var = (ser.sse(s, tau) + ser.sse(tau, e)) / df if df > 0 else math.inf
    var = max(var, within, ser.floor)
    if df <= 0 or not math.isfinite(var):
        return _Test(1.0, math.sqrt(var) if math.isfinite(var) else math.inf, mean1, mean2)
    diff = mean2 - mean1
    if var <= 0.0:
        p = 0.0 if diff != 0.0 else 1.0
    else:
        t = diff / math.sqrt(var * (1.0 / n1 + 1.0 / n2))
        p = student_t_sf2(t, df)
    return _Test(min(1.0, p * max(1, m_positions)), math.sqrt(max(var, 0.0)), mean1, mean2)


def _rel_change(ser: _Series, log: bool, t: _Test) -> float:
    if log:
        return abs(math.expm1(t.after - t.before))
    return abs(t.after - t.before) / abs(t.before) if t.before else math.inf


def _accept(ser: _Series, log: bool, t: _Test, prm: _Params) -> bool:
    return t.p_value <= prm.alpha and _rel_change(ser, log, t) >= prm.min_change


def _z_crit(level: float) -> float:
    """The ``z`` with two-sided normal tail ``level`` (bisection on ``erfc``)."""
    lo, hi = 0.0, 40.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if math.erfc(mid / math.sqrt(2.0)) > level:
            lo = mid
        else:
            hi = mid
    return lo


def _prescreen(ser: _Series, n: int, prm: _Params) -> bool:
    """Whether any first split of the series could pass the test (else: no change at all).

    The first candidate is tested as ``[0, tau)`` against ``[tau, n)`` (correction: the
    number of positions) or against ``[tau, kappa)`` (correction: the number of pairs);
    when every one of those tests fails, so does the candidate: an exact shortcut that
    skips the distance matrix of a change-free series. (A t statistic below the normal
    critical value cannot pass: Student's tail is heavier.)
    """
    pos = _positions(0, n, n, prm)
    if len(pos) == 0 or n < 3:
        return False
    if n > EXACT_MAX:  # the first candidate costs O(n) (_linear_candidate): nothing to spare
        return True
    taus = np.arange(pos.start, pos.stop, dtype=np.int64)
    t_full = float(_t_stats(ser, 0, taus, np.full_like(taus, n)).max())
    if min(1.0, student_t_sf2(t_full, n - 2) * len(pos)) <= prm.alpha:
        return True
    pairs = len(pos) * n // 2
    z = _z_crit(prm.alpha / pairs)
    # every (tau, kappa) with kappa - tau >= min_size, kappa < n, by broadcasting
    tt = taus[:, None]
    kk = np.arange(1, n, dtype=np.int64)[None, :]
    n1 = tt.astype(np.float64)
    n2 = (kk - tt).astype(np.float64)
    keep = n2 >= prm.min_size
    if not keep.any():
        return False
    s1, s2 = ser.s1, ser.s2
    left, right = s1[tt], s1[kk] - s1[tt]
    with np.errstate(divide="ignore", invalid="ignore"):
        sse = (s2[tt] - left * left / n1) + (s2[kk] - s2[tt] - right * right / n2)
        var = np.maximum(sse / (n1 + n2 - 2.0), np.maximum(ser.nv[kk] / (n1 + n2), ser.floor))
        t2 = (right / n2 - left / n1) ** 2 / (var * (1.0 / n1 + 1.0 / n2))
    t2 = np.where(keep, t2, 0.0)
    best_per_end = np.sqrt(np.nan_to_num(t2, nan=0.0).max(axis=0))  # df = kappa - 2
    for j in np.flatnonzero(best_per_end >= z):
        if student_t_sf2(float(best_per_end[j]), float(j + 1 - 2)) * pairs <= prm.alpha:
            return True
    return False


def _refine(ser: _Series, s: int, tau: int, e: int, n: int, prm: _Params) -> int:
    """The least-squares split within ``refine`` positions of ``tau`` inside ``[s, e)``."""
    pos = _positions(s, e, n, prm)
    lo, hi = max(pos.start, tau - prm.refine), min(pos.stop - 1, tau + prm.refine)
    if lo > hi:
        return tau
    best, best_sse = tau, math.inf
    for cand in range(lo, hi + 1):
        sse = ser.sse(s, cand) + ser.sse(cand, e)
        if sse < best_sse - 1e-12 * abs(best_sse if math.isfinite(best_sse) else 0.0):
            best, best_sse = cand, sse
    return best


def detect(
    values: Sequence[float] | FloatArray,
    *,
    within_var: Sequence[float] | FloatArray | None = None,
    alpha: float = DEFAULT_ALPHA,
    min_size: int = 3,
    tail_size: int = 1,
    min_change: float = 0.0,
    refine: int = 2,
) -> list[ChangePoint]:
    """Change points of ``values`` (oldest first), each a lasting change of level.

    Parameters
    ----------
    values
        The series, one value per run, oldest first (e.g. ns per step).
    within_var
        Per run, the variance of its value from its own steps (step variance / steps), in
        the series' unit squared; NaN or None where unknown. The noise model's floor.
    alpha
        Family-wise significance of a split (p-value after the search correction).
    min_size
        Fewest runs in a segment, but the last.
    tail_size
        Fewest runs in the last segment (1: a change on the newest run is reported).
    min_change
        Smallest relative change reported (``0.02`` = 2%).
    refine
        How far (in runs) the least-squares location may move from the E-divisive one.

    Returns
    -------
    list[ChangePoint]
        In series order.

    Examples
    --------
    >>> [c.index for c in detect([10.0] * 20 + [13.0] * 20)]
    [20]
    """
    x = np.asarray(values, dtype=np.float64)
    n = x.size
    prm = _Params(alpha, max(1, min_size), max(1, min(tail_size, min_size)), min_change, refine)
    if n < prm.min_size + prm.tail_size or not np.isfinite(x).all():
        return []
    wv = (
        np.zeros(n) if within_var is None
        else np.nan_to_num(np.asarray(within_var, dtype=np.float64), nan=0.0)
    )
    log = bool((x > 0).all())
    if log:
        y = np.log(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            wv = np.where(x > 0, wv / (x * x), 0.0)  # relative variance: delta method
    else:
        y = x
    if float(np.ptp(y)) == 0.0:
        return []
    scale = 1.0 if log else float(np.abs(y).max())
    ser = _Series(y, np.clip(wv, 0.0, None), (1e-9 * scale) ** 2)
    if not _prescreen(ser, n, prm):
        return []
    cps = _split(ser, n, prm, log)
    cps = _merge(ser, cps, n, prm, log)
    return _finish(ser, x, cps, n, prm, log)


def _split(ser: _Series, n: int, prm: _Params, log: bool) -> list[int]:
    """Binary segmentation: split while the E-divisive candidate passes the test.

    The candidate's left part is tested against the rest of the segment and, when its best
    right end ``kappa`` lies inside the segment (a change that is later undone), against
    ``[tau, kappa)`` alone, corrected for every ``(tau, kappa)`` pair searched.
    """
    found: list[int] = []
    todo = [(0, n)]
    while todo:
        s, e = todo.pop()
        pos = _positions(s, e, n, prm)
        cand = _candidate(ser, s, e, pos)
        if cand is None:
            continue
        tau, kappa = cand
        ok = _accept(ser, log, _test(ser, s, tau, e, len(pos)), prm)
        if not ok and kappa < e and kappa - tau >= prm.min_size:
            pairs = len(pos) * (e - s) // 2
            ok = _accept(ser, log, _test(ser, s, tau, kappa, pairs), prm)
        if not ok:
            continue
        found.append(tau)
        todo += [(s, tau), (tau, e)]
    return sorted(found)


def _stats(ser: _Series, cps: list[int], i: int, n: int, prm: _Params) -> _Test:
    s = cps[i - 1] if i > 0 else 0
    e = cps[i + 1] if i + 1 < len(cps) else n
    return _test(ser, s, cps[i], e, len(_positions(s, e, n, prm)))


def _merge(ser: _Series, cps: list[int], n: int, prm: _Params, log: bool) -> list[int]:
    cps = list(cps)
    while cps:
        tests = [_stats(ser, cps, i, n, prm) for i in range(len(cps))]
        failing = [i for i, t in enumerate(tests) if not _accept(ser, log, t, prm)]
        if not failing:
            break
        weakest = max(failing, key=lambda i: (tests[i].p_value, -_rel_change(ser, log, tests[i])))
        del cps[weakest]
    return cps


def _finish(
    ser: _Series, x: FloatArray, cps: list[int], n: int, prm: _Params, log: bool
) -> list[ChangePoint]:
    cps = list(cps)
    for i in range(len(cps)):
        s = cps[i - 1] if i > 0 else 0
        e = cps[i + 1] if i + 1 < len(cps) else n
        cps[i] = _refine(ser, s, cps[i], e, n, prm)
    cps = _merge(ser, sorted(set(cps)), n, prm, log)
    out: list[ChangePoint] = []
    for i, tau in enumerate(cps):
        s = cps[i - 1] if i > 0 else 0
        e = cps[i + 1] if i + 1 < len(cps) else n
        t = _stats(ser, cps, i, n, prm)
        out.append(ChangePoint(
            index=tau, before=float(x[s:tau].mean()), after=float(x[tau:e].mean()),
            p_value=t.p_value, noise=t.noise, relative=log, runs_after=e - tau,
            provisional=e - tau < prm.min_size,
        ))  # fmt: skip
    return out
