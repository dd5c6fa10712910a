"""The README's CLI table matches every command's help, in both directions.

Each command has a row (or two, `report`) whose first code span is ``tracewh NAME ...``: every
option the row names exists in the command's help with the same metavar, and every option of
the command (but ``--help`` and ``-w/--warehouse``, accepted by all) is in its row.
``[OUTPUT]`` stands for ``[--top N] [--format table|csv|json] [--out PATH]``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main
from typer.core import TyperOption

from tracewh.cli import app

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
GROUP = typer.main.get_command(app)
COMMANDS = sorted(GROUP.commands)  # type: ignore[attr-defined]
OUTPUT = "[--top N] [--format table|csv|json] [--out PATH]"
ALWAYS = {"--help", "--warehouse"}
_OPT = re.compile(r"(--[a-z][a-z0-9-]*)(?:[ =]([^\s\]\[]+))?")


def _rows(name: str) -> list[str]:
    """The code spans starting the README table rows of command ``name`` (pipes unescaped)."""
    spans = re.findall(r"^\| `(tracewh [^`]*)` \|", README, re.M)
    out = []
    for span in spans:
        text = span.replace("\\|", "|")
        if text.split()[1] == name:
            out.append(text.replace("[OUTPUT]", OUTPUT))
    return out


def _readme_options(name: str) -> dict[str, str | None]:
    opts: dict[str, str | None] = {}
    for row in _rows(name):
        for opt, meta in _OPT.findall(row):
            if meta and (meta.startswith("--") or meta == "|"):
                meta = ""
            opts[opt] = meta or opts.get(opt)
    return opts


def _help_options(name: str) -> dict[str, str | None]:
    cmd = GROUP.commands[name]  # type: ignore[attr-defined]
    opts: dict[str, str | None] = {}
    for param in cmd.params:
        if not isinstance(param, TyperOption):
            continue
        longs = [o for o in param.opts + param.secondary_opts if o.startswith("--")]
        for o in longs:
            opts[o] = None if param.is_flag else param.metavar
    return opts


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_a_readme_row(name: str) -> None:
    assert _rows(name), f"no README CLI table row for `tracewh {name}`"


@pytest.mark.parametrize("name", COMMANDS)
def test_readme_row_names_only_real_options_with_their_metavars(name: str) -> None:
    helped = _help_options(name)
    for opt, meta in _readme_options(name).items():
        assert opt in helped, f"README row of {name} names {opt}, which `tracewh {name} --help` lacks"
        if meta and helped[opt]:
            assert meta == helped[opt], f"{name} {opt}: README says {meta}, help says {helped[opt]}"


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_of_the_help_is_in_the_readme_row(name: str) -> None:
    documented = set(_readme_options(name))
    cmd = GROUP.commands[name]  # type: ignore[attr-defined]
    for param in cmd.params:
        if not isinstance(param, TyperOption) or param.hidden:  # hidden: a deprecated spelling
            continue
        longs = [o for o in param.opts + param.secondary_opts if o.startswith("--")]
        if set(longs) & ALWAYS:
            continue
        assert set(longs) & documented, f"`tracewh {name}` option {longs} missing from its README row"


@pytest.mark.parametrize("name", COMMANDS)
def test_help_shows_metavars_not_python_types(name: str) -> None:
    from typer.testing import CliRunner

    out = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "120"}).output
    assert not re.search(r"<(?:str|int|float|bool|path|Path|list\[[^\]]*\])>", out), out
    for param in GROUP.commands[name].params:  # type: ignore[attr-defined]
        if isinstance(param, TyperOption) and not param.is_flag:
            assert param.metavar, f"{name} {param.opts}: no metavar"
