"""tracewh.capture.overhead: the estimate, its order-statistic interval and the reliability flags.

Expected values are worked out by hand in the comments (binomial tails, medians).
"""

from __future__ import annotations

import pytest

from tracewh.capture.overhead import (
    MIN_ROUNDS,
    Round,
    estimate_overhead,
    median_interval_ranks,
    round_ratios,
)


def _rounds(untraced: list[int], traced: list[int]) -> list[Round]:
    """U0 T0 U1 T1 ... from one value per round (one timed step each)."""
    out: list[Round] = []
    for i, u in enumerate(untraced):
        out.append(Round("untraced", (u,)))
        if i < len(traced):
            out.append(Round("traced", (traced[i],)))
    return out


@pytest.mark.parametrize(
    ("n", "k", "coverage"),
    [
        # P(Bin(6, 1/2) <= 0) = 1/64: [min, max] covers 1 - 2/64.
        (6, 1, 1 - 2 / 64),
        # P(Bin(9, 1/2) <= 1) = 10/512 <= 0.025 < P(<= 2) = 46/512.
        (9, 2, 1 - 2 * 10 / 512),
        # P(Bin(14, 1/2) <= 2) = (1 + 14 + 91)/16384 = 106/16384; P(<= 3) = 470/16384 > 0.025.
        (14, 3, 1 - 2 * 106 / 16384),
        # P(Bin(16, 1/2) <= 3) = (1 + 16 + 120 + 560)/65536 = 697/65536; P(<= 4) = 2517/65536.
        (16, 4, 1 - 2 * 697 / 65536),
    ],
)
def test_median_interval_ranks_match_the_binomial_tails(n: int, k: int, coverage: float) -> None:
    assert median_interval_ranks(n) == (k, pytest.approx(coverage))


def test_no_interval_below_six_ratios() -> None:
    # [min, max] of 5 covers 1 - 2/32 = 93.75% < 95%.
    assert MIN_ROUNDS == 6
    assert median_interval_ranks(5) is None
    assert median_interval_ranks(6) is not None


def test_ratio_uses_the_mean_of_both_neighbours() -> None:
    # U=100, T=150, U=200: reference (100 + 200) / 2 = 150, ratio 1; a trailing T uses U before it.
    rounds = [
        Round("untraced", (100, 300, 90)),  # median 100
        Round("traced", (150,)),
        Round("untraced", (200,)),
        Round("traced", (300,)),
    ]
    assert round_ratios(rounds) == [pytest.approx(1.0), pytest.approx(1.5)]


def test_rounds_must_alternate() -> None:
    with pytest.raises(ValueError, match="alternate"):
        round_ratios([Round("traced", (1,)), Round("untraced", (1,))])


def test_estimate_and_interval_by_hand() -> None:
    # Untraced rounds all 100 ns, so ratio_i = T_i / 100.
    traced = [112, 108, 130, 95, 110, 111, 109, 150, 105]  # 9 ratios
    est = estimate_overhead(_rounds([100] * 10, traced))
    assert est is not None
    # sorted: 95 105 108 109 110 111 112 130 150 -> median 110; k = 2 -> [105, 130].
    assert est.pct == pytest.approx(10.0)
    assert est.ci_low_pct == pytest.approx(5.0)
    assert est.ci_high_pct == pytest.approx(30.0)
    assert est.coverage == pytest.approx(1 - 20 / 512)
    assert est.ci_low_pct <= est.pct <= est.ci_high_pct
    # (30 - 5) / 2 = 12.5 points > 10: unreliable, and says why.
    assert not est.reliable
    assert any("wider than ±10 points" in r for r in est.reasons)


def test_a_narrow_interval_is_reliable() -> None:
    traced = [120, 121, 119, 122, 118, 120, 121, 150, 90]
    est = estimate_overhead(_rounds([100] * 10, traced))
    assert est is not None
    # sorted 90 118 119 120 120 121 121 122 150: median 120, [118, 122]: the two outliers drop out.
    assert (est.pct, est.ci_low_pct, est.ci_high_pct) == pytest.approx((20.0, 18.0, 22.0))
    assert est.reliable and est.reasons == ()


def test_an_implausible_estimate_is_unreliable() -> None:
    est = estimate_overhead(_rounds([100] * 10, [70, 71, 72, 73, 74, 75, 76, 77, 78]))
    assert est is not None
    assert est.pct == pytest.approx(-26.0)
    assert not est.reliable
    assert any("implausible" in r for r in est.reasons)


def test_too_few_rounds_give_no_interval() -> None:
    est = estimate_overhead(_rounds([100] * 4, [110, 120, 130]), planned=9)
    assert est is not None
    assert est.pct == pytest.approx(20.0)
    assert est.ci_low_pct is None and est.ci_high_pct is None and est.coverage is None
    assert not est.reliable
    assert any("needs at least 6" in r for r in est.reasons)
    assert any("only 3 of 9" in r for r in est.reasons)


def test_no_traced_round_no_estimate() -> None:
    assert estimate_overhead([Round("untraced", (100,))]) is None


def test_to_dict_is_json_ready() -> None:
    est = estimate_overhead(_rounds([100] * 7, [110] * 6))
    assert est is not None
    doc = est.to_dict()
    assert doc["estimate_pct"] == pytest.approx(10.0)
    assert doc["ci_low_pct"] == pytest.approx(10.0) and doc["ci_high_pct"] == pytest.approx(10.0)
    assert doc["reliable"] is True and doc["unreliable_reasons"] == []
    assert doc["confidence"] == 0.95 and doc["coverage"] == pytest.approx(1 - 2 / 64, abs=1e-4)
    assert len(doc["ratios"]) == 6


def test_the_cpu_clock_compares_cpu_times() -> None:
    rounds = []
    for i in range(7):
        rounds.append(Round("untraced", (1000 + i,), (100,)))
        if i < 6:
            rounds.append(Round("traced", (900,), (125,)))
    wall = estimate_overhead(rounds)
    cpu = estimate_overhead(rounds, clock="cpu")
    assert wall is not None and cpu is not None
    assert wall.clock == "wall" and cpu.clock == "cpu"
    assert cpu.pct == pytest.approx(25.0) and cpu.ci_low_pct == pytest.approx(25.0)
    assert wall.pct < -10  # the wall times say something else entirely
    assert cpu.to_dict()["clock"] == "cpu"
    with pytest.raises(ValueError, match="cpu times"):
        round_ratios([Round("untraced", (1,)), Round("traced", (1,))], "cpu")
