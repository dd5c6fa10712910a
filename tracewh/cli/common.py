"""The Typer app, shared options and the error -> exit code mapping.

Exit codes: 0 success; 1 a file failed to ingest, a check found a regression
or verify found a problem; 2 a usage error, an unknown run, an empty or missing
warehouse, or a failed query.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import typer

from tracewh.errors import TracewhError

app = typer.Typer(
    name="tracewh",
    help="A columnar trace warehouse for GPU profiler (Kineto / torch.profiler) traces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

WAREHOUSE_HELP = "Warehouse directory (env TRACEWH_WAREHOUSE)."


def warehouse_option() -> str:
    """The ``-w/--warehouse`` option (default ./warehouse, env TRACEWH_WAREHOUSE)."""
    return typer.Option(  # type: ignore[no-any-return]
        "./warehouse", "-w", "--warehouse", envvar="TRACEWH_WAREHOUSE", help=WAREHOUSE_HELP
    )


def run_option() -> str:
    """The ``--run SELECTOR`` option."""
    return typer.Option(  # type: ignore[no-any-return]
        "latest",
        "--run",
        "-r",
        help="Run: a run_id prefix, 'latest', or KEY=VALUE matching a label or run field.",
    )


def format_option(default: str = "table") -> str:
    """The ``--format table|csv|json`` option."""
    return typer.Option(  # type: ignore[no-any-return]
        default, "--format", "-f", help="Output format: table, csv or json."
    )


@contextlib.contextmanager
def handle_errors() -> Iterator[None]:
    """Turn a :class:`TracewhError` into one line on stderr and its exit code."""
    try:
        yield
    except TracewhError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(exc.exit_code) from exc
