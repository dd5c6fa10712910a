"""The options of check and changes are declared once (CheckOptions, ChangesOptions): the API,
the functions that do the work and the CLI all default to the dataclass's values."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
import typer.main

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.history import alerts, check
from tracewh.history.options import DEFAULT_ALPHA, DEFAULT_KEYS, ChangesOptions, CheckOptions
from tracewh.history.series import parse_threshold


def _defaults(fn: Any) -> dict[str, Any]:
    return {n: p.default for n, p in inspect.signature(fn).parameters.items()
            if p.default is not inspect.Parameter.empty}


def _cli(name: str) -> dict[str, Any]:
    command = typer.main.get_command(app).commands[name]  # type: ignore[attr-defined]
    return {p.name: p.default for p in command.params}


@pytest.mark.parametrize(("options", "work", "api", "cli"), [
    (CheckOptions, check.check, Warehouse.check, "check"),
    (ChangesOptions, alerts.changes, Warehouse.changes, "changes"),
])
def test_one_default_per_option(options: type, work: Any, api: Any, cli: str) -> None:
    fields = {f.name: f.default for f in dataclasses.fields(options)}
    worker, facade, command = _defaults(work), _defaults(api), _cli(cli)
    for name, default in fields.items():
        assert worker[name] == default, (work.__name__, name)
        # the facade's None for alpha/keys means "the default" (DEFAULT_ALPHA, DEFAULT_KEYS)
        assert facade[name] == (None if name in ("alpha", "keys") else default), (name, facade[name])
        if name in command:
            got = command[name]
            if name in ("threshold", "min_change"):  # typed as text on the command line: 10%
                got = 0.0 if got.strip() in ("0", "0%") else parse_threshold(got)  # as the CLI
            elif name == "since":
                got = str(got)
            assert got == default, (cli, name, got, default)
    assert fields["alpha"] == DEFAULT_ALPHA and fields["keys"] == DEFAULT_KEYS


def test_the_cli_exposes_the_options_it_names() -> None:
    """Each option of the commands that the dataclasses declare is checked above (not skipped)."""
    assert {"min_ms", "k_mad", "min_runs", "alpha", "include_unusable", "threshold",
            "baseline", "op"} <= set(_cli("check"))
    assert {"since", "alpha", "min_change", "min_ms", "include_unusable"} <= set(_cli("changes"))
