"""tracewh.capture.hooks: parsing --step-on, and where each kind of hook puts a step."""

from __future__ import annotations

import sys
import textwrap
import traceback
import warnings
from pathlib import Path
from typing import Any

import pytest

from tracewh.capture.hooks import (
    DECORATOR,
    StepOn,
    decorate_source,
    install_function,
    install_module,
    install_optimizer,
    parse_step_on,
    step_decorator,
    targets_script,
)
from tracewh.core.errors import UsageError

pytestmark = pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning")


class Sink:
    """Records what the hooks report, in order."""

    def __init__(self) -> None:
        self.events: list[str] = []

    def begin(self) -> None:
        self.events.append("begin")

    def end(self) -> None:
        self.events.append("end")

    def end_quietly(self) -> None:
        self.events.append("end_quietly")

    def boundary(self) -> None:
        self.events.append("boundary")


@pytest.fixture(scope="module")
def torch() -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        return pytest.importorskip("torch")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("optimizer", StepOn("optimizer")),
        ("UNet2DModel", StepOn("module", "UNet2DModel")),
        ("diffusers.models.UNet2DModel", StepOn("module", "diffusers.models.UNet2DModel")),
        ("__main__:denoise_step", StepOn("function", "__main__:denoise_step")),
        ("pkg.sampler:Sampler.step", StepOn("function", "pkg.sampler:Sampler.step")),
    ],
)
def test_parse_step_on(text: str, expected: StepOn) -> None:
    assert parse_step_on(text) == expected


@pytest.mark.parametrize("text", ["", "9lives", "a b", "mod:", ":f", "m:a.b.c", "m:f()"])
def test_parse_step_on_rejects(text: str) -> None:
    with pytest.raises(UsageError, match="--step-on"):
        parse_step_on(text)


def test_script_aliases() -> None:
    spec = parse_step_on("__main__:f")
    assert targets_script(spec, "examples/loop.py")
    assert targets_script(parse_step_on("loop:f"), "examples/loop.py")
    assert not targets_script(parse_step_on("other:f"), "examples/loop.py")


def test_decorate_source_wraps_the_named_function_and_keeps_line_numbers() -> None:
    source = textwrap.dedent(
        """\
        import functools

        def helper():
            return 1

        def step(x):
            if x < 0:
                raise ValueError("negative")
            return x * 2

        class Loop:
            @staticmethod
            def tick(x):
                return x + 1

        calls = [step(1), step(2), Loop.tick(3)]
        """
    )
    sink = Sink()
    ns: dict[str, Any] = {DECORATOR: step_decorator(sink)}
    exec(decorate_source(source, "loop.py", "step"), ns)
    assert ns["calls"] == [2, 4, 4]
    assert sink.events == ["begin", "end", "begin", "end"]
    with pytest.raises(ValueError, match="negative") as info:
        ns["step"](-1)
    assert sink.events[-2:] == ["begin", "end_quietly"]
    assert traceback.extract_tb(info.tb)[-1].lineno == 8  # the raise, unchanged

    sink2 = Sink()
    ns2: dict[str, Any] = {DECORATOR: step_decorator(sink2)}
    exec(decorate_source(source, "loop.py", "Loop.tick"), ns2)
    assert ns2["calls"] == [2, 4, 4] and sink2.events == ["begin", "end"]


@pytest.mark.parametrize("qualname", ["missing", "Loop.missing", "Nope.tick"])
def test_decorate_source_needs_a_top_level_definition(qualname: str) -> None:
    source = "class Loop:\n    def tick(self):\n        pass\n\ndef outer():\n    def missing():\n        pass\n"
    with pytest.raises(UsageError, match=f"__main__:{qualname}"):
        decorate_source(source, "loop.py", qualname)


