"""Vega-Lite specs as plain dicts, written the way the report's chart builders read.

The builders (:mod:`tracewh.report.charts` and its neighbours) use the small part of
Altair's API they need: ``Chart(data).mark_bar(...).encode(x="total_ms:Q", ...)``, channel
objects (``X``, ``Y``, ``Color``, ``Tooltip``, ...), ``Axis``, ``Scale``, ``Legend``,
``TitleParams``, layers (``a + b``, :func:`layer`) and :func:`vconcat`. This module gives
that part, producing the same Vega-Lite JSON (``to_dict()``). It imports nothing: Altair took
~0.22 s to import and copied every inline row when a chart became a spec, for charts this
package writes itself (the tests validate every kind against the Vega-Lite schema).

Conventions kept from Altair: a shorthand ``"field:T"`` (``Q``, ``N``, ``O``, ``T``), with an
aggregate ``"sum(field):Q"``, becomes ``{"field", "type"[, "aggregate"]}``; the secondary
channels ``x2``/``y2`` carry no type; ``None`` is written as JSON ``null`` (``axis=None``: no
axis) while an argument not given is left out; a layer whose charts all hold the same data
object holds it once, at the top.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "SCHEMA",
    "X2",
    "Y2",
    "Axis",
    "Chart",
    "Color",
    "Data",
    "EncodingSortField",
    "Header",
    "Legend",
    "Opacity",
    "Order",
    "OverlayMarkDef",
    "Row",
    "Scale",
    "Size",
    "Text",
    "TitleParams",
    "Tooltip",
    "X",
    "Y",
    "condition",
    "datum",
    "layer",
    "value",
    "vconcat",
]

#: The Vega-Lite schema the specs follow (vl-convert renders them with its own Vega-Lite 6).
SCHEMA = "https://vega.github.io/schema/vega-lite/v6.4.1.json"
#: The config every top-level spec starts from (Altair's default).
_VIEW = {"continuousWidth": 300, "continuousHeight": 300}

_TYPES = {"Q": "quantitative", "N": "nominal", "O": "ordinal", "T": "temporal", "G": "geojson"}
_SHORTHAND = re.compile(r"^(?:(?P<aggregate>[a-z]+)\((?P<inner>[^()]*)\)|(?P<field>.*?))(?::(?P<type>[QNOTG]))?$")
#: The aggregates a shorthand may name (``sum(field):Q``); anything else (a time unit, ``count()``)
#: is refused rather than written differently from Altair.
_AGGREGATES = frozenset({"sum", "mean", "average", "median", "min", "max", "stdev", "variance",
                         "distinct", "valid", "missing", "q1", "q3"})


def _plain(obj: Any) -> Any:
    """``obj`` as JSON values: spec objects written out, lists and dicts walked (rows are not:
    :class:`Data` keeps its rows as they are)."""
    if isinstance(obj, _Spec):
        return obj.to_dict()
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


class _Spec:
    """A spec object: its properties, written out by :meth:`to_dict`."""

    def __init__(self, **props: Any) -> None:
        self.props = props

    def to_dict(self) -> dict[str, Any]:
        return {k: _plain(v) for k, v in self.props.items()}


class Axis(_Spec):
    """An axis's properties (``labelExpr``, ``labelAngle``, ``orient``, ...)."""


class Legend(_Spec):
    """A legend's properties."""


class Scale(_Spec):
    """A scale's properties (``type``, ``domain``, ``range``, ``scheme``, ``zero``, ...)."""


class Header(_Spec):
    """A facet header's properties."""


class EncodingSortField(_Spec):
    """Sort by another field (``field``, ``order``)."""


class OverlayMarkDef(_Spec):
    """The point mark over a line (``size``, ...)."""


class TitleParams(_Spec):
    """A chart title: its text and properties (``subtitle``, ``anchor``, ``fontSize``, ...)."""

    def __init__(self, text: str, **props: Any) -> None:
        super().__init__(text=text, **props)


