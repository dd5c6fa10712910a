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
