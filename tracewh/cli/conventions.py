"""How ``tracewh --help`` reads: commands grouped by purpose, examples last, the version.

* Every command belongs to one help panel (:data:`PANELS`, in the order a user meets them:
  ingest, analyse, attribution, history, reports, capture, maintenance). A command whose
  decorator names a ``rich_help_panel`` keeps it; the others get theirs from :data:`PANELS`.
  ``tracewh --help`` lists the panels in that order, each command under its panel, in the
  order given here.
* A command's docstring ends with ``Example:`` lines. :func:`finish` moves them into the
  command's epilog, so that ``tracewh CMD --help`` ends with them (after the options),
  one per line, not rewrapped.
* ``--version`` / ``-V`` prints the version (:func:`tracewh.package_version`) and exits.

Plain text, no Rich: the help is what the reference pages are generated from, and Rich
would cost every ``--help`` a quarter of a second.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterable
from typing import Any

import typer

#: The help panels in the order ``tracewh --help`` shows them, each with its commands in order.
PANELS: dict[str, tuple[str, ...]] = {
    "Ingest": ("ingest", "runs"),
    "Analyse": (
        "kernels", "gaps", "launches", "queue", "steps", "memcpy", "breakdown", "memory",
        "roofline", "ranks", "collectives", "critical-path", "sql", "schema",
    ),
    "Attribution": ("ops", "modules", "annotations"),
    "History": ("history", "diff", "check", "changes"),
    "Reports": ("report", "export", "flame"),
    "Agents": ("mcp",),
    "Capture": ("capture", "synth"),
    "Maintenance": ("verify", "compact", "migrate", "version"),
}  # fmt: skip
#: Where a command that is in no panel is listed (a test keeps it empty).
OTHER = "Other"

_EXAMPLE = re.compile(r"^\s*Examples?:\s*(.*)$")


def panel_of(name: str) -> str | None:
    """The panel :data:`PANELS` gives command ``name`` (``None``: in none)."""
    for panel, names in PANELS.items():
        if name in names:
            return panel
    return None


def split_examples(doc: str) -> tuple[str, list[str]]:
    """``doc`` without its trailing ``Example:`` lines, and those examples (commands only).

    An example paragraph is the last one of the docstring; each of its lines that starts with
    ``Example:`` (or ``Examples:``) begins a command; lines after it (indented or not) are
    that command's continuation.
    """
    paragraphs = re.split(r"\n\s*\n", doc.strip())
    last = paragraphs[-1].splitlines() if paragraphs else []
    if not last or not _EXAMPLE.match(last[0]):
        return doc.strip(), []
    examples: list[str] = []
    for line in last:
        match = _EXAMPLE.match(line)
        if match:
            if match.group(1).strip():
                examples.append(match.group(1).strip())
        elif line.strip():
            if examples:
                examples[-1] += " " + line.strip()
            else:
                examples.append(line.strip())
    return "\n\n".join(paragraphs[:-1]).strip(), examples


def epilog(examples: Iterable[str]) -> str:
    """The epilog that shows ``examples``: a heading and one command a line (``\\b``: kept as is)."""
    items = list(examples)
    title = "Example:" if len(items) == 1 else "Examples:"
    return "\b\n" + title + "\n" + "\n".join(f"  {e}" for e in items)


def finish(app: typer.Typer) -> None:
    """Give each registered command of ``app`` its panel and its examples as the epilog."""
    for info in app.registered_commands:
        callback = info.callback
        name = info.name or (callback.__name__.replace("_", "-") if callback else None)
        if name is None or callback is None:
            continue
        if info.rich_help_panel is None:
            info.rich_help_panel = panel_of(name)
        if info.help is None and info.epilog is None:
            body, examples = split_examples(inspect.getdoc(callback) or "")
            if examples:
                info.help = body
                info.epilog = epilog(examples)


def grouped(commands: Iterable[tuple[str, Any]]) -> list[tuple[str, list[tuple[str, Any]]]]:
    """``(name, command)`` pairs grouped by panel: panels in :data:`PANELS` order, ``Other`` last."""
    by_panel: dict[str, list[tuple[str, Any]]] = {}
    for name, cmd in commands:
        panel = getattr(cmd, "rich_help_panel", None) or panel_of(name) or OTHER
        by_panel.setdefault(panel, []).append((name, cmd))
    order = [*PANELS, *sorted(p for p in by_panel if p not in PANELS and p != OTHER), OTHER]

    def rank(panel: str, name: str) -> int:
        names = PANELS.get(panel, ())
        return names.index(name) if name in names else len(names)

    return [
        (panel, sorted(by_panel[panel], key=lambda item: rank(panel, item[0])))
        for panel in order
        if panel in by_panel
    ]


def renamed_option(old_value: str | None, new_value: str | None, *, old: str, new: str,
                   default: str, command: str) -> str:
    """The value of an option renamed from ``old`` to ``new``, the old spelling still accepted.

    The old spelling warns on stderr (one line); given both, with different values, is a
    usage error; given neither, ``default``.
    """
    if old_value is None:
        return default if new_value is None else new_value
    typer.echo(f"warning: `tracewh {command} {old}` is deprecated, use {new} "
               f"({old} is the output format of a command's result)", err=True)
    if new_value is not None and new_value != old_value:
        from tracewh.core.errors import UsageError

        raise UsageError(f"{old} {old_value!r} and {new} {new_value!r} disagree: give {new} only")
    return old_value


def version_callback(value: bool) -> None:
    """``--version``: print the version and exit (an eager option)."""
    if value:
        from tracewh import package_version

        typer.echo(f"tracewh {package_version()}")
        raise typer.Exit()


__all__ = [
    "OTHER", "PANELS", "epilog", "finish", "grouped", "panel_of", "renamed_option", "split_examples",
    "version_callback",
]
