"""Nothing destroyed (issue 33, classes 1, 2 and 12): output folders, missing inputs, I/O errors.

Each test runs the real command (a process, or Typer's runner in-process) against real
folders and files and checks every byte of what was there before is still there.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_ingest import driver_env
from typer.testing import CliRunner

from tracewh.cli import app
from tracewh.core.errors import OutputFolderError
from tracewh.core.outdir import MARKER, check_output_dir, output_dir
from tracewh.synth import SynthConfig, write_trace

TRACEWH = str(Path(sys.executable).with_name("tracewh"))
runner = CliRunner()


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root`` (links not followed): its kind and content hash / target."""
    out: dict[str, str] = {}
    for dirpath, dirs, files in os.walk(root, followlinks=False):
        for name in [*dirs, *files]:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_dir():
                out[rel] = f"dir:{oct(p.stat().st_mode)}"
            else:
                out[rel] = f"file:{oct(p.stat().st_mode)}:" + hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def one_line(stderr: str) -> str:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr, stderr
    assert lines[0].startswith("error: "), stderr
    return lines[0]


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("destroy")
    trace = base / "t" / "a.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=2, layers=1, seed=3301))
    root = base / "wh"
    p = subprocess.run([TRACEWH, "ingest", str(trace), "-w", str(root)], capture_output=True,
                       text=True, env=driver_env())
    assert p.returncode == 0, p.stderr
    return root


def _project(root: Path) -> Path:
    """A user's project folder: files, a hidden folder, a link, a read-only file."""
    (root / "src").mkdir(parents=True)
    (root / "src" / "main.py").write_text("print('hello')\n")
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "notes.md").write_bytes(os.urandom(4096))
    (root / "link").symlink_to("src/main.py")
    ro = root / "readonly.txt"
    ro.write_text("keep")
    ro.chmod(0o444)
    return root


# ------------------------------------------------------------------ class 1: output folders
@pytest.mark.parametrize("flag", ["--out", "--site"])
def test_report_refuses_a_project_folder_byte_identical(wh: Path, tmp_path: Path, flag: str) -> None:
    project = _project(tmp_path / "project")
    before = snapshot(project)
    p = subprocess.run([TRACEWH, "report", flag, str(project), "-w", str(wh)], capture_output=True,
                       text=True, env=driver_env())
    assert p.returncode == 2, p.stderr
    line = one_line(p.stderr)
    assert "not empty and was not written by tracewh" in line
    assert snapshot(project) == before
    assert sorted(x.name for x in tmp_path.iterdir()) == ["project"]  # nothing created beside it


@pytest.mark.parametrize("flag", ["--out", "--site"])
def test_report_into_the_warehouse_itself_is_refused(wh: Path, flag: str) -> None:
    before = snapshot(wh)
    p = subprocess.run([TRACEWH, "report", flag, str(wh), "-w", str(wh)], capture_output=True,
                       text=True, env=driver_env())
    assert p.returncode == 2, p.stderr
    one_line(p.stderr)
    assert snapshot(wh) == before
    assert subprocess.run([TRACEWH, "verify", "-w", str(wh)], capture_output=True,
                          env=driver_env()).returncode == 0


