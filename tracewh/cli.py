"""The tracewh command line: parse options, call the library, format output.

This is the only module that prints or chooses exit codes.
"""

from __future__ import annotations

import typer

from tracewh import __version__

app = typer.Typer(
    name="tracewh",
    help="A columnar trace warehouse for GPU profiler (Kineto / torch.profiler) traces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def main() -> None:
    """tracewh: ingest Kineto traces into a warehouse, analyse them, track them over time."""


@app.command()
def version() -> None:
    """Print the tracewh version.

    Example: tracewh version
    """
    typer.echo(__version__)