class Data(_Spec):
    """Inline data: ``values`` (a list of rows, JSON values already), kept as it is."""

    def __init__(self, values: list[Any]) -> None:
        super().__init__(values=values)

    def to_dict(self) -> dict[str, Any]:
        return {"values": self.props["values"]}


class _Channel(_Spec):
    """An encoding channel: a shorthand (``"field:Q"``, ``"sum(field):Q"``) and properties."""

    typed = True

    def __init__(self, shorthand: str | None = None, **props: Any) -> None:
        parsed: dict[str, Any] = {}
        if shorthand is not None:
            found = _SHORTHAND.match(shorthand)
            if found is None:  # pragma: no cover - every shorthand matches the pattern
                raise ValueError(f"not a shorthand: {shorthand!r}")
            if found.group("aggregate"):
                if found.group("aggregate") not in _AGGREGATES or not found.group("inner"):
                    raise ValueError(f"shorthand {shorthand!r}: only field aggregates are written here "
                                     f"({', '.join(sorted(_AGGREGATES))})")
                parsed["aggregate"] = found.group("aggregate")
                parsed["field"] = found.group("inner")
            else:
                parsed["field"] = found.group("field")
            if found.group("type") is None and self.typed:
                raise ValueError(f"shorthand {shorthand!r} has no type (:Q, :N, :O, :T)")
            if found.group("type") and self.typed:
                parsed["type"] = _TYPES[found.group("type")]
        super().__init__(**parsed, **props)


class X(_Channel):
    """The x channel."""


class Y(_Channel):
    """The y channel."""


class X2(_Channel):
    """The x2 channel (no type: it shares x's)."""

    typed = False


class Y2(_Channel):
    """The y2 channel (no type: it shares y's)."""

    typed = False


class Color(_Channel):
    """The color channel."""


class Size(_Channel):
    """The size channel."""


class Opacity(_Channel):
    """The opacity channel."""


class Text(_Channel):
    """The text channel."""


class Tooltip(_Channel):
    """One tooltip field."""


class Order(_Channel):
    """The order channel (stacking order)."""


class Row(_Channel):
    """The row facet channel."""


class _Detail(_Channel):
    """The detail channel."""


_CHANNELS: dict[str, type[_Channel]] = {
    "x": X, "y": Y, "x2": X2, "y2": Y2, "color": Color, "size": Size, "opacity": Opacity,
    "text": Text, "tooltip": Tooltip, "order": Order, "row": Row, "detail": _Detail,
}


def value(v: Any) -> dict[str, Any]:
    """A constant channel value (``{"value": v}``)."""
    return {"value": v}


def datum(v: Any) -> dict[str, Any]:
    """A constant in the data's domain (``{"datum": v}``)."""
    return {"datum": v}


def condition(test: str, if_true: dict[str, Any], if_false: dict[str, Any]) -> dict[str, Any]:
    """``if_true`` where the Vega expression ``test`` holds, else ``if_false``."""
    return {"condition": {"test": test, **if_true}, **if_false}


def _channel(name: str, obj: Any) -> Any:
    """The channel ``name``'s value: a shorthand (or a list of them) made a channel."""
    if isinstance(obj, str):
        return _CHANNELS[name](obj)
    if isinstance(obj, list | tuple):
        return [_channel(name, o) for o in obj]
    return obj


