"""tracewh.history.changepoint: the E-divisive statistic and the t-test against plain loops,
known Student-t tail values, and detections on seeded series with known answers."""

from __future__ import annotations

import json
import math
import random
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tracewh.history import changepoint as cp

# two-sided Student-t critical values from printed tables: (t, df, p)
T_TABLE = [(2.228, 10, 0.05), (3.169, 10, 0.01), (4.587, 10, 0.001), (2.042, 30, 0.05),
           (12.706, 1, 0.05), (1.960, 10**7, 0.05), (2.576, 10**7, 0.01)]  # fmt: skip


@pytest.mark.parametrize(("t", "df", "p"), T_TABLE)
def test_student_t_tail_matches_tables(t: float, df: int, p: float) -> None:
    assert cp.student_t_sf2(t, df) == pytest.approx(p, rel=2e-3)
    assert cp.student_t_sf2(-t, df) == pytest.approx(p, rel=2e-3)


def _naive_q(y: list[float], s: int, tau: int, kappa: int) -> float:
    """Matteson & James's Q(tau, kappa) of y[s:kappa] split at tau, with plain loops."""
    left, right = y[s:tau], y[tau:kappa]
    m, k = len(left), len(right)
    between = sum(abs(a - b) for a in left for b in right)
    wl = sum(abs(left[i] - left[j]) for i in range(m) for j in range(i + 1, m))
    wr = sum(abs(right[i] - right[j]) for i in range(k) for j in range(i + 1, k))
    e = 2.0 * between / (m * k)
    e -= wl / math.comb(m, 2) if m > 1 else 0.0
    e -= wr / math.comb(k, 2) if k > 1 else 0.0
    return m * k / (m + k) * e


def test_candidate_is_the_argmax_of_the_energy_statistic() -> None:
    rng = random.Random(3)
    y = [rng.gauss(0, 1) for _ in range(12)] + [rng.gauss(2, 1) for _ in range(9)]
    ser = cp._Series(np.asarray(y), np.zeros(len(y)), 0.0)
    for s, e in ((0, len(y)), (4, 17)):
        pos = cp._positions(s, e, len(y), cp._Params(0.01, 3, 3, 0.0, 0))
        best = max((_naive_q(y, s, t, k), t, k) for t in pos for k in range(t + 1, e + 1))
        assert cp._candidate(ser, s, e, pos) == (best[1], best[2])


def test_pooled_t_test_matches_a_plain_computation() -> None:
    rng = random.Random(5)
    y = [rng.gauss(10, 1) for _ in range(15)]
    ser = cp._Series(np.asarray(y), np.zeros(len(y)), 0.0)
    a, b = y[:6], y[6:]
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    ss = sum((v - ma) ** 2 for v in a) + sum((v - mb) ** 2 for v in b)
    sp = math.sqrt(ss / (len(y) - 2))
    t = (mb - ma) / (sp * math.sqrt(1 / len(a) + 1 / len(b)))
    res = cp._test(ser, 0, 6, len(y), 1)
    assert res.p_value == pytest.approx(cp.student_t_sf2(t, len(y) - 2), rel=1e-9)
    assert cp._test(ser, 0, 6, len(y), 7).p_value == pytest.approx(min(1, 7 * res.p_value))


def _series(rng: random.Random, n: int, noise: float, steps: dict[int, float]) -> list[float]:
    out = []
    for i in range(n):
        level = 100.0
        for at, size in steps.items():
            if i >= at:
                level *= 1 + size
        out.append(level * math.exp(rng.gauss(0, noise)))
    return out


def test_noise_only_series_raise_nothing() -> None:
    alarms = 0
    for seed in range(150):
        rng = random.Random(seed)
        alarms += bool(cp.detect(_series(rng, rng.randint(30, 60), rng.uniform(0.01, 0.05), {})))
    assert alarms <= 1  # the bound is alpha = 1% of series; Bonferroni keeps it well under


def test_a_clear_step_is_found_on_its_run_and_only_it() -> None:
    rng = random.Random(11)
    y = _series(rng, 45, 0.02, {27: 0.15})
    (c,) = cp.detect(y)
    assert c.index == 27
    assert c.before == pytest.approx(sum(y[:27]) / 27)
    assert c.after == pytest.approx(sum(y[27:]) / 18)
    assert c.change == pytest.approx(0.15, abs=0.03)
    assert c.p_value < 1e-6 and not c.provisional


