"""The package layout and the optional C extension (metadata: pyproject.toml).

* ``sql/`` (top level in the repository) ships as the package ``tracewh.sql``: in the wheel
  it is ``tracewh/sql/``, the sdist keeps it at the top, an editable install maps the
  package to the checkout's folder. Code finds it with ``importlib.resources``.
* ``tracewh.ingest._fastshred`` is built from C when a compiler is there. Without one the
  build says so in one line and goes on, and ingest uses its pure-Python path (same rows,
  slower): see ``tracewh/ingest/_fastshred.c``.
"""

from __future__ import annotations

import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

NOTICE = ("tracewh: the C staging extension {name} was not built ({reason}); "
          "ingest will use the pure-Python path (same rows, slower)")


class OptionalBuildExt(build_ext):
    """``build_ext`` that says so in one line instead of failing when the extension cannot be compiled."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler at all (distutils' CCompilerError / PlatformError)
            for ext in self.extensions:
                self._notice(ext, exc)

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:  # no compiler, no headers: the pure-Python path is used
            self._notice(ext, exc)

    @staticmethod
    def _notice(ext: Extension, exc: BaseException) -> None:
        detail = " ".join(str(exc).split())
        detail = detail if len(detail) <= 80 else detail[:79] + "…"
        compiler = type(exc).__name__ in ("CompileError", "CCompilerError", "LinkError", "PlatformError")
        reason = f"no working C compiler: {detail}" if compiler else f"{type(exc).__name__}: {detail}"
        print(NOTICE.format(name=ext.name, reason=reason), file=sys.stderr)


setup(
    packages=[*find_packages(include=["tracewh", "tracewh.*"]), "tracewh.sql", "tracewh.sql.ingest"],
    package_dir={"tracewh.sql": "sql", "tracewh.sql.ingest": "sql/ingest"},
    ext_modules=[
        Extension(
            "tracewh.ingest._fastshred",
            ["tracewh/ingest/_fastshred.c"],
            depends=["tracewh/ingest/_fastscan.c", "tracewh/ingest/_fastscan.h",
                     "tracewh/ingest/_fastarrow.c", "tracewh/ingest/_fastminhash.c",
                     "tracewh/ingest/_fastbytes.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                "-Wno-missing-field-initializers", "-Wno-cast-function-type"],
        )
    ],
    cmdclass={"build_ext": OptionalBuildExt},
)
