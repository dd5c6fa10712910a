"""The console script builds the invoked command alone, with the same behaviour as the whole app.

``tracewh.cli.common.invoked_command`` finds the command's name past ``tracewh``'s own options;
run as a process (the console script's path: ``python -m tracewh``), a command, its help, its
usage errors and ``tracewh``'s own options print what the whole app prints (forced with a
``*_COMPLETE`` variable in the environment, which makes the app build every command).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tracewh.api import Warehouse
from tracewh.cli.common import invoked_command
from tracewh.synth import SynthConfig, write_trace


@pytest.mark.parametrize(("args", "name"), [
    (["kernels", "--top", "5"], "kernels"),
    (["--memory-limit", "1GB", "kernels"], "kernels"),
    (["--memory-limit=1GB", "--temp-dir", "/tmp", "runs", "-w", "x"], "runs"),
    (["--help"], None),
    (["--version", "kernels"], None),
    ([], None),
    (["critical-path", "--help"], "critical-path"),
])
def test_invoked_command(args: list[str], name: str | None) -> None:
    assert invoked_command(args) == name


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("console")
    trace = base / "t.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=1, layers=1, seed=5))
    assert Warehouse(base / "wh").ingest([trace]).ok
    return base / "wh"


def _run(args: list[str], *, whole: bool) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_COMPLETE")}
    if whole:
        env["TRACEWH_TEST_COMPLETE"] = ""  # any *_COMPLETE variable: the whole app is built
    done = subprocess.run([sys.executable, "-m", "tracewh", *args], capture_output=True,
                          text=True, env={**env, "COLUMNS": "100"}, check=False)
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("args", [
    ["kernels", "--top", "3"],
    ["--memory-limit", "1GB", "kernels", "--top", "3", "--format", "json"],
    ["kernels", "--help"],
    ["kernels", "--no-such-option"],
    ["kernels", "--run", "no-such-run"],
    ["no-such-command"],
    ["--version"],
])
def test_one_command_behaves_as_the_whole_app(warehouse: Path, args: list[str]) -> None:
    if "--help" not in args and args[0].startswith(("kernels", "--memory")):
        args = [*args, "-w", str(warehouse)]
    assert _run(args, whole=False) == _run(args, whole=True)
