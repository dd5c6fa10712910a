"""The tracewh command line: parse options, call the library, format output.

This package is the only place that prints or chooses exit codes.
"""

from __future__ import annotations

import typer

from tracewh import __version__
from tracewh.cli import (
    analysis_cmds,
    attribution_cmds,
    capture_cmd,
    changes_cmds,
    collectives_cmd,
    history_cmds,
    ingest_cmds,
    memory_cmd,
    report_cmds,
    roofline_cmd,
    synth_cmd,
)
from tracewh.cli.common import app, apply_metavars

__all__ = [
    "analysis_cmds", "app", "attribution_cmds", "capture_cmd", "changes_cmds", "collectives_cmd", "history_cmds",
    "ingest_cmds", "memory_cmd", "report_cmds", "roofline_cmd", "synth_cmd",
]


@app.callback()
def main() -> None:
    """tracewh: ingest Kineto traces into a warehouse, analyse them, track them over time."""


@app.command()
def version() -> None:
    """Print the tracewh version.

    Example: tracewh version
    """
    typer.echo(__version__)


# last: every command is registered by now (help shows PATH, N, TEXT, never Python types)
apply_metavars(app)
