"""Run Apache Otava's change-point detection on series read from stdin (bench-only venv).

Input: JSON ``{"series": [[v0, v1, ...], ...], "options": {...}}``; output: JSON list of
change-point index lists (the index of the first value after each change), one per series,
plus the seconds spent. Runs under the interpreter of the bench-only venv that holds
``apache-otava`` (never the project's). Uses Otava's own defaults (window 50, max p-value
0.001, min magnitude 0) unless ``options`` says otherwise.
"""

from __future__ import annotations

import json
import sys
import time


def main() -> None:
    from otava.analysis import compute_change_points

    data = json.load(sys.stdin)
    opts = data.get("options", {})
    out = []
    t0 = time.perf_counter()
    for values in data["series"]:
        cps, _ = compute_change_points(
            list(values),
            window_len=opts.get("window_len", 50),
            max_pvalue=opts.get("max_pvalue", 0.001),
            min_magnitude=opts.get("min_magnitude", 0.0),
        )
        out.append([int(c.index) for c in cps])
    json.dump({"found": out, "seconds": time.perf_counter() - t0}, sys.stdout)


if __name__ == "__main__":
    main()
