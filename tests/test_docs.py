"""The README documents every CLI command and every SQL view/macro (sqlite-utils style)."""

from __future__ import annotations

import re
from pathlib import Path

import typer.main

from tracewh.cli import app
from tracewh.db import sql_files

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def test_every_cli_command_is_in_the_readme() -> None:
    group = typer.main.get_command(app)
    names = sorted(group.commands)  # type: ignore[attr-defined]
    assert len(names) >= 15
    missing = [n for n in names if f"`tracewh {n}" not in README]
    assert not missing, f"commands missing from README.md: {missing}"


def test_every_command_has_help_with_an_example() -> None:
    group = typer.main.get_command(app)
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        assert cmd.help and "Example:" in cmd.help, name


def test_every_sql_view_and_macro_is_in_the_readme() -> None:
    defined: set[str] = set()
    for path in sql_files():
        defined |= set(re.findall(r"CREATE OR REPLACE (?:VIEW|MACRO) (\w+)", path.read_text()))
    missing = sorted(n for n in defined if f"`{n}" not in README)
    assert not missing, f"views/macros missing from README.md: {missing}"


def test_readme_states_the_two_commands() -> None:
    assert "make demo" in README and "make test" in README
