"""tracewh: a columnar trace warehouse for GPU profiler (Kineto) traces.

``tracewh.__version__`` is the installed distribution's version (declared once, in
``pyproject.toml``), read from its metadata when first asked for.

The layout (packages by role, dependencies pointing one way) is described in
``docs/architecture.md``. Import paths from before that layout keep working with a
DeprecationWarning (:mod:`tracewh._compat`).
"""

from __future__ import annotations

from tracewh import _compat

__all__ = ["__version__", "package_version"]


def package_version() -> str:
    """The version of the installed ``tracewh`` distribution (``0+unknown`` when not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tracewh")
    except PackageNotFoundError:  # imported from a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":
        return package_version()
    raise AttributeError(f"module 'tracewh' has no attribute {name!r}")


_compat.install()