class _Top:
    """What every chart has: top-level properties, a title, a resolve, a view config."""

    def __init__(self) -> None:
        self.props: dict[str, Any] = {}
        self.view: dict[str, Any] = {}

    def _copy(self) -> Any:
        new = object.__new__(type(self))
        new.__dict__ = {k: (dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v)
                        for k, v in self.__dict__.items()}
        return new

    def properties(self, **props: Any) -> Any:
        new = self._copy()
        new.props.update(props)
        return new

    def resolve_scale(self, **scales: str) -> Any:
        new = self._copy()
        resolve = dict(new.props.get("resolve", {}))
        resolve["scale"] = {**resolve.get("scale", {}), **scales}
        new.props["resolve"] = resolve
        return new

    def configure_view(self, **view: Any) -> Any:
        new = self._copy()
        new.view.update(view)
        return new

    def __add__(self, other: Any) -> LayerChart:
        # as Altair: a layer plus a chart is that layer with one more chart on top
        if isinstance(self, LayerChart):
            new: LayerChart = self._copy()
            new.charts = [*self.charts, other]
            return new
        return layer(self, other)

    def _body(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_dict(self, *, top: bool = True) -> dict[str, Any]:
        """The Vega-Lite spec; ``top``: with ``$schema`` and the config (a whole chart)."""
        if self.view and not top:
            raise TypeError("configure_view() applies to a whole chart, not to one inside a layer "
                            "or a concatenation")
        body = self._body()
        body.update({k: _plain(v) for k, v in self.props.items()})
        if top:
            body["config"] = {"view": {**_VIEW, **self.view}}
            body["$schema"] = SCHEMA
        return body


class Chart(_Top):
    """A unit chart: data, a mark, an encoding and transforms."""

    def __init__(self, data: Data | None = None) -> None:
        super().__init__()
        self.data = data
        self.mark: dict[str, Any] = {}
        self.encoding: dict[str, Any] = {}
        self.transform: list[dict[str, Any]] = []

    def _mark(self, kind: str, **props: Any) -> Chart:
        new: Chart = self._copy()
        new.mark = {"type": kind, **props}
        return new

    def mark_bar(self, **props: Any) -> Chart:
        return self._mark("bar", **props)

    def mark_line(self, **props: Any) -> Chart:
        return self._mark("line", **props)

    def mark_point(self, **props: Any) -> Chart:
        return self._mark("point", **props)

    def mark_circle(self, **props: Any) -> Chart:
        return self._mark("circle", **props)

    def mark_rect(self, **props: Any) -> Chart:
        return self._mark("rect", **props)

    def mark_rule(self, **props: Any) -> Chart:
        return self._mark("rule", **props)

    def mark_text(self, **props: Any) -> Chart:
        return self._mark("text", **props)

    def encode(self, **channels: Any) -> Chart:
        new: Chart = self._copy()
        new.encoding.update({name: _channel(name, obj) for name, obj in channels.items()})
        return new

    def transform_filter(self, expr: str) -> Chart:
        new: Chart = self._copy()
        new.transform.append({"filter": expr})
        return new

    def _body(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.data is not None:
            body["data"] = self.data.to_dict()
        body["mark"] = _plain(self.mark)
        if self.encoding:
            body["encoding"] = {k: _plain(v) for k, v in self.encoding.items()}
        if self.transform:
            body["transform"] = [dict(t) for t in self.transform]
        return body


class LayerChart(_Top):
    """Charts drawn over each other; the data all of them hold is held once, at the top."""

    def __init__(self, charts: list[Chart | LayerChart]) -> None:
        super().__init__()
        self.charts: list[Chart | LayerChart] = list(charts)

    def _body(self) -> dict[str, Any]:
        subs = [c.to_dict(top=False) for c in self.charts]
        datas = [getattr(c, "data", None) for c in self.charts]
        body: dict[str, Any] = {}
        if datas and datas[0] is not None and all(d is datas[0] for d in datas):
            body["data"] = subs[0]["data"]
            for s in subs:
                del s["data"]
        body["layer"] = subs
        return body


class VConcatChart(_Top):
    """Charts one above the other."""

    def __init__(self, charts: list[_Top]) -> None:
        super().__init__()
        self.charts = charts

    def _body(self) -> dict[str, Any]:
        return {"vconcat": [c.to_dict(top=False) for c in self.charts]}


def layer(*charts: Any) -> LayerChart:
    """``charts`` drawn over each other (the first at the back)."""
    return LayerChart(list(charts))


def vconcat(*charts: Any) -> VConcatChart:
    """``charts`` one above the other."""
    return VConcatChart(list(charts))
