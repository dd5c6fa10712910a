"""The tracewh command line: parse options, call the library, format output.

This package is the only place that prints or chooses exit codes.
"""

from __future__ import annotations

import typer

from tracewh.cli import (
    analysis_cmds,
    attribution_cmds,
    capture_cmd,
    changes_cmds,
    collectives_cmd,
    critical_path_cmd,
    history_cmds,
    ingest_cmds,
    mcp_cmd,
    memory_cmd,
    report_cmds,
    roofline_cmd,
    schema_cmd,
    synth_cmd,
)
from tracewh.cli.common import app, apply_metavars
from tracewh.cli.conventions import finish, version_callback

__all__ = [
    "analysis_cmds", "app", "attribution_cmds", "capture_cmd", "changes_cmds", "collectives_cmd", "critical_path_cmd", "history_cmds",
    "ingest_cmds", "mcp_cmd", "memory_cmd", "report_cmds", "roofline_cmd", "schema_cmd",
    "synth_cmd",
]


@app.callback()
def main(
    version: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=version_callback, help="Print the version and exit."),
) -> None:
    """A columnar trace warehouse for GPU profiler (Kineto / torch.profiler) traces.

    Ingest traces into a warehouse, analyse one run, attribute GPU time to code, track runs
    over time. `tracewh COMMAND --help` shows a command's options and examples.
    """


@app.command()
def version() -> None:
    """Print the tracewh version.

    Example: tracewh version
    """
    from tracewh import package_version

    typer.echo(package_version())


# last: every command is registered by now (help shows PATH, N, TEXT, never Python types;
# each command in its help panel, its examples at the end of its help)
apply_metavars(app)
finish(app)
