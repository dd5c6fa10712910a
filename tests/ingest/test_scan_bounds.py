"""What a scan reads (issue 33, classes 4 and 5): no link out of the folder, no warehouse.

Real folders with real symbolic links: a trace and a ``run.json`` linked to files outside the
scanned folder (one holding a secret), and the warehouse itself inside the scanned folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_ingest import driver_env

from tracewh.api import Warehouse
from tracewh.core.errors import EmptyWarehouseError
from tracewh.synth import SynthConfig, write_trace

TRACEWH = str(Path(sys.executable).with_name("tracewh"))
SECRET = "SECRET-7f3a9c"


def _ingest(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TRACEWH, "ingest", *args, "-f", "json"], capture_output=True, text=True,
                          env=driver_env(), cwd=cwd, timeout=300)


def test_links_out_of_the_scanned_folder_are_not_followed(tmp_path: Path) -> None:
    private = tmp_path / "private"
    write_trace(private / "theirs.pt.trace.json", SynthConfig(steps=1, layers=1, seed=3401))
    (private / "notes.json").write_text('{"traceEvents": [' + SECRET + "]}")
    scanned = tmp_path / "scanned"
    write_trace(scanned / "mine.pt.trace.json", SynthConfig(steps=1, layers=1, seed=3402))
    (scanned / "theirs.pt.trace.json").symlink_to(private / "theirs.pt.trace.json")
    (scanned / "bad.json").symlink_to(private / "notes.json")
    (scanned / "sub").mkdir()
    (scanned / "sub" / "again.pt.trace.json").symlink_to(scanned / "mine.pt.trace.json")  # inside
    p = _ingest(str(scanned), "-w", str(tmp_path / "wh"))
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert [Path(r["path"]).name for r in report["ingested"]] == ["mine.pt.trace.json"]
    why = {Path(r["path"]).name: r["error"] for r in report["skipped"]}
    assert set(why) == {"theirs.pt.trace.json", "bad.json"}
    assert all("a symbolic link out of" in w for w in why.values())
    assert SECRET not in p.stdout + p.stderr
    # a file given by name is the user's choice: followed
    p = _ingest(str(scanned / "theirs.pt.trace.json"), "-w", str(tmp_path / "wh"))
    assert p.returncode == 0 and len(json.loads(p.stdout)["ingested"]) == 1, p.stdout


def test_a_linked_run_json_is_not_read(tmp_path: Path) -> None:
    private = tmp_path / "private.json"
    private.write_text(json.dumps({"token": SECRET, "labels": {"model": SECRET}}))
    scanned = tmp_path / "scanned"
    write_trace(scanned / "a.pt.trace.json", SynthConfig(steps=1, layers=1, seed=3403))
    (scanned / "run.json").symlink_to(private)
    p = _ingest(str(scanned), "-w", str(tmp_path / "wh"))
    assert p.returncode == 1, p.stdout
    (failed,) = json.loads(p.stdout)["failed"]
    assert "run.json is a symbolic link: not followed" in failed["error"]
    assert SECRET not in p.stdout + p.stderr
    with pytest.raises(EmptyWarehouseError):  # nothing committed
        Warehouse(tmp_path / "wh").runs()
    # a broken run.json beside a trace: the error names the problem, never its bytes
    (scanned / "run.json").unlink()
    (scanned / "run.json").write_text("{" + SECRET)
    p = _ingest(str(scanned), "-w", str(tmp_path / "wh"))
    assert p.returncode == 1 and "unreadable run.json" in p.stdout
    assert SECRET not in p.stdout + p.stderr


def test_a_warehouse_inside_the_scanned_folder_is_skipped(tmp_path: Path) -> None:
    project = tmp_path / "project"
    for i in range(2):
        write_trace(project / f"rank-{i}.pt.trace.json.gz", SynthConfig(steps=1, layers=1, seed=3404 + i))
    first = _ingest(".", "-w", "./wh", cwd=project)
    assert first.returncode == 0, first.stdout + first.stderr
    assert len(json.loads(first.stdout)["ingested"]) == 2
    again = _ingest(".", "-w", "./wh", cwd=project)  # now ./wh exists inside the scanned folder
    assert again.returncode == 0, again.stdout + again.stderr
    report = json.loads(again.stdout)
    assert report["failed"] == [] and report["ingested"] == []
    (wh_skip,) = [r for r in report["skipped"] if "a tracewh warehouse, not scanned" in (r["error"] or "")]
    assert Path(wh_skip["path"]) == (project / "wh").absolute()
    # the warehouse itself, given as the path to ingest: skipped, not read as traces
    own = _ingest(str(project / "wh"), "-w", str(project / "wh"))
    assert own.returncode == 0 and json.loads(own.stdout)["ingested"] == [], own.stdout
    assert Warehouse(project / "wh").sql("SELECT count(*) AS n FROM runs")["n"][0] == 2