def test_report_refuses_a_file_and_a_link(wh: Path, tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("precious")
    real = _project(tmp_path / "real")
    link = tmp_path / "link"
    link.symlink_to(real)
    empty = tmp_path / "empty_real"
    empty.mkdir()
    link_empty = tmp_path / "link_empty"
    link_empty.symlink_to(empty)
    before = snapshot(tmp_path)
    for target, why in ((f, "not a folder"), (link, "symbolic link"), (link_empty, "symbolic link")):
        r = runner.invoke(app, ["report", "--out", str(target), "-w", str(wh)])
        assert r.exit_code == 2, r.output
        assert why in r.output
    assert snapshot(tmp_path) == before


def test_report_rewrites_its_own_folder_and_refuses_once_the_user_added_a_file(
    wh: Path, tmp_path: Path,
) -> None:
    out = tmp_path / "new" / "report"
    r = runner.invoke(app, ["report", "--out", str(out), "-w", str(wh)])
    assert r.exit_code == 0, r.output
    marker = json.loads((out / MARKER).read_text())
    assert marker["tool"] == "tracewh" and marker["kind"] == "report"
    assert "report.md" in marker["files"] and "charts" in marker["files"]
    # tracewh's own report folder: replaced
    r = runner.invoke(app, ["report", "--out", str(out), "-w", str(wh)])
    assert r.exit_code == 0, r.output
    # a site is not a report: refused
    r = runner.invoke(app, ["report", "--site", str(out), "-w", str(wh)])
    assert r.exit_code == 2 and "not a site" in r.output, r.output
    (out / "my-notes.txt").write_text("mine")
    before = snapshot(out)
    r = runner.invoke(app, ["report", "--out", str(out), "-w", str(wh)])
    assert r.exit_code == 2, r.output
    assert "my-notes.txt" in r.output
    assert snapshot(out) == before


def test_an_empty_folder_is_accepted(wh: Path, tmp_path: Path) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    r = runner.invoke(app, ["report", "--site", str(out), "-w", str(wh)])
    assert r.exit_code == 0, r.output
    assert (out / "index.html").is_file()
    assert json.loads((out / MARKER).read_text())["kind"] == "site"


def test_a_forged_marker_does_not_unlock_other_files(tmp_path: Path) -> None:
    """A marker that does not list a file leaves that file protected; a linked marker is ignored."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious").write_text("x")
    (out / MARKER).write_text(json.dumps({"tool": "tracewh", "kind": "report", "files": []}))
    with pytest.raises(OutputFolderError, match="precious"):
        check_output_dir(out, kind="report")
    (out / MARKER).unlink()
    real_marker = tmp_path / "m.json"
    real_marker.write_text(json.dumps({"tool": "tracewh", "kind": "report", "files": ["precious"]}))
    (out / MARKER).symlink_to(real_marker)
    with pytest.raises(OutputFolderError, match="not written by tracewh"):
        check_output_dir(out, kind="report")


def test_a_folder_filled_while_the_output_was_built_is_not_replaced(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(OutputFolderError), output_dir(out, kind="report") as tmp:
        (tmp / "report.md").write_text("new")
        out.mkdir()
        (out / "arrived.txt").write_text("meanwhile")  # another writer, during the build
    assert snapshot(out) == {"arrived.txt": snapshot(out)["arrived.txt"]}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # the temporary folder is gone


def test_capture_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    project = _project(tmp_path / "project")
    script = tmp_path / "s.py"
    script.write_text("print(1)\n")
    before = snapshot(project)
    r = runner.invoke(app, ["capture", "--steps", "1", "--out", str(project), "--", "python", str(script)])
    assert r.exit_code == 2, r.output
    assert "not empty" in r.output
    assert snapshot(project) == before


@pytest.mark.parametrize("command", [["export", "--out"], ["flame", "--out"], ["kernels", "--out"]])
def test_a_file_output_never_replaces_a_folder(wh: Path, tmp_path: Path, command: list[str]) -> None:
    project = _project(tmp_path / ("p.json.gz" if command[0] == "export" else "p.csv"))
    before = snapshot(project)
    p = subprocess.run([TRACEWH, *command, str(project), "-w", str(wh)], capture_output=True,
                       text=True, env=driver_env())
    assert p.returncode in (1, 2), p.stderr
    assert "folder" in one_line(p.stderr)
    assert snapshot(project) == before


# ------------------------------------------------------------------ class 2: missing inputs
@pytest.mark.parametrize("make", ["missing", "empty_dir"])
def test_ingest_of_nothing_creates_no_warehouse(tmp_path: Path, make: str) -> None:
    src = tmp_path / "src"
    if make == "empty_dir":
        src.mkdir()
    root = tmp_path / "wh"
    p = subprocess.run([TRACEWH, "ingest", str(src), "-w", str(root)], capture_output=True,
                       text=True, env=driver_env())
    assert p.returncode == (1 if make == "missing" else 0), p.stderr
    assert not root.exists()
    assert sorted(x.name for x in tmp_path.iterdir()) == (["src"] if make == "empty_dir" else [])


def test_ingest_of_a_missing_path_leaves_an_existing_warehouse_as_it_was(wh: Path, tmp_path: Path) -> None:
    before = snapshot(wh)
    p = subprocess.run([TRACEWH, "ingest", str(tmp_path / "nope"), "-w", str(wh)], capture_output=True,
                       text=True, env=driver_env())
    assert p.returncode == 1, p.stderr
    assert "nope" in p.stdout + p.stderr
    assert snapshot(wh) == before


# ------------------------------------------------------------------ class 12: I/O errors
def _outs(base: Path) -> list[list[str]]:
    return [["kernels", "--out", str(base / "k.csv")], ["report", "--out", str(base / "r")],
            ["report", "--site", str(base / "s")], ["export", "--out", str(base / "t.json.gz")],
            ["flame", "--out", str(base / "f.folded")]]


def test_out_under_a_file_is_one_line_exit_1(wh: Path, tmp_path: Path) -> None:
    """An --out whose parent is a file (ENOTDIR even for root): one line, exit 1, nothing written."""
    parent = tmp_path / "plain"
    parent.write_text("keep")
    for args in _outs(parent):
        p = subprocess.run([TRACEWH, *args, "-w", str(wh)], capture_output=True, text=True,
                           env=driver_env())
        assert p.returncode in (1, 2), (args, p.stderr)
        one_line(p.stderr)
    assert parent.read_text() == "keep"


def test_unwritable_out_is_one_line_exit_1(wh: Path, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as root: permissions are not enforced")
        for args in _outs(locked):
            p = subprocess.run([TRACEWH, *args, "-w", str(wh)], capture_output=True, text=True,
                               env=driver_env())
            assert p.returncode == 1, (args, p.stderr)
            assert "Permission denied" in one_line(p.stderr), args
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o700)


def test_any_os_error_in_a_command_is_one_line(wh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An OSError raised anywhere under a command (here: the disk full while writing --out)."""
    import errno

    import polars as pl

    def full(self: object, *a: object, **k: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "/some/where")

    monkeypatch.setattr(pl.DataFrame, "write_csv", full)
    r = runner.invoke(app, ["kernels", "--out", "/tmp/x-tracewh-never.csv", "-w", str(wh)])
    assert r.exit_code == 1, r.output
    assert r.output.strip() == "error: /some/where: No space left on device"
    assert not Path("/tmp/x-tracewh-never.csv").exists()
