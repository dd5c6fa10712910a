"""What the server teaches a model: the definitions of the figures, the skill file, a prompt.

Resources (read when the client asks):

* ``tracewh://definitions/<name>``: the definition of every figure in words, with units and
  windows: the pages of ``docs/concepts/`` when the installation has them, and always the
  headers of the ``sql/`` files (``tracewh://definitions/sql/<file>``: each view and macro
  with its grain, columns and how each value is computed);
* ``tracewh://skill``: ``SKILL.md``, the workflow an agent follows.

The prompt ``investigate_regression`` walks ``check`` -> ``changes`` -> ``diff`` ->
``kernels``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from mcp.server.fastmcp import FastMCP
from mcp.server.fastmcp.resources import FunctionResource
from pydantic import AnyUrl

from tracewh.core.sqlfiles import SQL_DIR, sql_files

__all__ = ["CONCEPTS_DIR", "investigate_regression", "register", "skill_text"]

#: The docs' concept pages (a source checkout or an editable install has them).
CONCEPTS_DIR = SQL_DIR.parent / "docs" / "concepts"


def skill_text() -> str:
    """The agent skill file shipped with the package (``tracewh/mcp/SKILL.md``)."""
    return resources.files("tracewh.mcp").joinpath("SKILL.md").read_text(encoding="utf-8")


def _header(path: Path) -> str:
    """The leading comment block of a ``sql/`` file, comment markers removed."""
    lines = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if not line.startswith("--"):
                break
            lines.append(line[2:].rstrip("\n").removeprefix(" "))
    return "\n".join(lines).strip() + "\n"


def _reader(read: Any, arg: Path) -> Any:
    return lambda: read(arg)


def register(server: FastMCP[Any]) -> None:
    """Add the resources and the prompt to ``server``."""
    server.add_resource(FunctionResource(
        uri=AnyUrl("tracewh://skill"), name="skill", title="How to investigate performance with tracewh",
        description="The workflow an agent follows with these tools, and what each figure means.",
        mime_type="text/markdown", fn=skill_text,
    ))  # fmt: skip
    pages = sorted(CONCEPTS_DIR.glob("*.md")) if CONCEPTS_DIR.is_dir() else []
    for page in pages:
        server.add_resource(FunctionResource(
            uri=AnyUrl(f"tracewh://definitions/{page.stem}"), name=f"definitions/{page.stem}",
            description=f"Definitions of the figures: {page.stem.replace('-', ' ')} (docs/concepts)",
            mime_type="text/markdown", fn=_reader(lambda p: p.read_text(encoding="utf-8"), page),
        ))  # fmt: skip
    for path in sql_files():
        stem = path.stem
        first = _header(path).splitlines()[0] if path.stat().st_size else stem
        server.add_resource(FunctionResource(
            uri=AnyUrl(f"tracewh://definitions/sql/{stem}"), name=f"definitions/sql/{stem}",
            description=f"Definitions (grain, columns, formulas) of {first}",
            mime_type="text/plain", fn=_reader(_header, path),
        ))  # fmt: skip
    server.prompt(
        name="investigate_regression", title="Investigate a regression",
        description="Walk check -> changes -> diff -> kernels to find what got slower, since when, and which kernels.",
    )(investigate_regression)


def investigate_regression(run: str = "latest", since: str = "90d") -> str:
    """The steps of a regression investigation, for ``run`` (a selector) over ``since``."""
    return f"""Investigate whether run {run!r} regressed, and why, using the tracewh tools.

1. Call `check` with run={run!r}. Read `status`. For each item of `regressions`, note the
   metric, `level_ns` and `baseline_ns` (ns per step unless `unit` says otherwise),
   `change_fraction` (0.34 = +34%), and where the change began: `since_run_id`,
   `since_day`, `since_commit`.
   If status is 'insufficient_baseline', say so and go on with step 2 anyway.
2. Call `changes` with run={run!r} and since={since!r} to see every change point of this
   run's series over time, grouped into alerts (changes that started together). Confirm the
   regression's start, and note other changes in the same group.
3. Pick run A = the last run before the change (from `runs`, or `history` with the kernel
   or category of the regression: the run just before `since_run_id`) and run B =
   `since_run_id` (or {run!r}). Call `diff` with a=A, b=B (level='kernel'; level='op' when
   the runs are on different hardware). The rows of `groups` with the largest
   `delta_per_step_ns` (status 'slower' or 'added') are what changed.
4. Call `kernels` on run B (top 10) to see how much of the step the changed kernels take.
5. Report: what regressed (metric, % and ms per step), since which run/day/commit, which
   kernels or operators account for it (their delta per step), and what to look at next
   (the commit range, `roofline` for the operators, `gaps`/`steps` if idle time grew).
Quote numbers from the tool results with their units; do not estimate.
"""
