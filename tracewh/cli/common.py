"""The Typer app, the options every command shares, and the error -> exit code mapping.

Exit codes: 0 success; 1 a file failed to ingest, a check found a regression
or verify found a problem; 2 a usage error, an unknown run, an empty or missing
warehouse, or a failed query.

Commands declare their options with the helpers below, so that every command spells them the
same way, with the same help and the same metavars (``PATH``, ``SEL``, ``N``, ``K=V``):

    @app.command()
    def kernels(
        warehouse: str = warehouse_option(),
        run: list[str] | None = run_option(),
        top: int | None = top_option(20),
        fmt: str = format_option(),
        out: Path | None = out_option(),
    ) -> None:
        with handle_errors():
            wh = open_warehouse(warehouse)
            ref = wh.resolve_run(selector(run))
            show(wh.kernels(ref), fmt, title="kernels by total", run=ref, top=top, out=out)

:func:`apply_metavars` (called once all commands are registered) gives any option still
without a metavar one from its type (``N``, ``NUM``, ``PATH``, ``TEXT``): help never shows
Python types.
"""

from __future__ import annotations

import contextlib
import inspect
import signal
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperArgument, TyperGroup
from typer.models import ArgumentInfo, OptionInfo

try:  # Typer 0.2x vendors Click (typer._click) and does not depend on the click package
    from typer._click.exceptions import ClickException
except ImportError:  # an older Typer: Click itself
    from click.exceptions import ClickException  # type: ignore[no-redef,import-not-found,assignment,unused-ignore]

from tracewh.core.errors import TracewhError, UsageError
from tracewh.core.stopping import stop_on_signals
from tracewh.core.textsafe import escape_control

if typing.TYPE_CHECKING:
    from tracewh.api import Warehouse


class _Group(TyperGroup):
    """The command group: an argument with a metavar shows it alone, not its Python type."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        from tracewh.cli.params import install

        install(self, ctx)
        result: list[str] = super().parse_args(ctx, args)
        return result

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        # plain option values coerced without Pydantic (Typer's adapters for the rest)
        from tracewh.cli.params import install

        install(command, ctx)
        for param in getattr(command, "params", ()):
            if isinstance(param, TyperArgument) and param.metavar:
                # Typer appends "<list[Path]>" to an argument's help name; PATH says it
                setattr(param, "display_type_rich", lambda ctx: None)  # noqa: B010
        return command


class _TracewhGroup(_Group):
    """tracewh's group: ``tracewh`` alone prints the help, commands are grouped by purpose."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args and not ctx.resilient_parsing:  # `tracewh` alone: the help, on stdout, exit 0
            typer.echo(ctx.get_help())
            ctx.exit(0)
        return super().parse_args(ctx, args)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The commands in sections by purpose (:mod:`tracewh.cli.conventions`)."""
        from tracewh.cli.conventions import grouped

        pairs = []
        for name in self.list_commands(ctx):
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                pairs.append((name, cmd))
        if not pairs:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in pairs)
        for panel, cmds in grouped(pairs):
            with formatter.section(panel):
                formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in cmds])


#: Options of ``tracewh`` itself that take a value (the command's name comes after them).
_VALUE_OPTIONS = ("--memory-limit", "--temp-dir")


def invoked_command(args: list[str]) -> str | None:
    """The command ``tracewh ARGS`` runs, or None when that is not plain to see (an option
    of ``tracewh`` itself such as ``--help`` or ``--version``, or no command)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _VALUE_OPTIONS:
            skip = True
        elif not arg.startswith(tuple(f"{o}=" for o in _VALUE_OPTIONS)):
            return None if arg.startswith("-") else arg
    return None


