"""Multi-run charts: the history trend says when its axis is not zero-based."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

pytest.importorskip("altair")

from tracewh.report import multi_charts


def _subtitle(values_ns: list[int]) -> str:
    start = dt.datetime(2025, 1, 1)
    frame = pl.DataFrame({"time": [start + dt.timedelta(days=i) for i in range(len(values_ns))],
                          "value_ns": values_ns})
    chart = multi_charts.trend(frame, x="time", y="value_ns")
    assert chart is not None
    spec = chart.to_dict()
    assert spec["layer"][0]["encoding"]["y"]["scale"] == {"zero": False}
    subtitle = spec["title"].get("subtitle") or ""
    return subtitle if isinstance(subtitle, str) else " ".join(subtitle)


def test_a_zoomed_axis_is_labelled() -> None:
    assert "y axis not zero-based" in _subtitle([100_000_000, 101_000_000, 99_500_000])


def test_an_axis_that_reaches_zero_carries_no_label() -> None:
    assert "zero-based" not in _subtitle([0, 5_000_000, 7_000_000])


def test_the_rank_heatmap_is_the_same_whatever_the_row_order() -> None:
    # kernels tied on GPU time (identical ranks of a replicated job): the 12 kept, their
    # order and the chart's rows do not depend on the order the rows came in
    rows = [{"name": f"k{i:02d}", "rank": r, "total_ns": 1000 if i % 3 else 2000}
            for i in range(20) for r in range(2)]
    frame = pl.DataFrame(rows)
    specs = set()
    for seed in range(5):
        chart = multi_charts.rank_heatmap(frame.sample(fraction=1.0, shuffle=True, seed=seed))
        assert chart is not None
        specs.add(str(chart.to_dict()))
    assert len(specs) == 1
    kept = {row["kernel"] for row in chart.to_dict()["data"]["values"]}
    # the 7 of 2,000 ns, then the first 5 names of 1,000 ns
    assert kept == {f"k{i:02d}" for i in (0, 3, 6, 9, 12, 15, 18, 1, 2, 4, 5, 7)}


def _history(nights: int, ranks: int = 2) -> pl.DataFrame:
    start = dt.datetime(2025, 1, 1)
    return pl.DataFrame({
        "time": [start + dt.timedelta(days=i) for i in range(nights) for _ in range(ranks)],
        "value_ns": [100_000_000 + 1000 * i for i in range(nights) for _ in range(ranks)],
        "rank": [r for _ in range(nights) for r in range(ranks)],
        "regression": [i == nights - 1 for i in range(nights) for _ in range(ranks)],
    })


@pytest.mark.parametrize(("nights", "pointed"), [(150, True), (151, False)])
def test_a_long_history_is_drawn_as_lines_its_regressions_still_ringed(nights: int, pointed: bool) -> None:
    # 150 runs a line (2 ranks: 300 rows) keep a point per run; one more night and only the
    # lines are drawn (a static image: the points would overlap into a band)
    chart = multi_charts.trend(_history(nights), x="time", y="value_ns", series="rank",
                               flag="regression", max_points=150)
    assert chart is not None
    layers = chart.to_dict()["layer"]
    assert layers[0]["mark"] == {"type": "line", "point": pointed}
    # the rings: a layer of the flagged rows alone (the last night, both ranks)
    rings = [lay for lay in layers if lay["mark"]["type"] == "point"]
    assert len(rings) == 1 and rings[0]["encoding"]["color"] == {"value": "#d62728"}
    assert [r["regression"] for r in rings[0]["data"]["values"]] == [True, True]


def test_without_a_limit_every_run_is_a_point() -> None:
    chart = multi_charts.trend(_history(400), x="time", y="value_ns", series="rank", flag="regression")
    assert chart is not None
    assert chart.to_dict()["layer"][0]["mark"] == {"type": "line", "point": True}


def test_the_reports_history_sections_pass_the_limit_the_sites_keep_every_point() -> None:
    from tracewh.report.build import STATIC_TREND_POINTS
    from tracewh.report.sections import history_sections
    from tracewh.report.trends import Trend

    frame = _history(STATIC_TREND_POINTS + 1).with_columns(pl.lit("r").alias("run_id"))
    trends = [Trend("Step time per run", frame)]
    (report,) = history_sections(trends, max_points=STATIC_TREND_POINTS)
    (site,) = history_sections(trends)
    assert report.chart is not None and site.chart is not None
    assert report.chart.to_dict()["layer"][0]["mark"]["point"] is False
    assert site.chart.to_dict()["layer"][0]["mark"]["point"] is True
