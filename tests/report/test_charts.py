"""tracewh.report.vlspec: the report's charts as Vega-Lite dicts, the same JSON Altair writes.

Every kind of construction the report's chart builders use, built once with Altair and once
with ``vlspec`` (which imports nothing): the specs must be equal, and valid Vega-Lite.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest

from tracewh.report import render, vlspec

alt = pytest.importorskip("altair")

ROWS = [{"a": 1.5, "b": "x", "t": "2025-01-01T00:00:00", "n": 3}]

#: channels of a chart, made with a module (Altair or vlspec)
CASES: list[Callable[[ModuleType], dict[str, Any]]] = [
    lambda m: {"x": "a:Q", "y": "b:N"},
    lambda m: {"x": m.X("a:Q", title="ms"), "y": m.Y("b:N", sort="-x", title=None,
                                                     axis=m.Axis(labelExpr="datum.label")),
               "color": "b:N"},
    lambda m: {"x": "a:Q", "x2": "n:Q", "y": m.value(0), "text": "b:N"},
    lambda m: {"x": "t:T", "y": "sum(a):Q", "tooltip": ["b:N", m.Tooltip("a:Q", format=",.3f")]},
    lambda m: {"y": m.datum(0), "x": "a:Q", "opacity": m.Opacity("n:Q", legend=None, scale=None)},
    lambda m: {"color": m.condition("datum.a > 0", m.value("#e45756"), m.value("#54a24b")),
               "x": "a:Q"},
    lambda m: {"detail": "b:N", "order": m.Order("n:O"), "size": m.Size("n:Q", scale=m.Scale(range=[20, 600]))},
    lambda m: {"tooltip": "b:N", "row": m.Row("b:N", title=None, header=m.Header(labelOrient="top")),
               "y2": m.datum(0), "y": "n:Q"},
    lambda m: {"color": m.Color("b:N", legend=m.Legend(labelExpr="datum.label"),
                                scale=m.Scale(scheme="tableau10")),
               "y": m.Y("n:Q", scale=m.Scale(zero=False, type="log", domain=[1, 10]), axis=None)},
]


def _both(build: Callable[[ModuleType], Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    return build(vlspec).to_dict(), build(alt).to_dict(validate=True)


@pytest.mark.parametrize("channels", CASES)
def test_a_unit_chart_and_a_layer_are_what_altair_writes(channels: Callable[[ModuleType], dict[str, Any]]) -> None:
    def unit(m: ModuleType) -> Any:
        return (m.Chart(m.Data(values=ROWS)).mark_point(size=12, filled=True).encode(**channels(m))
                .properties(width=100, title=m.TitleParams("t", subtitle="s", anchor="start")))

    def layered(m: ModuleType) -> Any:
        data = m.Data(values=ROWS)  # one data object for both: held once, at the top
        base = m.Chart(data).encode(**channels(m))
        return m.layer(base.mark_line(point=m.OverlayMarkDef(size=12)),
                       base.transform_filter("datum.a > 1").mark_text(dx=3)).properties(height=50)

    # a layer of charts with a row channel is a facet in Altair: the builders never make one
    faceted = "row" in channels(vlspec)
    for build in (unit,) if faceted else (unit, layered):
        ours, theirs = _both(build)
        assert ours == theirs


def test_layers_of_other_data_vconcat_resolve_and_view_are_what_altair_writes() -> None:
    def build(m: ModuleType) -> Any:
        a = m.Chart(m.Data(values=ROWS)).mark_bar().encode(x="a:Q", y="b:N")
        b = m.Chart(m.Data(values=ROWS)).mark_rule(strokeDash=[4, 3]).encode(x="a:Q")
        panel = (a + b).properties(width=200, height=100)
        return (m.vconcat(panel, panel).resolve_scale(color="shared", x="shared")
                .properties(title=m.TitleParams("v", fontSize=14)))

    ours, theirs = _both(build)
    assert ours == theirs

    def spark(m: ModuleType) -> Any:
        return (m.Chart(m.Data(values=ROWS)).mark_line().encode(x=m.X("n:O", axis=None), y="a:Q")
                .properties(width=140, height=28).configure_view(strokeWidth=0)
                .resolve_scale(y="independent"))

    ours, theirs = _both(spark)
    assert ours == theirs


def test_rows_go_into_the_spec_as_they_are() -> None:
    rows = [{"a": i} for i in range(1000)]
    spec = vlspec.Chart(vlspec.Data(values=rows)).mark_bar().encode(x="a:Q").to_dict()
    assert spec["data"]["values"] is rows  # not copied value by value


def test_building_a_report_imports_no_altair() -> None:
    import subprocess
    import sys

    code = ("import sys, tracewh.report.build, tracewh.report.sections, tracewh.report.site, "
            "tracewh.report.roof; print('altair' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_labels_are_trimmed_in_their_text_never_by_measuring_them() -> None:
    # vl-convert measures a text by converting it to paths: a labelLimit measures every
    # label once more (25-30% of a report's rendering); long names are cut in the middle
    # by the label expression instead, and the image shows the same cut
    import html
    import json

    import polars as pl

    from tracewh.report import charts

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


def test_layers_nest_and_flatten_as_in_altair() -> None:
    def plus(m: ModuleType) -> Any:
        a, b, c = (m.Chart(m.Data(values=ROWS)).mark_point().encode(x=f"{f}:Q") for f in "ann")
        return (a + b).properties(width=5) + c  # a layer plus a chart: one more layer on top

    def nested(m: ModuleType) -> Any:
        a, b, c = (m.Chart(m.Data(values=ROWS)).mark_point().encode(x=f"{f}:Q") for f in "ann")
        return m.layer(a + b, c)

    for build in (plus, nested):
        ours, theirs = _both(build)
        assert ours == theirs


@pytest.mark.parametrize("shorthand", ["count()", "yearmonth(t):T", "a", "sum():Q"])
def test_a_shorthand_written_differently_from_altair_is_refused(shorthand: str) -> None:
    with pytest.raises(ValueError, match="shorthand"):
        vlspec.Chart(vlspec.Data(values=ROWS)).mark_bar().encode(x=shorthand)


def test_a_view_config_inside_a_layer_is_refused() -> None:
    a = vlspec.Chart(vlspec.Data(values=ROWS)).mark_bar().encode(x="a:Q").configure_view(strokeWidth=0)
    with pytest.raises(TypeError, match="configure_view"):
        vlspec.layer(a, a).to_dict()
