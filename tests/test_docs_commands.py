"""The commands the guides show run, as written, on the data they say.

Every ``bash`` block of the README, docs/getting-started.md and the how-to guides is run line
by line (``\\`` continuations joined, ``#`` comments dropped) in a scratch folder, through the
``tracewh`` of this interpreter's environment, after the demo history that `make demo` makes
(synthesised and ingested as the guides say). A command must exit 0 (``tracewh check`` may
exit 1: a regression is what the demo holds) and must not print a deprecation warning: a guide
that still shows a renamed option fails here. Lines that need what a test cannot have are left
out: ``make``, ``pip``, ``pipx`` and ``python``/``python3`` (setting up an environment, installing
from the package index; ``pipx ensurepath`` edits the reader's shell start-up files), ``claude``
(registering the MCP server writes the reader's Claude configuration), ``tracewh --install-completion`` and ``--show-completion`` (they act for the
shell they run in, the reader's: here ``sh``, which Typer does not support; the first writes into
its start-up files; tests/cli/test_conventions.py checks completion), a cluster address, an object
store, a GPU script, or a path the guide names as an example of the reader's own data. A command
whose program is not installed here is not run: the page's other commands still run and must
pass, then the test is skipped, naming the missing programs. Slow (minutes: ~120 commands, each a process):
`make test-all` runs it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
GUIDES = [
    ROOT / "README.md",
    ROOT / "docs" / "getting-started.md",
    # capture.md runs scripts under torch: tests/capture/ run those for real
    *sorted(p for p in (ROOT / "docs" / "how-to").glob("*.md") if p.name != "capture.md"),
]
#: lines not run: tools and setup, or what a test has no access to (a cluster, S3, a reader's data)
SKIP = re.compile(
    r"^(make|pipx?|python3?|claude|export|ls|set|exit|cat|source)\b|^(~|\.venv)/|\$[A-Z_]+|/data/|/srv/|/shared/|"
    r"tcp://|s3://|tracewh capture|tracewh --(install|show)-completion|\| *jq\b"
)
DEMO = ("tracewh synth data/demo --runs 14 --ranks 2 --start 2025-01-01 --steps 4 --seed 7 "
        "--regress 'flash_fwd:+30%@2025-01-13'")


def _commands(page: Path) -> list[str]:
    out = []
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            cmd = re.split(r"\s#\s|\s{2,}#", line)[0].strip()
            if cmd and not cmd.startswith("#") and not SKIP.search(cmd):
                out.append(cmd.replace('; echo "exit $?"', ""))
    return out


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    tracewh = Path(sys.executable).parent / "tracewh"
    if not tracewh.exists():
        pytest.skip("no tracewh console script beside this interpreter")
    where = tmp_path_factory.mktemp("guides")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEWH_")}
    env.update(PATH=f"{tracewh.parent}{os.pathsep}{env.get('PATH', '')}", COLUMNS="120")
    for cmd in (DEMO, "tracewh ingest data/demo"):
        subprocess.run(cmd, shell=True, cwd=where, env=env, check=True, capture_output=True, timeout=900)
    return where, env


PAGES = [p for p in GUIDES if _commands(p)]


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_the_commands_of_a_guide_run(page: Path, scratch: tuple[Path, dict[str, str]]) -> None:
    where, env = scratch
    missing: dict[str, int] = {}
    for cmd in _commands(page):
        program = _program(cmd)
        if not _installed(program, env):
            missing[program] = missing.get(program, 0) + 1
            continue
        proc = subprocess.run(cmd, shell=True, cwd=where, env=env, capture_output=True, text=True, timeout=600)
        allowed = {0, 1} if cmd.startswith("tracewh check") else {0}
        assert proc.returncode in allowed, f"{page.name}: `{cmd}` exited {proc.returncode}: {proc.stderr[-800:]}"
        assert "deprecated" not in proc.stderr.lower(), f"{page.name}: `{cmd}`: {proc.stderr[-400:]}"
    shutil.rmtree(where / "reports", ignore_errors=True)
    if missing:
        pytest.skip(f"{page.name}: not installed here, not run: "
                    + ", ".join(f"{p} ({n} command{'s' * (n > 1)})" for p, n in missing.items()))


def _program(cmd: str) -> str:
    """The program a guide's command line starts (its first word after ``NAME=value``s)."""
    words = shlex.split(cmd)
    return next((w for w in words if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w)), words[0])


def _installed(program: str, env: dict[str, str]) -> bool:
    """Whether the shell the commands run in finds ``program`` (on PATH, or a builtin)."""
    if shutil.which(program, path=env["PATH"]) is not None:
        return True
    found = subprocess.run(f"command -v {shlex.quote(program)}", shell=True, env=env,
                           capture_output=True, check=False)  # fmt: skip
    return found.returncode == 0
