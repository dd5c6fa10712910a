"""Labelled series for the change-point benchmark, and how detections are scored.

A series is one metric over ``n`` nightly runs (30-60), each run the mean of its steps, with
0-2 lasting step changes of 2-30% (up or down, at least ``GAP`` runs from each other and
from both ends) and run-to-run noise of 1-5%, generated as ``tracewh synth`` does for a
kernel's time per step: each night a multiplicative factor ``exp(N(0, noise))`` times the
active changes, and within the run each step jitters by ``exp(N(0, STEP_JITTER))``. The
noise is the standard deviation of that per-night factor (the per-run value's relative
noise, apart from the small step jitter that averages out).

Scoring: a detection is a true positive when it names exactly the first run after a true
change (``tolerance`` 0; also reported with 1); each true change matches at most one
detection. Precision, recall and F1 over all changes; the false-alarm rate is the share of
change-free series with at least one detection.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

GAP = 5
STEP_JITTER = 0.01


@dataclass(frozen=True)
class Series:
    """One labelled series: per-run values, their within-run variance, the true changes."""

    name: str
    values: tuple[float, ...]
    within_var: tuple[float, ...]
    noise: float
    changes: tuple[int, ...]  # index of the first run after each change
    sizes: tuple[float, ...] = field(default_factory=tuple)  # relative size of each change


def generate(seed: int, n_changes: int, *, base: float = 1.0e6) -> Series:
    """One series with ``n_changes`` true changes (deterministic for ``seed``)."""
    rng = random.Random(f"changes:{seed}:{n_changes}")
    n = rng.randint(30, 60)
    noise = rng.uniform(0.01, 0.05)
    changes: list[int] = []
    while len(changes) < n_changes:
        c = rng.randint(GAP, n - GAP)
        if all(abs(c - o) >= GAP for o in changes):
            changes.append(c)
    changes.sort()
    sizes = [rng.choice((-1.0, 1.0)) * rng.uniform(0.02, 0.30) for _ in changes]
    values, within = [], []
    steps = rng.randint(4, 12)
    for i in range(n):
        level = base
        for c, s in zip(changes, sizes, strict=True):
            if i >= c:
                level *= 1.0 + s
        night = level * math.exp(rng.gauss(0.0, noise))
        xs = [night * math.exp(rng.gauss(0.0, STEP_JITTER)) for _ in range(steps)]
        mean = sum(xs) / steps
        var = sum((x - mean) ** 2 for x in xs) / (steps - 1)
        values.append(mean)
        within.append(var / steps)
    return Series(f"s{seed}-{n_changes}", tuple(values), tuple(within), noise,
                  tuple(changes), tuple(sizes))  # fmt: skip


def corpus(n_per_class: int, *, seed0: int = 0) -> list[Series]:
    """``n_per_class`` series with 0, 1 and 2 changes each."""
    return [generate(seed0 + i, k) for k in (0, 1, 2) for i in range(n_per_class)]


@dataclass
class Score:
    """Counts and rates of one detector over a corpus."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    quiet: int = 0
    quiet_alarmed: int = 0
    big: int = 0  # changes of at least 3x the noise
    big_exact: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def false_alarm_rate(self) -> float:
        return self.quiet_alarmed / self.quiet if self.quiet else 0.0

    @property
    def big_exact_rate(self) -> float:
        return self.big_exact / self.big if self.big else 1.0


def _match(truth: Sequence[int], found: Iterable[int], tolerance: int) -> int:
    """Greedy one-to-one matching of detections to true changes within ``tolerance``."""
    free = sorted(truth)
    tp = 0
    for f in sorted(found):
        hit = next((t for t in free if abs(t - f) <= tolerance), None)
        if hit is not None:
            free.remove(hit)
            tp += 1
    return tp


def score(corpus_: Sequence[Series], found: Sequence[Sequence[int]], *, tolerance: int = 0) -> Score:
    """Score the detections ``found`` (one list of indexes per series) against the truth."""
    sc = Score()
    for s, f in zip(corpus_, found, strict=True):
        tp = _match(s.changes, f, tolerance)
        sc.tp += tp
        sc.fp += len(set(f)) - tp
        sc.fn += len(s.changes) - tp
        if not s.changes:
            sc.quiet += 1
            sc.quiet_alarmed += bool(f)
        for c, size in zip(s.changes, s.sizes, strict=True):
            if abs(math.log1p(size)) >= 3 * s.noise:
                sc.big += 1
                sc.big_exact += c in set(f)
    return sc
