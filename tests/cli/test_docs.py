"""The CLI reference page (docs/reference/cli.md) matches every command's help, both ways.

The page is generated from the Typer app (docs/gen_ref.py; tests/test_docs.py fails when it is
stale). Here each command's section is read back: every option it names exists in the
command's help with the same metavar, and every option of the command is in its section.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
import typer.main
from typer.core import TyperOption

from tracewh.cli import app

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
GROUP = typer.main.get_command(app)
COMMANDS = sorted(GROUP.commands)  # type: ignore[attr-defined]


def _section(name: str) -> str:
    parts = PAGE.split(f"### `tracewh {name}` {{#{name}}}", 1)
    assert len(parts) == 2, f"no section for `tracewh {name}` in docs/reference/cli.md"
    return re.split(r"\n##+ ", parts[1], maxsplit=1)[0]


def _page_options(name: str) -> dict[str, str | None]:
    """Option -> metavar (None for a flag) from the rows of the command's option table."""
    opts: dict[str, str | None] = {}
    for row in re.findall(r"^\| (`-.*)$", _section(name), re.M):
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", row)]
        names = re.findall(r"`(--?[a-zA-Z0-9-]+)`", cells[0])
        meta = re.match(r"`([^`]+)`|<code>(.*?)</code>", cells[1]) if len(cells) > 1 else None
        for n in names:
            opts[n] = html.unescape(meta.group(1) or meta.group(2)) if meta else None
    return opts


def _help_options(name: str) -> dict[str, str | None]:
    cmd = GROUP.commands[name]  # type: ignore[attr-defined]
    opts: dict[str, str | None] = {}
    for param in cmd.params:
        if not isinstance(param, TyperOption) or param.hidden:  # hidden: a deprecated spelling
            continue
        for o in param.opts + param.secondary_opts:
            opts[o] = None if param.is_flag else param.metavar
    return opts


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_a_reference_section(name: str) -> None:
    assert _section(name)


@pytest.mark.parametrize("name", COMMANDS)
def test_reference_names_only_real_options_with_their_metavars(name: str) -> None:
    helped = _help_options(name)
    for opt, meta in _page_options(name).items():
        if opt == "--help":
            continue
        assert opt in helped, f"the reference of {name} names {opt}, which `tracewh {name} --help` lacks"
        assert meta == helped[opt], f"{name} {opt}: the reference says {meta}, help says {helped[opt]}"


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_of_the_help_is_in_the_reference(name: str) -> None:
    documented = set(_page_options(name))
    missing = sorted(set(_help_options(name)) - documented)
    assert not missing, f"`tracewh {name}` options missing from docs/reference/cli.md: {missing}"


@pytest.mark.parametrize("name", COMMANDS)
def test_help_shows_metavars_not_python_types(name: str) -> None:
    from typer.testing import CliRunner

    out = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "120"}).output
    assert not re.search(r"<(?:str|int|float|bool|path|Path|list\[[^\]]*\])>", out), out
    for param in GROUP.commands[name].params:  # type: ignore[attr-defined]
        if isinstance(param, TyperOption) and not param.is_flag:
            assert param.metavar, f"{name} {param.opts}: no metavar"
