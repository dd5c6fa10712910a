"""`tracewh synth` takes its defaults from SynthConfig: the options are declared once."""

from __future__ import annotations

import dataclasses

import typer.main

from tracewh.cli import app
from tracewh.synth.options import SynthConfig

# CLI parameter -> SynthConfig field, where the names differ
RENAMED = {"trailer_distributed_info": "distributed_info_in_trailer"}
# parsed on the way in (a text option for a typed field), or not a field of SynthConfig
NOT_FIELDS = {"out", "size", "straggler", "leak", "runs", "start", "regress"}


def test_every_cli_default_is_the_dataclass_default() -> None:
    command = typer.main.get_command(app).commands["synth"]  # type: ignore[attr-defined]
    defaults = {f.name: f.default for f in dataclasses.fields(SynthConfig)}
    checked = 0
    for param in command.params:
        if param.name in NOT_FIELDS:
            continue
        field = RENAMED.get(param.name, param.name)
        assert field in defaults, f"--{param.name} has no SynthConfig field"
        assert param.default == defaults[field], (param.name, param.default, defaults[field])
        checked += 1
    assert checked >= 14


def test_a_changed_dataclass_default_changes_the_cli_default() -> None:
    """The CLI reads the dataclass (not a copy of its values): the two cannot drift apart."""
    import inspect

    from tracewh.cli import synth_cmd

    source = inspect.getsource(synth_cmd.synth)
    for name in ("steps", "layers", "ranks", "seed", "noise", "model", "gzip_level"):
        assert f"_D.{name}" in source, name
