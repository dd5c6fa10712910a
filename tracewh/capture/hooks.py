"""Where a step of an unmodified script begins and ends: the ``--step-on`` hooks.

Three kinds of step (:func:`parse_step_on`):

``optimizer``
    One ``optimizer.step()`` of any ``torch.optim.Optimizer``: a step runs from
    the return of one call to the return of the next, so it holds the whole
    iteration (data, forward, backward, step). The boundary is placed outside
    torch's own ``Optimizer.step#…`` span by wrapping the function torch's
    ``Optimizer.profile_hook_step`` returns when an optimizer class is first
    instantiated, so the trace's spans nest. The script's set-up, up to the
    first ``optimizer.step()`` return, is not a step.
``MODULE_CLASS``
    One call of ``forward`` of the ``nn.Module`` class of that name (``Class``
    or ``package.module.Class``), outermost calls only (a call nested in
    another call of the same class is part of it). The class is found when it
    is defined (an ``nn.Module.__init_subclass__`` hook) or, if it already
    exists, among ``nn.Module``'s subclasses; its ``forward`` is wrapped.
``module:function``
    One call of a function (``function`` or ``Class.method``) of a module;
    ``__main__`` (or the script's file stem) is the script itself, whose
    definition gets a decorator when the script is compiled (the file is not
    changed, line numbers are kept). For another module the attribute is
    replaced after the module is imported, so calls through the module or
    through a later ``from module import function`` are steps; a reference
    taken during the module's own import is not.

A hook calls ``sink.begin()`` / ``sink.end()`` (or ``sink.boundary()``), which
may raise to stop the script once the capture is complete.
"""

from __future__ import annotations

import ast
import functools
import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import CodeType, ModuleType
from typing import Any, Literal, Protocol

from tracewh.core.errors import UsageError

DECORATOR = "__tracewh_step__"
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = rf"{_IDENT}(?:\.{_IDENT})*"


class StepSink(Protocol):
    """What the hooks report to (the runner's driver)."""

    def begin(self) -> None: ...

    def end(self) -> None: ...

    def boundary(self) -> None: ...

    def end_quietly(self) -> None: ...


@dataclass(frozen=True)
class StepOn:
    """A parsed ``--step-on`` value.

    Attributes
    ----------
    kind
        ``optimizer``, ``module`` or ``function``.
    target
        The class name (``module``), or ``module:qualname`` (``function``); ``""`` for optimizer.
    """

    kind: Literal["optimizer", "module", "function"]
    target: str = ""

    @property
    def module(self) -> str:
        """The module part of a ``function`` target."""
        return self.target.partition(":")[0]

    @property
    def qualname(self) -> str:
        """The ``function`` or ``Class.method`` part of a ``function`` target."""
        return self.target.partition(":")[2]

    def describe(self) -> str:
        """The value as the user wrote it."""
        return "optimizer" if self.kind == "optimizer" else self.target


def parse_step_on(text: str) -> StepOn:
    """``optimizer``, ``ClassName`` / ``pkg.mod.ClassName``, or ``module:function``.

    Examples
    --------
    >>> parse_step_on("optimizer")
    StepOn(kind='optimizer', target='')
    >>> parse_step_on("TinyDenoiser").kind, parse_step_on("__main__:denoise").kind
    ('module', 'function')
    """
    value = text.strip()
    if value == "optimizer":
        return StepOn("optimizer")
    if ":" in value:
        module, _, qualname = value.partition(":")
        if not re.fullmatch(_DOTTED, module) or not re.fullmatch(
            rf"{_IDENT}(?:\.{_IDENT})?", qualname
        ):
            raise UsageError(
                f"--step-on {text!r}: a function is module:function or module:Class.method "
                "(e.g. __main__:denoise_step, mypkg.sampler:Sampler.step)"
            )
        return StepOn("function", f"{module}:{qualname}")
    if not re.fullmatch(_DOTTED, value):
        raise UsageError(
            f"--step-on {text!r}: use optimizer, an nn.Module class name (e.g. UNet2DModel) "
            "or module:function"
        )
    return StepOn("module", value)


