"""tracewh: a columnar trace warehouse for GPU profiler (Kineto) traces."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