def test_a_change_on_the_newest_run_is_provisional() -> None:
    rng = random.Random(2)
    y = _series(rng, 30, 0.02, {29: 0.30})
    (c,) = cp.detect(y)
    assert (c.index, c.runs_after, c.provisional) == (29, 1, True)
    assert cp.detect(y, tail_size=3) == []  # not reported until three runs show it


def test_a_bump_that_is_undone_gives_two_change_points() -> None:
    rng = random.Random(8)
    y = _series(rng, 50, 0.02, {20: 0.25, 27: -0.2})
    assert [c.index for c in cp.detect(y)] == [20, 27]


def test_within_run_noise_is_a_floor() -> None:
    y = [100.0, 100.2, 99.9, 100.1, 100.0, 100.1, 101.0, 101.1, 100.9, 101.0, 101.1, 100.9]
    assert [c.index for c in cp.detect(y)] == [6]  # 1% with 0.1% run-to-run noise
    # each run's own steps say its value is only known to +-2%: no change can be claimed
    assert cp.detect(y, within_var=[(2.0) ** 2] * len(y)) == []


def test_min_change_and_degenerate_input() -> None:
    rng = random.Random(4)
    y = _series(rng, 40, 0.002, {20: 0.01})
    assert [c.index for c in cp.detect(y)] == [20]
    assert cp.detect(y, min_change=0.02) == []
    assert cp.detect([5.0] * 30) == []
    assert cp.detect([1.0, 2.0]) == []
    assert cp.detect([0.0] * 10 + [3.0] * 10)[0].index == 10  # zeros: linear scale
    assert cp.detect([1.0, float("nan")] * 10) == []


OTAVA = Path(".bench-venv/otava/bin/python")


@pytest.mark.skipif(not OTAVA.exists(), reason="bench-only Otava venv absent (make bench creates it)")
def test_agrees_with_otava_on_clear_changes() -> None:
    """On series with unmistakable changes both detectors name the same runs."""
    cases = []
    for seed in range(20):
        rng = random.Random(100 + seed)
        n = rng.randint(30, 60)
        at = rng.randint(8, n - 8)
        cases.append(_series(rng, n, 0.01, {at: rng.choice((-0.2, 0.25))}))
    res = subprocess.run([str(OTAVA), "bench/otava_runner.py"], input=json.dumps({"series": cases}),
                         capture_output=True, text=True, check=True)  # fmt: skip
    theirs = json.loads(res.stdout)["found"]
    ours = [[c.index for c in cp.detect(y)] for y in cases]
    assert ours == theirs


def test_a_long_series_is_searched_in_linear_time_and_memory() -> None:
    """Beyond EXACT_MAX runs the candidate is the largest t split (no n x n matrix); the
    segments the recursion cuts to EXACT_MAX runs or fewer are searched exhaustively."""
    rng = random.Random(21)
    n = 4 * cp.EXACT_MAX
    y = _series(rng, n, 0.03, {611: 0.10})
    assert [c.index for c in cp.detect(y)] == [611]
    ys = np.log(np.asarray(y))
    ser = cp._Series(ys, np.zeros(n), 0.0)
    prm = cp._Params(0.01, 3, 1, 0.0, 2)
    pos = cp._positions(0, n, n, prm)
    tau, kappa = cp._candidate(ser, 0, n, pos)  # type: ignore[misc]
    assert ser._p is None and kappa == n
    # the largest t statistic by a plain computation, at every admissible split
    best = max(pos, key=lambda t: abs(ys[t:].mean() - ys[:t].mean()) / math.sqrt(
        (((ys[:t] - ys[:t].mean()) ** 2).sum() + ((ys[t:] - ys[t:].mean()) ** 2).sum())
        / (n - 2) * (1 / t + 1 / (n - t))))
    assert tau == best == 611
    s, e = 500, 500 + 40  # a short segment of the long series: E-divisive, exhaustively
    short = [float(v) for v in ys]
    inner = cp._positions(s, e, n, prm)
    want = max((_naive_q(short, s, t, k), t, k) for t in inner for k in range(t + 1, e + 1))
    assert cp._candidate(ser, s, e, inner) == (want[1], want[2]) and ser._p is None


def test_long_noise_series_raise_nothing() -> None:
    alarms = 0
    for seed in range(40):
        rng = random.Random(500 + seed)
        alarms += bool(cp.detect(_series(rng, rng.randint(300, 1500), 0.03, {})))
    assert alarms == 0
