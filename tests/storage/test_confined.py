"""A table's log naming a file outside the table (issue 33, class 15).

A real warehouse gets a real commit appended to its ``runs`` log whose ``add`` names a
Parquet file outside the table (``../`` traversal, an absolute path, or a link inside the
table pointing out). ``verify`` reports it; readers, the sandboxed ``sql`` and ``compact``
refuse with one line naming it, read nothing from it, and ``compact`` changes nothing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers_ingest import driver_env

from tracewh.api import Warehouse
from tracewh.core.errors import WarehouseError
from tracewh.storage.confined import TableBounds
from tracewh.synth import SynthConfig, write_trace

TRACEWH = str(Path(sys.executable).with_name("tracewh"))


def _tree(root: Path) -> dict[str, str]:
    """Every file of the warehouse but its lock files (readers and writers create those)."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink() and "_locks" not in p.relative_to(root).parts}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("confined")
    for i in range(2):  # two runs: two small runs files, so compact has something to merge
        trace = base / "t" / f"r{i}.pt.trace.json.gz"
        write_trace(trace, SynthConfig(steps=1, layers=1, seed=3393 + i))
        p = subprocess.run([TRACEWH, "ingest", str(trace), "-w", str(base / "wh")],
                           capture_output=True, text=True, env=driver_env())
        assert p.returncode == 0, p.stderr
    return base / "wh"


@pytest.fixture
def wh(template: Path, tmp_path: Path) -> Path:
    shutil.copytree(template, tmp_path / "wh", symlinks=True)
    return tmp_path / "wh"


def _plant(wh: Path, how: str) -> tuple[Path, str]:
    """A copy of a runs file outside the table, and a commit adding it the way ``how`` says."""
    table = wh / "tables" / "runs"
    (real,) = sorted(table.glob("*.parquet"))[:1]
    outside = wh.parent / "outside" / "private.parquet"
    outside.parent.mkdir()
    shutil.copy(real, outside)
    if how == "traversal":
        rel = "../../../outside/private.parquet"
    elif how == "absolute":
        rel = str(outside)
    else:  # a link inside the table, to the file outside
        rel = "part-link-c000.zstd.parquet"
        (table / rel).symlink_to(outside)
    log = table / "_delta_log"
    version = max(int(p.stem) for p in log.glob("*.json")) + 1
    add = {"add": {"path": rel, "partitionValues": {}, "size": outside.stat().st_size,
                   "modificationTime": int(time.time() * 1000), "dataChange": True}}
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
    (log / f"{version:020d}.json").write_text(json.dumps(info) + "\n" + json.dumps(add) + "\n")
    return outside, rel


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TRACEWH, *args], capture_output=True, text=True, env=driver_env())


@pytest.mark.parametrize("how", ["traversal", "absolute", "link"])
def test_a_file_outside_the_table_is_refused_everywhere(wh: Path, how: str) -> None:
    outside, rel = _plant(wh, how)
    before = _tree(wh)
    outside_bytes = outside.read_bytes()

    v = _run("verify", "-w", str(wh))
    assert v.returncode == 1, v.stdout + v.stderr
    assert "runs: the log names a data file that" in v.stdout and rel in v.stdout, v.stdout

    for args in (["sql", "SELECT count(*) AS n FROM runs"], ["kernels"]):
        p = _run(*args, "-w", str(wh))
        assert p.returncode in (1, 2), (args, p.stdout)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and ("outside the table" in lines[0] or "link" in lines[0]), p.stderr
        assert "Traceback" not in p.stderr

    c = _run("compact", "--retain-hours", "0", "-w", str(wh))
    assert c.returncode in (1, 2), c.stdout
    assert "outside the table" in c.stderr or "link to a file outside" in c.stderr, c.stderr
    assert _tree(wh) == before  # nothing merged, nothing vacuumed, no commit
    assert outside.read_bytes() == outside_bytes

    with pytest.raises(WarehouseError, match="its log names a data file"):
        Warehouse(wh).runs()


def test_bounds_lexical_and_links(tmp_path: Path) -> None:
    root = tmp_path / "t"
    (root / "day=2025-01-01").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / "day=2025-01-02").symlink_to(tmp_path / "elsewhere")
    b = TableBounds(str(root), remote=False)
    assert b.problem(str(root / "day=2025-01-01" / "a.parquet")) is None
    assert b.problem(str(root / "a.parquet")) is None
    assert b.problem(str(root / ".." / "x.parquet")) == "lies outside the table"
    assert b.problem("/etc/passwd") == "lies outside the table"
    assert b.problem(str(root / "_delta_log" / "0.json")) is not None
    assert "link" in (b.problem(str(root / "day=2025-01-02" / "a.parquet")) or "")
    s3 = TableBounds("s3://b/wh/tables/runs", remote=True)
    assert s3.problem("s3://b/wh/tables/runs/day=1/a.parquet") is None
    for bad in ("s3://b/wh/tables/runs/../x.parquet", "s3://b/other/x.parquet",
                "s3://b/wh/tables/runs/s3://evil/x", "s3://b/wh/tables/runs/_delta_log/x"):
        assert s3.problem(bad) is not None, bad


def _plant_gpu_ops(wh: Path, day: str) -> str:
    """A commit adding to gpu_ops, in partition ``day``, a file outside the table (traversal)."""
    table = wh / "tables" / "gpu_ops"
    real = sorted(table.rglob("*.parquet"))[0]
    outside = wh.parent / "outside-gpu" / "private.parquet"
    outside.parent.mkdir(exist_ok=True)
    shutil.copy(real, outside)
    rel = "../../../outside-gpu/private.parquet"
    log = table / "_delta_log"
    version = max(int(p.stem) for p in log.glob("*.json")) + 1
    add = {"add": {"path": rel, "partitionValues": {"day": day}, "size": outside.stat().st_size,
                   "modificationTime": int(time.time() * 1000), "dataChange": True}}
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
    (log / f"{version:020d}.json").write_text(json.dumps(info) + "\n" + json.dumps(add) + "\n")
    return rel


def test_only_the_files_a_query_selects_are_checked(wh: Path) -> None:
    """A query of one run's day checks (and reads) that day's files only: a bad entry in
    another day's partition is refused by whatever reads it (a whole-table query, verify),
    not by the run's own queries; one in the run's day is refused by them too."""
    day = Warehouse(wh).runs()["day"][0].isoformat()
    rel = _plant_gpu_ops(wh, "2099-01-01")
    ok = _run("kernels", "-w", str(wh))
    assert ok.returncode == 0, ok.stderr  # the run's day holds no bad file
    whole = _run("sql", "SELECT count(*) AS n FROM gpu_ops", "-w", str(wh))
    assert whole.returncode in (1, 2) and "outside the table" in whole.stderr, whole.stderr
    v = _run("verify", "-w", str(wh))
    assert v.returncode == 1 and rel in v.stdout, v.stdout
    _plant_gpu_ops(wh, day)  # now in the run's own day
    bad = _run("kernels", "-w", str(wh))
    assert bad.returncode in (1, 2) and "outside the table" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
