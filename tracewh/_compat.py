"""The import paths of tracewh before issue 29, kept working with a DeprecationWarning.

Issue 29 moved the modules that sat directly under ``tracewh/`` into packages by role
(``tracewh.errors`` is now ``tracewh.core.errors``, ``tracewh.store`` is
``tracewh.storage.store``, ...). Code that imports an old path still gets the very same
module object (so ``except tracewh.errors.UsageError`` catches what the library raises), with a
:class:`DeprecationWarning` naming the new path. This is done by one import finder,
:class:`MovedModules`, which :mod:`tracewh` appends to :data:`sys.meta_path` when it is imported:
it only answers for the names in :data:`MOVED` (a real file always wins), so it changes nothing
else. ``tracewh.schema``, ``tracewh.history`` and ``tracewh.synth`` are packages now: their
old names are importable from the package (``from tracewh.schema import TABLES``).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

# The finder and loader below follow importlib.abc's MetaPathFinder and Loader protocols
# without subclassing them: importing importlib.abc imports importlib.resources (~9 ms of
# every command's start).

#: Old module path -> its new path.
MOVED: dict[str, str] = {
    "tracewh.errors": "tracewh.core.errors",
    "tracewh.atomic": "tracewh.core.atomic",
    "tracewh.textsafe": "tracewh.core.textsafe",
    "tracewh.categories": "tracewh.core.categories",
    "tracewh.cache": "tracewh.core.cache",
    "tracewh.sqlfiles": "tracewh.core.sqlfiles",
    "tracewh.plainschema": "tracewh.schema.plain",
    "tracewh.store": "tracewh.storage.store",
    "tracewh.deltalog": "tracewh.storage.deltalog",
    "tracewh.db": "tracewh.query.db",
    "tracewh.macros": "tracewh.query.macros",
    "tracewh.runsel": "tracewh.query.runsel",
    "tracewh.sqlguard": "tracewh.query.sqlguard",
    "tracewh.graphalign": "tracewh.query.graphalign",
    "tracewh.memory": "tracewh.analysis.memory",
    "tracewh.roofline": "tracewh.analysis.roofline",
    "tracewh.alerts": "tracewh.history.alerts",
    "tracewh.check": "tracewh.history.check",
    "tracewh.analysis.changes": "tracewh.history.changes",
    "tracewh.analysis.changepoint": "tracewh.history.changepoint",
    "tracewh.analysis.workload": "tracewh.history.workload",
    "tracewh.analysis.health": "tracewh.history.health",
    "tracewh.analysis.stats": "tracewh.history.stats",
}


class _Alias:
    """Loads an old name as the module at its new path (the same object)."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # a placeholder; exec_module puts the real module in its place

    def exec_module(self, module: ModuleType) -> None:
        warnings.warn(
            f"{module.__name__} moved to {self.new} (issue 29); import it from there",
            DeprecationWarning,
            stacklevel=2,
        )
        # the import system returns what sys.modules holds under the name after exec_module
        sys.modules[module.__name__] = importlib.import_module(self.new)


class MovedModules:
    """Import finder for the old paths in :data:`MOVED`."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, cast("Loader", _Alias(new)))


def install() -> None:
    """Append :class:`MovedModules` to :data:`sys.meta_path` (once)."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
