"""tracewh.cli.params: option values coerced without Pydantic equal Typer's own coercion.

The same little command is built twice, once on tracewh's command group (the direct path)
and once on Typer's plain group (Pydantic adapters), and invoked with the same arguments:
the values it receives (type and value), its output and its exit code must be identical,
for plain values and for the odd ones that go back to Typer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tracewh.cli.common import _Group
from tracewh.cli.params import direct_param


def _app(cls: type | None) -> typer.Typer:
    app = typer.Typer(cls=cls, add_completion=False, pretty_exceptions_enable=False)

    @app.command()
    def show(
        text: str = typer.Option("d", "--text"),
        maybe: str | None = typer.Option(None, "--maybe"),
        n: int = typer.Option(20, "--n"),
        top: int | None = typer.Option(None, "--top"),
        x: float = typer.Option(1.5, "--x"),
        flag: bool = typer.Option(False, "--flag"),
        path: Path | None = typer.Option(None, "--path"),
        many: list[str] | None = typer.Option(None, "--many"),
        paths: list[Path] | None = typer.Option(None, "--paths"),
        bounded: int = typer.Option(3, "--bounded", min=1, max=9),
    ) -> None:
        values = dict(text=text, maybe=maybe, n=n, top=top, x=x, flag=flag, path=path,
                      many=many, paths=paths, bounded=bounded)
        typer.echo(json.dumps({k: [type(v).__name__, repr(v)] for k, v in values.items()}))

    @app.command()
    def other() -> None:
        typer.echo("other")

    return app


CASES = [
    [], ["--help"], ["show", "--help"],
    ["show", "--text", "abc", "--maybe", "", "--n", "5", "--top", "0", "--x", "2"],
    ["show", "--n", "007", "--top", "-3", "--x", "-0.25", "--x", "10.000"],
    ["show", "--n", "123456789012345678", "--x", "123456789012345.123456789012345"],
    ["show", "--n", "1234567890123456789012"], ["show", "--n", "1_000"], ["show", "--n", "+5"],
    ["show", "--n", " 5"], ["show", "--n", "5.0"], ["show", "--n", "abc"], ["show", "--n", ""],
    ["show", "--n", "٣"], ["show", "--x", "1e3"], ["show", "--x", "inf"], ["show", "--x", "nan"],
    ["show", "--x", ".5"], ["show", "--x", "abc"], ["show", "--flag"],
    ["show", "--path", "a/b c.json", "--paths", "x", "--paths", "/y/z", "--paths", "."],
    ["show", "--path", ""], ["show", "--many", "a", "--many", "b=c", "--many", ""],
    ["show", "--bounded", "5"], ["show", "--bounded", "0"], ["show", "--bounded", "x"],
    ["show", "--text"], ["show", "--unknown"], ["other"], ["nothing"],
]


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(a) or "(none)")
def test_direct_coercion_equals_typers(args: list[str]) -> None:
    runner = CliRunner()
    ours = runner.invoke(_app(_Group), args)
    theirs = runner.invoke(_app(None), args)
    assert (ours.exit_code, ours.output) == (theirs.exit_code, theirs.output)
    assert not isinstance(ours.exception, AssertionError | TypeError | AttributeError)


def test_constrained_and_unusual_types_stay_with_typer() -> None:
    from typer._coercion import resolve_type_descriptor
    from typer.models import OptionInfo

    assert direct_param(resolve_type_descriptor(int, OptionInfo(min=1))) is None
    assert direct_param(resolve_type_descriptor(tuple[int, int], OptionInfo())) is None
    assert direct_param(resolve_type_descriptor(int, OptionInfo(parser=int))) is None
    assert direct_param(resolve_type_descriptor(int, OptionInfo())) is not None
    assert direct_param(resolve_type_descriptor(list[Path], OptionInfo())) is not None