def test_module_hook_counts_outermost_forward_calls(torch: Any) -> None:
    nn = torch.nn
    sink = Sink()

    class Before(nn.Module):  # defined before the hook: found among subclasses
        def forward(self, x: Any) -> Any:
            return x + 1

    uninstall = install_module(torch, "Before", sink)
    try:
        m = Before()
        m(torch.zeros(1))
        m.forward(torch.zeros(1))
        assert sink.events == ["begin", "end"] * 2
    finally:
        uninstall()
    m(torch.zeros(1))
    assert sink.events == ["begin", "end"] * 2  # uninstalled
    assert "forward" in Before.__dict__ and not hasattr(Before.forward, "__wrapped__")


def test_module_hook_finds_a_class_defined_later_and_ignores_nested_calls(torch: Any) -> None:
    nn = torch.nn
    sink = Sink()
    uninstall = install_module(torch, "Recursive", sink)
    try:

        class Recursive(nn.Module):  # defined after the hook: __init_subclass__
            def __init__(self, depth: int) -> None:
                super().__init__()
                self.inner = Recursive(depth - 1) if depth else None

            def forward(self, x: Any) -> Any:
                return x if self.inner is None else self.inner(x) * 2

        class Other(nn.Module):
            def forward(self, x: Any) -> Any:
                return x

        model = Recursive(3)
        assert float(model(torch.ones(1))) == 8.0
        Other()(torch.ones(1))
        assert sink.events == ["begin", "end"]  # one outermost call, Other not counted
    finally:
        uninstall()
    assert "__init_subclass__" not in nn.Module.__dict__


def test_optimizer_boundary_is_after_the_step_and_its_hooks(torch: Any) -> None:
    order: list[str] = []

    class Record(Sink):
        def boundary(self) -> None:
            order.append("boundary")

    uninstall = install_optimizer(torch, Record())
    try:

        class MySGD(torch.optim.SGD):  # a class first instantiated after the hook
            pass

        p = torch.nn.Parameter(torch.ones(2))
        opt = MySGD([p], lr=0.1)
        opt.register_step_post_hook(lambda *_: order.append("post_hook"))
        for _ in range(3):
            p.grad = torch.ones(2)
            opt.step()
    finally:
        uninstall()
    assert order == ["post_hook", "boundary"] * 3


def test_optimizer_classes_hooked_before_the_install_count_too(torch: Any) -> None:
    p = torch.nn.Parameter(torch.ones(2))
    torch.optim.Adagrad([p])  # torch hooks Adagrad.step now, before tracewh's hook
    hooked = torch.optim.Adagrad.__dict__["step"]
    sink = Sink()
    uninstall = install_optimizer(torch, sink)
    try:
        opt = torch.optim.Adagrad([p])
        p.grad = torch.ones(2)
        opt.step()
        opt.step()
    finally:
        uninstall()
    assert sink.events == ["boundary", "boundary"]
    assert torch.optim.Adagrad.__dict__["step"] is hooked


def test_function_hook_patches_a_module_when_it_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tw_sampler_mod.py").write_text(
        "class Sampler:\n    def step(self, x):\n        return x + 1\n\n"
        "def run(n):\n    s = Sampler()\n    return [s.step(i) for i in range(n)]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    sink = Sink()
    uninstall = install_function(parse_step_on("tw_sampler_mod:Sampler.step"), sink)
    try:
        import tw_sampler_mod  # type: ignore[import-not-found]

        assert tw_sampler_mod.run(3) == [1, 2, 3]
        assert sink.events == ["begin", "end"] * 3
    finally:
        uninstall()
        sys.modules.pop("tw_sampler_mod", None)


def test_function_hook_on_an_imported_module_and_a_missing_name() -> None:
    import json

    sink = Sink()
    uninstall = install_function(parse_step_on("json:dumps"), sink)
    try:
        assert json.dumps([1]) == "[1]"
        assert sink.events == ["begin", "end"]
    finally:
        uninstall()
    assert not hasattr(json.dumps, "__wrapped__")
    with pytest.raises(UsageError, match="json has no nope"):
        install_function(parse_step_on("json:nope"), sink)
