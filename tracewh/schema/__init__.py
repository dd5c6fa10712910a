"""The warehouse schema, declared once.

- :mod:`tracewh.schema.arrow`: one Arrow schema per table (``TABLES``), the source of truth;
- :mod:`tracewh.schema.plain`: the same as plain data (DuckDB types, Delta ``schemaString``),
  cached, for the writers that must not import pyarrow.

``from tracewh.schema import TABLES`` (the names of :mod:`tracewh.schema.arrow`) keeps working;
they are loaded on first use, so importing :mod:`tracewh.schema.plain` does not import pyarrow.
"""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    arrow = importlib.import_module("tracewh.schema.arrow")

    try:
        return getattr(arrow, name)
    except AttributeError:
        raise AttributeError(f"module 'tracewh.schema' has no attribute {name!r}") from None
