"""vl-convert alone on a report's charts: where the chart process's time goes.

``python -m bench.render_specs REPORT_DIR [--rounds N]``

Renders every ``REPORT_DIR/charts/*.vl.json`` (what ``tracewh report --out`` writes beside each
image) to SVG in one process after a warm-up chart, in interleaved rounds, three ways:

* ``as written``: the specs as the report rendered them;
* ``label limits``: Vega's default label limits put back (180 px on axes, 160 px on legends:
  each label measured once more to decide a cut, as every label was before the fifth pass);
* ``no text``: axes, legends, titles and text marks removed (compiled to Vega first): what is
  left once no text is measured.

Prints the median seconds of each over the rounds, and whether the first two draw the same
texts at the same image width (they must: labels are cut in their text, not by measuring).
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import statistics
import time
from pathlib import Path
from typing import Any

import vl_convert as vlc


def _limits_back(spec: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    config = out.get("config", {})
    for part in ("axis", "legend"):
        config.get(part, {}).pop("labelLimit", None)
    return out


def _no_text(vega: Any) -> Any:
    if isinstance(vega, dict):
        vega = {k: v for k, v in vega.items() if k not in ("axes", "legends", "title")}
        if "marks" in vega:
            vega["marks"] = [_no_text(m) for m in vega["marks"] if m.get("type") != "text"]
    return vega


def _texts(svg: str) -> tuple[list[str], str]:
    width = re.search(r'width="([\d.]+)"', svg)
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg), width.group(1) if width else ""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="render_specs")
    ap.add_argument("report_dir", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    specs = [json.loads(p.read_text()) for p in sorted((args.report_dir / "charts").glob("*.vl.json"))]
    vlc.vegalite_to_svg({"data": {"values": [{"t": "x"}]}, "mark": "text",
                         "encoding": {"text": {"field": "t"}}})  # the engine's start, not counted
    limits = [_limits_back(s) for s in specs]
    no_text = [_no_text(vlc.vegalite_to_vega(s)) for s in specs]
    runs: dict[str, list[float]] = {"as written": [], "label limits": [], "no text": []}
    for r in range(args.rounds):
        order = list(runs) if r % 2 == 0 else list(reversed(runs))
        for name in order:
            t0 = time.perf_counter()
            if name == "no text":
                for v in no_text:
                    vlc.vega_to_svg(v)
            else:
                for s in specs if name == "as written" else limits:
                    vlc.vegalite_to_svg(s)
            runs[name].append(time.perf_counter() - t0)
    for name, secs in runs.items():
        print(f"{name:13s} {statistics.median(secs):.3f} s for {len(specs)} charts "
              f"(median of {args.rounds})")
    same = sum(_texts(vlc.vegalite_to_svg(a)) == _texts(vlc.vegalite_to_svg(b))
               for a, b in zip(specs, limits, strict=True))
    print(f"same texts and width with and without the label limits: {same} of {len(specs)} charts")


if __name__ == "__main__":
    main()
