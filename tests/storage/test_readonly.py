"""A read-only warehouse (issue 18, item 6): every read command works, ingest and
compact say so in one line. The warehouse is mounted read-only for real (a bind mount
in a private mount namespace when the tests run as root, which write permissions do
not stop; else its files lose their write bits)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_ingest import driver_env

from tracewh.synth import SynthConfig, write_trace

TRACEWH = str(Path(sys.executable).with_name("tracewh"))
READS = [
    ["runs"], ["runs", "--format", "csv"], ["verify"], ["verify", "--format", "json"],
    ["sql", "SELECT count(*) AS n FROM gpu_ops"], ["kernels"], ["gaps", "--largest", "3"],
    ["launches"], ["queue"], ["steps"], ["ops"], ["memcpy"], ["breakdown"], ["ranks"],
    ["diff", "latest", "latest"], ["history"], ["check"],
]


def _can_mount_ro() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    p = subprocess.run(["unshare", "-m", "sh", "-c", "mount --bind / /mnt 2>/dev/null || "
                        "mount -t tmpfs none /mnt"], capture_output=True)
    return p.returncode == 0


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    base = tmp_path_factory.mktemp("ro")
    write_trace(base / "t" / "a.pt.trace.json.gz", SynthConfig(steps=2, layers=1, seed=61))
    subprocess.run([TRACEWH, "ingest", str(base / "t"), "-w", str(base / "wh")], check=True,
                   capture_output=True, env=driver_env())
    (base / "more").mkdir()
    write_trace(base / "more" / "b.pt.trace.json.gz", SynthConfig(steps=1, layers=1, seed=62))
    yield base / "wh"
    for p in (base / "wh").rglob("*"):  # let the tmp_path cleanup remove it
        with_w = p.stat().st_mode | stat.S_IWUSR
        p.chmod(with_w)


def _run_read_only(root: Path, commands: list[list[str]]) -> list[subprocess.CompletedProcess[str]]:
    """Run each command on ``root`` made read-only; their results."""
    if _can_mount_ro():
        script = (f'mount --bind "{root}" "{root}" && mount -o remount,ro,bind "{root}" && '
                  f'touch "{root}/probe" 2>/dev/null && exit 99; "$@"')
        run = lambda args: subprocess.run(  # noqa: E731
            ["unshare", "-m", "sh", "-c", script, "sh", TRACEWH, *args], capture_output=True,
            text=True, env=driver_env(), timeout=600)
        return [run(args) for args in commands]
    if os.geteuid() == 0:
        pytest.skip("root without mount namespaces: a read-only warehouse cannot be made")
    for p in [root, *root.rglob("*")]:
        p.chmod(p.stat().st_mode & ~0o222)
    return [subprocess.run([TRACEWH, *args], capture_output=True, text=True, env=driver_env(),
                           timeout=600) for args in commands]


def _reads_work(wh: Path, reads: list[list[str]]) -> None:
    commands = [[*args, "-w", str(wh)] for args in reads]
    for args, p in zip(commands, _run_read_only(wh, commands), strict=True):
        assert p.returncode != 99, "the warehouse was not read-only"
        assert p.returncode in (0, 1), (args, p.returncode, p.stderr[-800:])
        assert "Traceback" not in p.stderr and "panicked" not in p.stderr, (args, p.stderr[-800:])
        if args[0] == "verify":
            assert p.returncode == 0, p.stdout


def test_read_commands_work_on_a_read_only_warehouse(wh: Path) -> None:
    _reads_work(wh, [["verify"], ["runs", "--format", "csv"], ["kernels"]])


@pytest.mark.slow
def test_every_read_command_on_a_read_only_warehouse(wh: Path, tmp_path: Path) -> None:
    _reads_work(wh, [*READS, ["report", "--out", str(tmp_path / "rep")]])


def test_writes_fail_in_one_line(wh: Path) -> None:
    more = wh.parent / "more"
    commands = [["ingest", str(more), "-w", str(wh)], ["compact", "-w", str(wh)],
                ["ingest", str(more), "-w", str(wh / "new")]]
    for args, p in zip(commands, _run_read_only(wh, commands), strict=True):
        assert p.returncode == 2, (args, p.returncode, p.stdout, p.stderr)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: warehouse "), p.stderr
        assert "is read-only" in lines[0] and "queries and verify work" in lines[0]
