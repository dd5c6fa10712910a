"""The commands the guides show run, as written, on the data they say.

Every ``bash`` block of the README, docs/getting-started.md and the how-to guides is run line
by line (``\\`` continuations joined, ``#`` comments dropped) in a scratch folder, through the
``tracewh`` of this interpreter's environment, after the demo history that `make demo` makes
(synthesised and ingested as the guides say). A command must exit 0 (``tracewh check`` may
exit 1: a regression is what the demo holds) and must not print a deprecation warning: a guide
that still shows a renamed option fails here. Lines that need what a test cannot have are left
out: ``make`` and ``pip``, a cluster address, an object store, a GPU script, or a path the
guide names as an example of the reader's own data. Slow (minutes: ~120 commands, each a
process): `make test-all` runs it.
"""

from __future__ import annotations

import os
import re
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
    r"^(make|pip|python|export|ls|set|exit|cat|source)\b|^(~|\.venv)/|\$[A-Z_]+|/data/|/srv/|/shared/|"
    r"tcp://|s3://|tracewh capture|\| *jq\b"
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
    for cmd in _commands(page):
        proc = subprocess.run(cmd, shell=True, cwd=where, env=env, capture_output=True, text=True, timeout=600)
        allowed = {0, 1} if cmd.startswith("tracewh check") else {0}
        assert proc.returncode in allowed, f"{page.name}: `{cmd}` exited {proc.returncode}: {proc.stderr[-800:]}"
        assert "deprecated" not in proc.stderr.lower(), f"{page.name}: `{cmd}`: {proc.stderr[-400:]}"
    shutil.rmtree(where / "reports", ignore_errors=True)
