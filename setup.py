"""Build the optional C extension ``tracewh.ingest._fastshred`` (metadata: pyproject.toml).

Without a C compiler the build goes on without it, and ingest uses its pure-Python
path (same rows, slower): see ``tracewh/ingest/_fastshred.c``.
"""

from __future__ import annotations

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """``build_ext`` that warns instead of failing when the extension cannot be compiled."""

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # no compiler, no headers: the pure-Python path is used
            print(f"warning: {ext.name} not built ({exc}); ingest will use pure Python",
                  file=sys.stderr)


setup(
    ext_modules=[
        Extension(
            "tracewh.ingest._fastshred",
            ["tracewh/ingest/_fastshred.c"],
            depends=["tracewh/ingest/_fastscan.c", "tracewh/ingest/_fastscan.h",
                     "tracewh/ingest/_fastarrow.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                "-Wno-missing-field-initializers", "-Wno-cast-function-type"],
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
