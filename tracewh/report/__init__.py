"""Reports, charts and exports: what people look at.

- :func:`build_report`: ``report.md`` + self-contained ``report.html`` + chart PNGs
- :func:`tracewh.report.site.build_site`: a static site with interactive Vega-Lite charts
- :func:`tracewh.report.export.export_trace`: back to Chrome/Perfetto trace JSON
- :func:`tracewh.report.flame.write_flame`: GPU time as flame-graph stacks

Charts are Vega-Lite specs (:mod:`tracewh.report.vlspec`) rendered offline by vl-convert (the ``report`` extra); nothing here
fetches from the network. Functions take any object with the ``Warehouse`` methods they use
(:class:`~tracewh.report.protocol.WarehouseLike`).

Importing this package imports no chart library: ``build_report`` and ``ReportResult``
(:mod:`tracewh.report.build`) load on first use, so the exports (Perfetto trace, flame graph)
work in a base install (``pip install tracewh``, no extra).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tracewh.report.build import ReportResult, build_report
    from tracewh.report.protocol import WarehouseLike

__all__ = ["REPORT_QUERY_THREADS", "ReportResult", "WarehouseLike", "build_report"]

#: The threads a report queries from at once: the caller's and two beside it (the history,
#: the roofline); its session's DuckDB threads are set for them (``Warehouse.session``).
REPORT_QUERY_THREADS = 3

#: The public names of the package, by the module that defines them (imported on first use).
_LAZY = {"ReportResult": "build", "build_report": "build", "WarehouseLike": "protocol"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tracewh.report' has no attribute {name!r}")
    return getattr(importlib.import_module(f"tracewh.report.{module}"), name)
