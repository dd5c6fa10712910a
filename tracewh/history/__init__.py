"""Many runs: diffs, series, change points, alerts, the regression check, workload identity.

- :mod:`tracewh.history.series`: diffs of two runs and per-run history series;
- :mod:`tracewh.history.workload`: which runs are comparable (workload fingerprints);
- :mod:`tracewh.history.health`: runs unusable as baselines;
- :mod:`tracewh.history.stats`, :mod:`tracewh.history.changepoint`: the statistics and the
  change-point detector;
- :mod:`tracewh.history.changes`, :mod:`tracewh.history.alerts`: change points of every series;
- :mod:`tracewh.history.check`: the regression check of the latest run.

The names of :mod:`tracewh.history.series` (the module ``tracewh.history`` was before issue 29)
are importable from here: ``from tracewh.history import diff, parse_since``.
"""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    series = importlib.import_module("tracewh.history.series")

    if name in series.__all__:
        return getattr(series, name)
    raise AttributeError(f"module 'tracewh.history' has no attribute {name!r}")
