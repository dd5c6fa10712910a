"""tracewh.report.charts.Chart: shorthands built straight into channel objects, same Vega-Lite.

Every kind of encoding the report's charts use, built once with ``alt.Chart`` (Altair's own
shorthand parsing) and once with ``Chart``: the specs must be equal.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import pytest

from tracewh.report.charts import Chart

DATA = alt.Data(values=[{"a": 1.5, "b": "x", "t": "2025-01-01T00:00:00", "n": 3}])

CASES: list[dict[str, Any]] = [
    {"x": "a:Q", "y": "b:N"},
    {"x": alt.X("a:Q", title="ms"), "y": "b:N", "color": "b:N"},
    {"x": "a:Q", "x2": "n:Q", "y": alt.value(0), "text": "b:N"},
    {"x": "t:T", "y": "sum(a):Q", "tooltip": ["b:N", alt.Tooltip("a:Q", format=",.3f")]},
    {"y": alt.datum(0), "x": "a:Q", "opacity": alt.Opacity("n:Q", legend=None, scale=None)},
    {"color": alt.condition("datum.a > 0", alt.value("#e45756"), alt.value("#54a24b")), "x": "a:Q"},
    {"xOffset": "b:N", "strokeDash": "b:N", "theta": "a:Q", "detail": "b:N", "order": "n:O"},
    {"tooltip": "b:N", "size": "n:Q", "shape": "b:N", "row": "b:N"},
]


@pytest.mark.parametrize("channels", CASES)
def test_chart_encode_equals_altairs(channels: dict[str, Any]) -> None:
    def build(cls: type) -> dict[str, Any]:
        chart = cls(DATA).mark_point().encode(**channels).properties(width=100)
        layered = alt.layer(chart, cls(DATA).mark_line().encode(**channels))
        return {"one": chart.to_dict(validate=False), "layer": layered.to_dict(validate=False)}

    ours, theirs = build(Chart), build(alt.Chart)
    assert ours == theirs
    assert isinstance(Chart(DATA).mark_point().encode(**channels), alt.Chart)


def test_chart_specs_still_validate() -> None:
    Chart(DATA).mark_bar().encode(x="a:Q", y="b:N", tooltip=["b:N", "a:Q"]).to_dict(validate=True)


def test_builders_in_threads_leave_altairs_debug_mode_as_it_was() -> None:
    import threading

    import polars as pl
    from altair.utils import schemapi

    from tracewh.report import charts, validation

    steps = pl.DataFrame({"step": [1, 2, 3], "wall_ns": [5_000_000, 6_000_000, 5_500_000]})
    barrier = threading.Barrier(4)

    def build() -> None:
        barrier.wait()
        for _ in range(5):
            charts.sparkline(steps)

    assert schemapi.DEBUG_MODE
    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert schemapi.DEBUG_MODE
    with validation.no_validation():
        assert not schemapi.DEBUG_MODE
    assert schemapi.DEBUG_MODE


def test_labels_are_trimmed_in_their_text_never_by_measuring_them() -> None:
    # vl-convert measures a text by converting it to paths: a labelLimit measures every
    # label once more (25-30% of a report's rendering); long names are cut in the middle
    # by the label expression instead, and the image shows the same cut
    import html
    import json

    import polars as pl

    from tracewh.report import charts, render

    long = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
            "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>)")
    kernels = pl.DataFrame({"name": [long, "gemm"], "calls": [1, 2], "total_ns": [5_000, 3_000],
                            "mean_ns": [5_000, 1_500], "pct": [62.5, 37.5]})
    chart = charts.top_kernels(kernels)
    assert chart is not None
    vl = render.spec(chart)
    assert vl["config"]["axis"]["labelLimit"] == 0 and vl["config"]["legend"]["labelLimit"] == 0
    assert json.dumps(vl).count('"labelLimit"') == 2  # nowhere else
    assert render.spec(chart, validate=True) == vl
    svg = render.image(vl, key="top_kernels").decode()
    trimmed = long[:24] + "…" + long[-19:]
    assert f">{html.escape(trimmed, quote=False)}</text>" in svg
    assert f">{html.escape(long, quote=False)}</text>" not in svg  # (whole in its aria text)


def test_a_charts_rows_go_into_its_spec_as_they_are_and_stay_in_the_chart() -> None:
    # render.spec keeps inline rows out of Altair's to_dict (which copies them value by
    # value): the spec equals Altair's own, and the chart keeps its rows for the next call
    import datetime as dt

    import polars as pl

    from tracewh.report import multi_charts, render, validation

    start = dt.datetime(2025, 1, 1)
    frame = pl.DataFrame({"time": [start + dt.timedelta(days=i // 2) for i in range(400)],
                          "value_ns": list(range(400)), "rank": [i % 2 for i in range(400)],
                          "regression": [i > 390 for i in range(400)]})
    chart = multi_charts.trend(frame, x="time", y="value_ns", series="rank", flag="regression")
    assert chart is not None
    with validation.no_validation():
        altairs = chart.to_dict(validate=False)
    ours = render.spec(chart)
    assert ours == {**altairs, "config": {**altairs["config"], **render.LABELS_UNMEASURED}}
    assert len((ours.get("data") or ours["layer"][0]["data"])["values"]) == 400
    assert render.spec(chart) == ours  # the rows were put back in the chart
    assert render.spec(chart, validate=True) == ours