# ------------------------------------------------------------------ call wrapper
def _call_wrapper(fn: Callable[..., Any], sink: StepSink, depth: list[int]) -> Callable[..., Any]:
    """``fn`` as a step: outermost calls only, the step ended also when ``fn`` raises."""

    @functools.wraps(fn)
    def step(*args: Any, **kwargs: Any) -> Any:
        if depth[0]:
            return fn(*args, **kwargs)
        depth[0] += 1
        sink.begin()
        try:
            out = fn(*args, **kwargs)
        except BaseException:
            depth[0] -= 1
            sink.end_quietly()
            raise
        depth[0] -= 1
        sink.end()
        return out

    step.__tracewh_wrapped__ = True  # type: ignore[attr-defined]
    return step


# -------------------------------------------------------------------- optimizer
def install_optimizer(torch: Any, sink: StepSink) -> Callable[[], None]:
    """Make every ``optimizer.step()`` return a step boundary; returns the uninstaller.

    Optimizer classes torch hooks from now on get the boundary through the patched
    ``profile_hook_step``; classes it hooked already (an optimizer was created
    before) get their hooked ``step`` wrapped in place.
    """
    optimizer_cls = torch.optim.Optimizer
    original = optimizer_cls.__dict__.get("profile_hook_step")
    depth = [0]

    def outer(inner: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(inner)
        def step(*args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            try:
                out = inner(*args, **kwargs)
            finally:
                depth[0] -= 1
            if not depth[0]:
                sink.boundary()
            return out

        step.__tracewh_wrapped__ = True  # type: ignore[attr-defined]
        return step

    if not isinstance(original, staticmethod):
        # A torch without profile_hook_step: the global post hook (the boundary then falls
        # inside torch's Optimizer.step span).
        handle = torch.optim.optimizer.register_optimizer_step_post_hook(
            lambda *_args: sink.boundary()
        )
        return handle.remove  # type: ignore[no-any-return]
    factory = original.__func__
    optimizer_cls.profile_hook_step = staticmethod(lambda func: outer(factory(func)))
    rewrapped: list[tuple[type, Any]] = []
    todo: list[type] = list(optimizer_cls.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        own = cls.__dict__.get("step")
        if callable(own) and getattr(own, "hooked", False) and not getattr(
            own, "__tracewh_wrapped__", False
        ):
            wrapped = outer(own)
            wrapped.hooked = True  # type: ignore[attr-defined]
            setattr(cls, "step", wrapped)  # noqa: B010
            rewrapped.append((cls, own))

    def uninstall() -> None:
        optimizer_cls.profile_hook_step = original
        for cls, own in rewrapped:
            setattr(cls, "step", own)  # noqa: B010

    return uninstall


# ----------------------------------------------------------------------- module
def _class_matches(cls: type, target: str) -> bool:
    return target in (cls.__name__, f"{cls.__module__}.{cls.__qualname__}")


def install_module(torch: Any, target: str, sink: StepSink) -> Callable[[], None]:
    """Wrap ``forward`` of the ``nn.Module`` class named ``target``; returns the uninstaller."""
    module_cls = torch.nn.Module
    depth = [0]
    patched: list[tuple[type, Any]] = []

    def patch(cls: type) -> None:
        if not _class_matches(cls, target) or any(c is cls for c, _ in patched):
            return
        forward = cls.forward  # type: ignore[attr-defined]
        if getattr(forward, "__tracewh_wrapped__", False):
            return
        patched.append((cls, cls.__dict__.get("forward")))
        cls.forward = _call_wrapper(forward, sink, depth)  # type: ignore[attr-defined]

    def walk(cls: type) -> None:
        sub: type
        for sub in cls.__subclasses__():
            patch(sub)
            walk(sub)

    had_hook = "__init_subclass__" in module_cls.__dict__
    previous = module_cls.__dict__.get("__init_subclass__")

    def init_subclass(cls: type, /, **kwargs: Any) -> None:
        super(module_cls, cls).__init_subclass__(**kwargs)
        patch(cls)

    walk(module_cls)
    module_cls.__init_subclass__ = classmethod(init_subclass)

    def uninstall() -> None:
        if had_hook:
            module_cls.__init_subclass__ = previous
        else:
            del module_cls.__init_subclass__
        for cls, own in reversed(patched):
            if own is None:
                delattr(cls, "forward")
            else:
                setattr(cls, "forward", own)  # noqa: B010

    return uninstall


def module_class_found(torch: Any, target: str) -> bool:
    """True when an ``nn.Module`` subclass named ``target`` exists (was defined)."""
    todo = list(torch.nn.Module.__subclasses__())
    while todo:
        cls = todo.pop()
        if _class_matches(cls, target):
            return True
        todo.extend(cls.__subclasses__())
    return False


# --------------------------------------------------------------------- function
def _main_aliases(script: str) -> set[str]:
    stem = re.sub(r"\.py$", "", script.replace("\\", "/").rsplit("/", 1)[-1])
    return {"__main__", stem}


def targets_script(step_on: StepOn, script: str) -> bool:
    """True when a ``function`` step-on names a function of the script itself."""
    return step_on.kind == "function" and step_on.module in _main_aliases(script)


def decorate_source(source: str, filename: str, qualname: str) -> CodeType:
    """Compile a script with :data:`DECORATOR` added to the definition ``qualname``.

    The decorator is the outermost one, inside ``staticmethod``/``classmethod``.
    Raises :class:`UsageError` when the script has no such top-level definition.
    """
    tree = ast.parse(source, filename)
    owner: Sequence[ast.stmt] = tree.body
    parts = qualname.split(".")
    if len(parts) == 2:
        classes = [n for n in owner if isinstance(n, ast.ClassDef) and n.name == parts[0]]
        if not classes:
            raise UsageError(f"--step-on __main__:{qualname}: {filename} defines no class {parts[0]}")
        owner = classes[-1].body
    defs = [
        n for n in owner
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == parts[-1]
    ]
    if not defs:
        raise UsageError(
            f"--step-on __main__:{qualname}: {filename} has no top-level def {qualname} "
            "(a nested function cannot be a step; name a module-level one)"
        )
    for node in defs:
        keep = 0
        while keep < len(node.decorator_list) and isinstance(node.decorator_list[keep], ast.Name) \
                and node.decorator_list[keep].id in ("staticmethod", "classmethod"):  # type: ignore[attr-defined]
            keep += 1
        deco = ast.copy_location(ast.Name(id=DECORATOR, ctx=ast.Load()), node)
        node.decorator_list.insert(keep, deco)
    ast.fix_missing_locations(tree)
    return compile(tree, filename, "exec")


def step_decorator(sink: StepSink) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The decorator :func:`decorate_source` applies (one shared depth counter)."""
    depth = [0]
    return lambda fn: _call_wrapper(fn, sink, depth)


class _PatchingLoader(importlib.abc.Loader):
    """Delegates to the module's own loader, then patches the executed module."""

    def __init__(self, inner: Any, patch: Callable[[ModuleType], None]) -> None:
        self._inner = inner
        self._patch = patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._inner.create_module(spec)  # type: ignore[no-any-return]

    def exec_module(self, module: ModuleType) -> None:
        self._inner.exec_module(module)
        self._patch(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_resource_reader, ...
        return getattr(self._inner, name)


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Replace ``module.qualname`` by a step wrapper right after ``module`` is imported."""

    def __init__(self, module: str, patch: Callable[[ModuleType], None]) -> None:
        self.module = module
        self.patch = patch

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.module:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader, self.patch)
                return spec
        return None


def install_function(step_on: StepOn, sink: StepSink) -> Callable[[], None]:
    """Wrap ``module:qualname`` of a module other than the script; returns the uninstaller."""
    depth = [0]
    restore: list[Callable[[], None]] = []

    def patch(module: ModuleType) -> None:
        owner: Any = module
        parts = step_on.qualname.split(".")
        for part in parts[:-1]:
            owner = getattr(owner, part, None)
        name = parts[-1]
        if owner is None or name not in getattr(owner, "__dict__", {}):
            raise UsageError(f"--step-on {step_on.target}: {module.__name__} has no {step_on.qualname}")
        raw = owner.__dict__[name]
        if isinstance(raw, staticmethod | classmethod):
            wrapped: Any = type(raw)(_call_wrapper(raw.__func__, sink, depth))
        elif callable(raw):
            wrapped = _call_wrapper(raw, sink, depth)
        else:
            raise UsageError(f"--step-on {step_on.target}: {step_on.qualname} is not callable")
        setattr(owner, name, wrapped)
        restore.append(lambda: setattr(owner, name, raw))

    if step_on.module in sys.modules:
        patch(sys.modules[step_on.module])
        finder = None
    else:
        finder = _PatchAfterImport(step_on.module, patch)
        sys.meta_path.insert(0, finder)

    def uninstall() -> None:
        if finder is not None and finder in sys.meta_path:
            sys.meta_path.remove(finder)
        for undo in reversed(restore):
            undo()

    return uninstall


def function_found(step_on: StepOn) -> bool:
    """True when the module of a ``function`` step-on was imported (so it was patched)."""
    return step_on.module in sys.modules
