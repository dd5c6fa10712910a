"""`tracewh compact` frees what it supersedes, and `verify` names those files (issue 18, item 10).

Before: the retention was clamped to one hour without a word, so `compact` then
`compact --retain-hours 0` grew a warehouse and vacuumed nothing, and `verify`
called every file replaced by compaction one "from failed commits".
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_ingest import driver_env, read_runs

from tracewh.ingest.pipeline import IngestOptions, ingest_file
from tracewh.storage.store import Store
from tracewh.synth import SynthConfig, write_trace

TRACEWH = str(Path(sys.executable).with_name("tracewh"))


def _tw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TRACEWH, *args], capture_output=True, text=True, env=driver_env())


def _data_bytes(root: Path) -> int:
    """Bytes of every Parquet data file under the tables (the logs left out)."""
    return sum(
        p.stat().st_size for p in (root / "tables").rglob("*.parquet") if "_delta_log" not in p.parts
    )


def _referenced_bytes(root: Path) -> int:
    """Bytes the current snapshots reference, from the Delta logs (independent of tracewh)."""
    from deltalake import DeltaTable

    total = 0
    for table in (root / "tables").iterdir():
        actions = DeltaTable(str(table)).get_add_actions(flatten=True)
        total += sum(int(x) for x in actions.column("size_bytes").to_pylist()) if len(actions) else 0
    return total


@pytest.mark.slow  # ~10-30 s: make test-all (the default suite's 8-minute budget)
def test_compact_then_retain_zero_frees_the_superseded_files(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    store = Store(root)
    store.create()
    night = dt.date(2025, 3, 1)
    for i in range(5):  # five runs of one day: five small files in each child partition
        path = tmp_path / "in" / f"r{i}.pt.trace.json.gz"
        write_trace(path, SynthConfig(steps=1, layers=1, seed=500 + i, night=night))
        assert ingest_file(store, path, IngestOptions()).outcome == "ingested"
    before = _data_bytes(root)
    counts = _tw("sql", "SELECT count(*) AS n FROM gpu_ops", "-w", str(root), "-f", "json").stdout

    first = _tw("compact", "-w", str(root))
    assert first.returncode == 0, first.stderr
    assert "retention 168 h" in first.stdout
    assert "kept" in first.stdout and "--retain-hours 0 frees them now" in first.stdout
    grown = _data_bytes(root)
    assert grown > before  # merged copies beside the files they replace

    report = json.loads(_tw("verify", "-w", str(root), "-f", "json").stdout)
    assert report["ok"], report
    notes = " ".join(report["notes"])
    assert "superseded data file(s)" in notes and "failed commits" not in notes, notes

    second = _tw("compact", "-w", str(root), "--retain-hours", "0", "-f", "json")
    assert second.returncode == 0, second.stderr
    done = json.loads(second.stdout)
    assert done["retain_hours"] == 0 and done["exclusive"] is True
    assert sum(t["vacuumed"] for t in done["tables"].values()) > 0
    assert sum(t["freed_bytes"] for t in done["tables"].values()) == grown - _data_bytes(root)
    assert _data_bytes(root) == _referenced_bytes(root) < grown
    assert _data_bytes(root) < before  # fewer, larger files: smaller than before compaction

    after = json.loads(_tw("verify", "-w", str(root), "-f", "json").stdout)
    assert after["ok"] and not any("superseded" in n for n in after["notes"]), after
    assert _tw("sql", "SELECT count(*) AS n FROM gpu_ops", "-w", str(root), "-f", "json").stdout == counts
    assert len(read_runs(root)) == 5


def test_a_failed_commit_is_not_called_superseded(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    store = Store(root)
    store.create()
    path = tmp_path / "in" / "r.pt.trace.json.gz"
    write_trace(path, SynthConfig(steps=1, layers=1, seed=9))
    assert ingest_file(store, path, IngestOptions()).outcome == "ingested"
    part = next((root / "tables" / "gpu_ops").glob("day=*"))
    (part / "part-deadbeef-c000.zstd.parquet").write_bytes(
        next(part.glob("*.parquet")).read_bytes()  # a file written, never committed
    )
    report = json.loads(_tw("verify", "-w", str(root), "-f", "json").stdout)
    notes = " ".join(report["notes"])
    assert "gpu_ops: 1 unreferenced data file(s) from failed commits" in notes, notes
    assert "superseded" not in notes