class _Tracewh(typer.Typer):
    """The app. Run as the console script, it builds the Click command of the invoked
    command alone: Typer builds every registered command's (~50, ~20-30 ms of each start)
    before it looks at the arguments. Anything else (``tracewh --help``, shell completion,
    an unknown name, the test runner's ``invoke``) gets the whole app, as before."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import os
        import sys

        name = None
        if not args and "args" not in kwargs and not any(k.endswith("_COMPLETE") for k in os.environ):
            name = invoked_command(sys.argv[1:])
        only = [info for info in self.registered_commands if name is not None and name == (
            info.name or typer.main.get_command_name(getattr(info.callback, "__name__", "")))]
        if len(only) != 1:
            return super().__call__(*args, **kwargs)
        every = self.registered_commands
        self.registered_commands = only
        try:  # the command is built with the others out of sight, then they are back
            command = typer.main.get_command(self)
        finally:
            self.registered_commands = every
        # as Typer's own __call__ (its pretty tracebacks are off: nothing else to set up)
        if sys.excepthook != typer.main.except_hook:
            sys.excepthook = typer.main.except_hook
        return command(*args, **kwargs)


app = _Tracewh(
    cls=_TracewhGroup,
    name="tracewh",
    epilog=(
        "\b\nExamples:\n  tracewh synth traces --runs 3 && tracewh ingest traces\n"
        "  tracewh kernels --top 10"
    ),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

WAREHOUSE_HELP = "Warehouse directory or s3://... URL (env TRACEWH_WAREHOUSE)."
RUN_HELP = (
    "Run selector: latest (the default: the newest trace of the latest ingest), a run_id "
    "prefix, or KEY=VALUE on a label or run field (rank, day, device_name, job, ...). "
    "Terms combine: model=x,rank=0, or --run repeated (a run must match all)."
)
OUT_HELP = "Also write the rows shown to PATH (.csv, .json or .parquet)."
TOP_HELP = "Show the first N rows (0: all)."


def graph_notes(wh: Any, ref: Any) -> list[str]:
    """The line saying how the run's graph replays map to captures (none without replays).

    Printed beside every table whose operators, modules or annotations may come from a
    graph capture (``Warehouse.graph_match``, ``tracewh.query.graphalign.match_note``).
    """
    from tracewh.query.graphalign import match_note

    note = match_note(wh.graph_match(ref))
    return [note] if note else []


def open_warehouse(warehouse: str, **kwargs: Any) -> Warehouse:
    """The :class:`~tracewh.api.Warehouse` of ``-w``, under the global ``--memory-limit`` and
    ``--temp-dir`` (the :class:`~tracewh.query.settings.QuerySettings` tracewh's callback
    keeps in the root context)."""
    from tracewh.api import Warehouse
    from tracewh.query.settings import QuerySettings

    try:  # Typer 0.2x carries its own copy of click; older ones use click's
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - depends on the Typer installed
        from click import get_current_context  # type: ignore[no-redef]

    ctx = get_current_context(silent=True)
    settings = ctx.find_root().obj if ctx is not None else None
    if isinstance(settings, QuerySettings):
        kwargs.setdefault("memory_limit", settings.memory_limit)
        kwargs.setdefault("temp_directory", settings.temp_directory)
    return Warehouse(warehouse, **kwargs)


def warehouse_option() -> Any:
    """``-w/--warehouse PATH`` (default ./warehouse, env TRACEWH_WAREHOUSE)."""
    return typer.Option(
        "./warehouse", "-w", "--warehouse", envvar="TRACEWH_WAREHOUSE", metavar="PATH",
        help=WAREHOUSE_HELP,
    )


def run_option(help: str = RUN_HELP) -> Any:
    """``-r/--run SEL`` (repeatable; declare it ``run: list[str] | None``)."""
    return typer.Option(None, "--run", "-r", metavar="SEL", help=help, show_default=False)


def selector(*parts: list[str] | str | None) -> list[str]:
    """The selector terms of positional and ``--run`` values together (``latest`` when none)."""
    terms: list[str] = []
    for part in parts:
        if part is None:
            continue
        terms += [part] if isinstance(part, str) else list(part)
    return terms or ["latest"]


def top_option(default: int | None = 20, help: str = TOP_HELP) -> Any:
    """``-n/--top N`` (``0``: all rows)."""
    return typer.Option(default, "--top", "-n", metavar="N", help=help)


#: The output formats of a command whose result is a table.
TABLE_FORMATS = ("table", "csv", "json", "markdown")


def format_option(default: str = "table", choices: tuple[str, ...] = TABLE_FORMATS) -> Any:
    """``-f/--format table|csv|json|markdown`` (or the given choices)."""
    return typer.Option(
        default, "--format", "-f", metavar="|".join(choices),
        help=f"Output format: {', '.join(choices[:-1])} or {choices[-1]}.",
    )


def out_option(help: str = OUT_HELP) -> Any:
    """``-o/--out PATH``."""
    return typer.Option(None, "--out", "-o", metavar="PATH", help=help)


def where_option(help: str = "KEY=VALUE on a label or run field (repeatable; all must match).") -> Any:
    """``--where K=V`` (repeatable)."""
    return typer.Option(None, "--where", metavar="K=V", help=help)


def check_format(fmt: str, choices: tuple[str, ...] = TABLE_FORMATS) -> None:
    """:class:`UsageError` unless ``fmt`` is one of ``choices``."""
    if fmt not in choices:
        raise UsageError(f"--format must be one of {', '.join(choices)}, not {fmt!r}")


def check_top(top: int | None) -> None:
    """:class:`UsageError` for a negative ``--top``."""
    if top is not None and top < 0:
        raise UsageError("--top must be at least 0 (0: all rows)")


def parse_pairs(values: list[str] | None, option: str = "--where") -> dict[str, str]:
    """``KEY=VALUE`` strings to a dict (:func:`tracewh.query.runsel.parse_where`)."""
    from tracewh.query.runsel import parse_where

    return parse_where(values, option)


def _metavar_for(annotation: Any) -> str | None:
    """A metavar people know for a parameter's type (``None`` for flags)."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    base = annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        base = args[0] if len(args) == 1 else annotation
    if typing.get_origin(base) in (list, tuple):
        inner = typing.get_args(base)
        base = inner[0] if inner else str
    if base is bool:
        return None
    if base is int:
        return "N"
    if base is float:
        return "NUM"
    if base is Path or (isinstance(base, type) and issubclass(base, Path)):
        return "PATH"
    return "TEXT"


