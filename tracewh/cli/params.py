"""Option values without Pydantic: the plain cases of Typer's coercion, done directly.

Typer (0.29) coerces every command-line value through a Pydantic ``TypeAdapter`` built per
parameter, so any command with an option imports Pydantic (~0.1 s of CPU, a quarter of a
query command's start). Every option of tracewh is a ``str``, ``int``, ``float``, ``bool``,
``Path`` or a list of them (and ``--help``), with no constraint: for those, a value that is plainly valid
(``"20"`` for an int, a string for a str or a path) gives the same result as Typer's adapter
would; anything else (``--top abc``, a value Typer would reject or transform) goes to Typer's
own coercion, built on first use, so every error message stays Typer's.
:func:`install` puts this in front of a command's parameters (``_Group.get_command``); where
Typer's internals differ from what it expects, it leaves the parameters alone.
tests/cli/test_params.py checks the results against Typer's adapters value by value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args, get_origin

try:  # Typer's runtime-coercion layer (0.29+); without it, nothing is installed
    from typer._coercion import RuntimeParam, build_runtime_param, resolve_type_descriptor
    from typer._param_types import coerce_cli_path
except ImportError:  # pragma: no cover - another Typer
    RuntimeParam = None  # type: ignore[assignment,misc]

_INT = re.compile(r"-?[0-9]{1,18}")
_FLOAT = re.compile(r"-?[0-9]{1,15}(?:\.[0-9]{1,15})?")
_LEAVES = (str, int, float, bool, Path)


def _plain(leaf: Any, info: Any) -> bool:
    """Whether values of ``leaf`` with ``info`` can take the direct path."""
    if leaf not in _LEAVES or info.parser is not None or getattr(info, "click_type", None) is not None:
        return False
    if leaf in (int, float):
        return info.min is None and info.max is None and not info.clamp
    if leaf is Path:  # existence checks etc. are coerce_cli_path's, called below
        return info.path_type is None and not info.allow_dash
    return True


def _leaf_value(leaf: Any, value: Any, info: Any, param: Any, ctx: Any) -> tuple[bool, Any]:
    """``(True, result)`` for a plainly valid ``value``, else ``(False, None)``."""
    if leaf is str:
        return (True, value) if isinstance(value, str) else (False, None)
    if leaf is bool:
        return (True, value) if isinstance(value, bool) else (False, None)
    if leaf is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return True, value
        if isinstance(value, str) and _INT.fullmatch(value):
            return True, int(value)
        return False, None
    if leaf is float:
        if isinstance(value, float) or (isinstance(value, int) and not isinstance(value, bool)):
            return True, float(value)
        if isinstance(value, str) and _FLOAT.fullmatch(value):
            return True, float(value)
        return False, None
    # Path: a non-empty string without NUL is what Pydantic turns into Path(value); the rest
    # (exists, file_okay, resolve_path ...) is Typer's own path check, called as it would be
    if isinstance(value, str) and value and "\x00" not in value:
        value = Path(value)
    if not isinstance(value, Path):
        return False, None
    return True, coerce_cli_path(value, info, path_type=Path, param=param, ctx=ctx)


if RuntimeParam is not None:

    @dataclass(frozen=True)
    class DirectParam(RuntimeParam):
        """A parameter's coercion: plain values directly, the rest through Typer's own."""

        leaf: Any = None
        many: bool = False
        _typer: list[Any] = field(default_factory=list, compare=False, repr=False)

        def _fallback(self) -> Any:
            if not self._typer:
                descriptor = resolve_type_descriptor(self.annotation, self.parameter_info)
                self._typer.append(build_runtime_param(descriptor))
            return self._typer[0]

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if self.many:
                if isinstance(value, list | tuple):
                    out = []
                    for item in value:
                        ok, got = _leaf_value(self.leaf, item, self.parameter_info, param, ctx)
                        if not ok:
                            break
                        out.append(got)
                    else:
                        return out
            else:
                ok, got = _leaf_value(self.leaf, value, self.parameter_info, param, ctx)
                if ok:
                    return got
            return self._fallback()._coerce_value(value, param=param, ctx=ctx)


def direct_param(descriptor: Any) -> Any:
    """The :class:`DirectParam` for a Typer type descriptor, or ``None`` (Typer's own then)."""
    if RuntimeParam is None or getattr(descriptor, "file_annotation", None) is not None:
        return None
    annotation, info = descriptor.annotation, descriptor.parameter_info
    many = get_origin(annotation) is list
    leaf = get_args(annotation)[0] if many and get_args(annotation) else annotation
    if get_origin(annotation) is not None and not many:
        return None
    try:
        if not _plain(leaf, info):
            return None
    except AttributeError:  # pragma: no cover - a ParameterInfo without these fields
        return None
    return DirectParam(parameter_info=info, annotation=annotation, leaf=leaf, many=many)


def install(command: Any, ctx: Any) -> None:
    """Give ``command``'s parameters (its help option too) the direct coercion where it applies."""
    params = list(getattr(command, "params", ()))
    if ctx is not None and hasattr(command, "get_help_option"):
        params.append(command.get_help_option(ctx))  # created once, kept by the command
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or getattr(param, "_runtime_param", "absent") is not None:
            continue
        direct = direct_param(descriptor)
        if direct is not None:
            param._runtime_param = direct


__all__ = ["direct_param", "install"]
