"""The tracewh command line: parse options, call the library, format output.

This package is the only place that prints or chooses exit codes.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

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
from tracewh.cli.common import app, apply_metavars, handle_errors
from tracewh.cli.conventions import finish, version_callback
from tracewh.query.settings import DEFAULT_MEMORY_LIMIT, QuerySettings

__all__ = [
    "analysis_cmds",
    "app",
    "attribution_cmds",
    "capture_cmd",
    "changes_cmds",
    "collectives_cmd",
    "critical_path_cmd",
    "history_cmds",
    "ingest_cmds",
    "mcp_cmd",
    "memory_cmd",
    "report_cmds",
    "roofline_cmd",
    "run",
    "schema_cmd",
    "synth_cmd",
]


@app.callback()
def main(
    ctx: typer.Context,
    version: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=version_callback, help="Print the version and exit."),
    memory_limit: str = typer.Option(DEFAULT_MEMORY_LIMIT, "--memory-limit", envvar="TRACEWH_MEMORY_LIMIT", metavar="SIZE", help="DuckDB memory limit of the queries (e.g. 2GB, 512MiB); beyond it they spill to a private temporary folder."),
    temp_dir: Path | None = typer.Option(None, "--temp-dir", envvar="TRACEWH_TEMP_DIR", metavar="PATH", help="Where the queries' private spill folder is made (default: the system's temporary folder); it is removed afterwards."),
) -> None:
    """A columnar trace warehouse for GPU profiler (Kineto / torch.profiler) traces.

    Ingest traces into a warehouse, analyse one run, attribute GPU time to code, track runs
    over time. `tracewh COMMAND --help` shows a command's options and examples.
    """
    with handle_errors():
        ctx.obj = QuerySettings(memory_limit, temp_dir)


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


def run() -> None:
    """The ``tracewh`` script and ``python -m tracewh``: :data:`app`, then an exit that skips
    the interpreter's last full garbage collections.

    At exit Python traverses every object it tracks two or three times (~10 ms each for the
    ~30,000 of a query command with DuckDB's module, ~25 ms with Polars'), to free memory the
    process is about to give back anyway: ~25 ms of `tracewh kernels`. When the command has
    ended (the app's ``SystemExit``, dropped first with the frames its chain holds), the
    garbage of that moment is collected once (its finalizers run, as at any exit: a DuckDB
    connection left in a cycle closes and removes its spill files) and what is left is
    frozen (:func:`gc.freeze`) so the exit does not traverse it. Any other exception (Ctrl-C)
    propagates as before, unfrozen. ``atexit`` handlers and ``weakref.finalize`` callbacks
    (the spill folders) run as before.
    """
    try:
        app(prog_name="tracewh")
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    gc.collect()
    gc.freeze()
    sys.exit(code)