def apply_metavars(target: typer.Typer) -> None:
    """Give every option and argument of ``target``'s commands without one a metavar."""
    for info in target.registered_commands:
        callback = info.callback
        if callback is None:
            continue
        # only the parameters still without a metavar, and not flags (annotations are text
        # here: evaluating them all, typing.get_type_hints, was ~8 ms of every start)
        todo = [(name, param) for name, param in inspect.signature(callback).parameters.items()
                if isinstance(param.default, OptionInfo | ArgumentInfo) and not param.default.metavar
                and param.annotation not in ("bool", bool)]
        if not todo:
            continue
        try:
            hints = typing.get_type_hints(callback)
        except Exception:
            hints = {}
        for name, param in todo:
            default = param.default
            meta = _metavar_for(hints.get(name, param.annotation))
            if meta is None:
                continue
            if isinstance(default, ArgumentInfo):
                meta = name.upper().replace("_", "-")
            default.metavar = meta
    for group in target.registered_groups:
        if group.typer_instance is not None:
            apply_metavars(group.typer_instance)


def os_error_line(exc: OSError) -> str:
    """One line for an I/O error: the path(s) it is about and the system's reason."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    paths = [str(p) for p in (exc.filename, exc.filename2) if p is not None]
    return f"{' -> '.join(paths)}: {reason}" if paths else reason


@contextlib.contextmanager
def handle_errors() -> Iterator[None]:
    """Turn any error into one line on stderr and an exit code, never a traceback.

    A :class:`TracewhError` exits with its own code; an I/O error (``OSError``: disk full,
    permission denied, read-only file system ...) and running out of memory exit 1; any
    other exception is an internal error: one line naming its type, exit 1. Ctrl-C
    (``KeyboardInterrupt``), or SIGTERM/SIGHUP where the command turned them into
    :class:`~tracewh.core.stopping.Stopped` (every command runs under
    :func:`~tracewh.core.stopping.stop_on_signals`), prints one line and exits 128 + the signal's
    number (130 for Ctrl-C), as shells expect.
    """
    try:
        with stop_on_signals():  # SIGTERM/SIGHUP unwind like Ctrl-C: cleanup runs, workers stop
            yield
    except (typer.Exit, typer.Abort, ClickException):
        raise
    except TracewhError as exc:
        typer.echo(f"error: {escape_control(str(exc))}", err=True)
        raise typer.Exit(exc.exit_code) from exc
    except OSError as exc:
        typer.echo(f"error: {escape_control(os_error_line(exc))}", err=True)
        raise typer.Exit(1) from exc
    except MemoryError as exc:
        typer.echo("error: out of memory", err=True)
        raise typer.Exit(1) from exc
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP under stop_on_signals
        signum = int(getattr(exc, "signum", signal.SIGINT))
        name = signal.Signals(signum).name
        typer.echo(f"error: stopped by {name}: nothing more was done", err=True)
        raise typer.Exit(128 + signum) from exc
    except Exception as exc:  # the last line of defence: one line, no traceback
        text = escape_control(" ".join(str(exc).split()))[:500]
        typer.echo(f"error: internal error ({type(exc).__name__}): {text}", err=True)
        raise typer.Exit(1) from exc
