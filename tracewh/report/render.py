"""Offline rendering of Vega-Lite charts (vl-convert: Vega in an embedded JS engine).

No network is needed: vl-convert bundles Vega, Vega-Lite and vega-embed, and
charts carry their data inline. The same package provides the JavaScript
bundle the static site ships beside its pages.
"""

from __future__ import annotations

import contextlib
import json
from importlib import metadata
from pathlib import Path
from typing import Any

import vl_convert as vlc

from tracewh.core.cache import cache_folder, own_file, write_private
from tracewh.core.errors import TracewhError
from tracewh.core.textsafe import escape_nested


class ChartRenderError(TracewhError):
    """A chart could not be rendered (its Vega-Lite spec is invalid for vl-convert)."""

    def __init__(self, key: str, reason: str) -> None:
        self.key = key
        self.reason = reason
        super().__init__(f"chart {key!r} could not be rendered: {reason}")


#: The config every chart's spec carries: no axis or legend label is truncated by measuring it.
#: vl-convert measures a text by converting it to paths (usvg, the font file opened and mapped
#: again for each character), and ``labelLimit`` (Vega's default: 180 px on axes, 160 px on
#: legends) measures every label once more to see whether it must be cut: 25-30% of the
#: renderer's time for a report's charts. Long labels are trimmed in their text instead
#: (:func:`tracewh.report.charts.middle_trim`): the images are the same for the same labels.
LABELS_UNMEASURED: dict[str, dict[str, int]] = {"axis": {"labelLimit": 0}, "legend": {"labelLimit": 0}}


def spec(chart: Any, *, validate: bool = False) -> dict[str, Any]:
    """The Vega-Lite JSON of a chart (:mod:`tracewh.report.vlspec`), with
    :data:`LABELS_UNMEASURED` in its config.

    ``validate``: check it against the Vega-Lite JSON schema first (the tests do, for every
    kind of chart; it needs Altair's copy of the schema, a development dependency).
    """
    result: dict[str, Any] = chart.to_dict()
    config = result.setdefault("config", {})
    for part, settings in LABELS_UNMEASURED.items():
        config[part] = {**settings, **config.get(part, {})}
    if validate:
        from altair.utils.schemapi import validate_jsonschema
        from altair.vegalite.v6.schema import load_schema

        validate_jsonschema(result, load_schema())
    return result


def png(vl_spec: dict[str, Any], *, key: str, scale: float = 2.0) -> bytes:
    """A PNG image of a Vega-Lite spec (``scale`` × CSS pixels).

    Every string of the spec has its control characters made visible first: vl-convert
    builds an SVG, and a character XML does not allow (``\x1b``) makes it panic and
    abort the process (``NonXmlChar``), which no ``except`` can catch.
    """
    try:
        data: bytes = vlc.vegalite_to_png(escape_nested(vl_spec), scale=scale)
    except Exception as exc:  # vl-convert raises plain ValueError/RuntimeError
        raise ChartRenderError(key, str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
    return data


#: The image formats of a report's charts (``tracewh report --chart-format``): SVG (the
#: default: vector, about half the CPU and half the bytes of a 2x PNG) or PNG (2x pixels).
CHART_FORMATS = ("svg", "png")


def image(vl_spec: dict[str, Any], *, key: str, fmt: str = "svg") -> bytes:
    """The chart as an image file's bytes in ``fmt`` (:data:`CHART_FORMATS`)."""
    if fmt == "svg":
        return svg(vl_spec, key=key).encode("utf-8")
    if fmt == "png":
        return png(vl_spec, key=key)
    raise ValueError(f"chart format must be one of {', '.join(CHART_FORMATS)}, not {fmt!r}")


def warm_up(fmt: str = "svg") -> None:
    """Start vl-convert's engine (and load its fonts) with a one-mark chart; errors ignored.

    The first render of a process pays for both (~0.4 s of CPU); later ones do not.
    """
    with contextlib.suppress(Exception):
        image({"data": {"values": [{"t": "x"}]}, "mark": "text",
               "encoding": {"text": {"field": "t"}}}, key="warm-up", fmt=fmt)


def svg(vl_spec: dict[str, Any], *, key: str) -> str:
    """An SVG document of a Vega-Lite spec."""
    try:
        text: str = vlc.vegalite_to_svg(escape_nested(vl_spec))
    except Exception as exc:
        raise ChartRenderError(key, str(exc).splitlines()[0] if str(exc) else type(exc).__name__) from exc
    return text


def javascript_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one script that sets ``window.vegaEmbed``.

    vl-convert builds the bundle in ~8 s of CPU (most of a small site's time), always the
    same for one vl-convert version: it is kept in the user's private cache
    (:mod:`tracewh.core.cache`: a folder and file no one else can write, since the script runs
    in the browser of whoever opens the site) as ``vl-bundle-<version>.js``.
    """
    path = _bundle_cache()
    if path is not None and own_file(path):
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            pass
    bundle: str = vlc.javascript_bundle(None)  # type: ignore[arg-type]  # stub says str; None = default snippet
    if path is not None:
        with contextlib.suppress(OSError):
            write_private(path, bundle.encode("utf-8"))
    return bundle


def _bundle_cache() -> Path | None:
    """Where the bundle of the installed vl-convert is cached (None: no private cache)."""
    try:
        version = metadata.version("vl-convert-python")
    except metadata.PackageNotFoundError:
        return None
    folder = cache_folder()
    if folder is None or not version.replace(".", "").replace("post", "").isalnum():
        return None
    return folder / f"vl-bundle-{version}.js"


def spec_json(vl_spec: dict[str, Any]) -> str:
    """Spec JSON safe to place inside an HTML ``<script>`` element."""
    # <, > and & only occur inside JSON strings: as \u escapes no data can close the
    # element (</script>) or open a comment (<!--) in it
    text = json.dumps(vl_spec, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
