"""Tiny traces linked and written together (tracewh.ingest.group) give the rows of the
one-file-at-a-time path: every table compared row for row.

Rows are read straight from the Delta snapshots (helpers_ingest: deltalake + pyarrow),
never through tracewh's views; only what differs between two ingests of the same bytes
legitimately (ingest ids, ingest times, attempt ids) is left out of the comparison.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers_ingest import delta_arrow, incomplete_runs, orphan_ingests, staging_leftovers

from tracewh.api import Warehouse
from tracewh.ingest import group as group_mod
from tracewh.ingest.batch import ingest_paths
from tracewh.ingest.pipeline import IngestOptions
from tracewh.storage.store import Store
from tracewh.synth import SynthConfig, write_trace

#: Columns that differ between two ingests of the same bytes by design.
VOLATILE = {"ingest_id", "ingested_at", "attempt_id", "started_at", "finished_at", "seconds"}
#: The tables a run writes (every one compared), and the two logs.
TABLES = (
    "events", "gpu_ops", "steps", "instants", "counters", "flows", "flow_args", "python",
    "module_spans", "annotation_spans", "graph_nodes", "collectives", "threads", "fingerprints", "runs",
    "ingest_log",
)


def _rows(root: Path, table: str) -> list[str]:
    uri = root / "tables" / table
    if not (uri / "_delta_log").is_dir():
        return []
    data = delta_arrow(uri)
    keep = [c for c in data.column_names if c not in VOLATILE]
    rows = data.select(keep).to_pylist()
    if table == "ingest_log":  # the log's path/outcome/error per attempt; ids and times differ
        rows = [{k: _skip_reason(r, r[k]) if k == "error" else r[k]
                 for k in ("path", "sha256", "run_id", "outcome", "error", "bytes", "n_events")}
                for r in rows]
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in rows)


def _skip_reason(result: dict[str, Any], error: str | None) -> str | None:
    """A skip's reason without where the earlier copy was found: committed by the batch's
    earlier flush or still in the batch (the batch flushes every 10 s: a matter of timing)."""
    if result["outcome"] == "skipped" and error:
        return error.split(" (run ")[0]
    return error


def _folder(tmp: Path, shared: Path | None) -> Path:
    """Tiny real traces (when ../shared/traces is there), synthetic ones, a twin, bad files."""
    folder = tmp / "in"
    folder.mkdir()
    if shared is not None:
        for src in sorted(shared.glob("*.json*")):
            if src.stat().st_size <= 50_000:  # every shared trace this small (and one not Kineto)
                shutil.copy(src, folder / src.name)
    configs = [
        SynthConfig(steps=1, layers=1, seed=1),
        SynthConfig(steps=2, layers=1, seed=2, python=True),
        SynthConfig(steps=2, layers=2, seed=3, graph_capture=True),
        SynthConfig(steps=1, layers=1, seed=4, compiled=True, profiler_steps=False),
        SynthConfig(steps=2, layers=1, seed=5, flavor="rocm"),
        SynthConfig(steps=1, layers=1, seed=6, ranks=2),
    ]
    for i, cfg in enumerate(configs):
        write_trace(folder / f"synth-{i}.pt.trace.json.gz", cfg)
    shutil.copy(folder / "synth-0.pt.trace.json.gz", folder / "synth-twin.pt.trace.json.gz")
    (folder / "bad-truncated.json.gz").write_bytes(
        gzip.compress(b'{"traceEvents": [{"ph": "X", "ts": 1, '))
    (folder / "bad-empty.json").write_text('{"traceEvents": []}')
    return folder


def _ingest(root: Path, folder: Path, options: IngestOptions) -> dict[str, Any]:
    report = ingest_paths(Store(root), [folder], options, jobs=1)
    out = {}
    for r in report.results:
        d = {k: v for k, v in r.to_dict().items() if k not in VOLATILE | {"path"}}
        d["error"] = _skip_reason(d, d["error"])
        out[Path(r.path).name] = d
    return out


def _shared() -> Path | None:
    from conftest import SHARED_TRACES

    return SHARED_TRACES if SHARED_TRACES.is_dir() else None


@pytest.mark.slow  # 23-29 s each on the shared traces: make test-all (the default suite ingests its
# small files through the group everywhere; the row-for-row equality to one by one runs here)
@pytest.mark.parametrize("opts", [{}, {"steps": 1, "skip_python": True}], ids=["default", "steps1"])
def test_grouped_rows_equal_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opts: dict[str, Any]
) -> None:
    shared = _shared()
    folder = _folder(tmp_path, shared)
    sizes: list[int] = []
    real = group_mod.TinyGroup._together

    def spy(self: group_mod.TinyGroup, members: list[group_mod.Member]) -> Any:
        sizes.append(len(members))
        return real(self, members)

    monkeypatch.setattr(group_mod.TinyGroup, "_together", spy)
    # small groups: several groups in one batch, a group run by the batch's flush
    monkeypatch.setattr(group_mod, "GROUP_FILES", 5)
    alone = tmp_path / "alone"
    grouped = tmp_path / "grouped"
    want = _ingest(alone, folder, IngestOptions(group_tiny=False, **opts))
    assert sizes == []
    got = _ingest(grouped, folder, IngestOptions(**opts))
    # every staged file took part in a group (a group of one goes the one-file way)
    assert sizes and max(sizes) == 5 and sum(sizes) >= (20 if shared else 5), sizes
    assert got == want  # outcome, error, events, anomalies, steps of every file
    outcomes = {name: r["outcome"] for name, r in got.items()}
    assert outcomes["bad-truncated.json.gz"] == "failed"
    assert outcomes["bad-empty.json"] == "failed"
    assert outcomes["synth-twin.pt.trace.json.gz"] == "skipped"
    assert sum(o == "ingested" for o in outcomes.values()) >= (20 if shared else 6)
    for table in TABLES:
        assert _rows(grouped, table) == _rows(alone, table), table
    assert incomplete_runs(grouped) == [] and orphan_ingests(grouped) == set()
    assert staging_leftovers(grouped) == []
    # idempotent: the same folder again is all skipped or failed, nothing written
    again = _ingest(grouped, folder, IngestOptions(**opts))
    assert {r["outcome"] for r in again.values()} <= {"skipped", "failed"}
    for table in TABLES[:-1]:
        assert _rows(grouped, table) == _rows(alone, table), table


@pytest.mark.parametrize("big_rows", [1, 300])
def test_big_runs_written_alone_equal_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, big_rows: int
) -> None:
    """A group's big runs (their own ``COPY``) beside its small ones (the partitioned ``COPY``):
    every table's rows are those of each trace ingested alone."""
    folder = _folder(tmp_path, None)
    real_copy = group_mod.copy_runs
    split: list[tuple[str, int, int]] = []  # (table, runs alone, runs of the group)

    def spy(*args: Any, **kwargs: Any) -> Any:
        runs = args[5]
        split.append((args[2], len([i for i in kwargs.get("alone", ()) if i in runs]), len(runs)))
        return real_copy(*args, **kwargs)

    monkeypatch.setattr(group_mod, "copy_runs", spy)
    monkeypatch.setattr(group_mod, "BIG_RUN_ROWS", big_rows)
    want = _ingest(tmp_path / "alone", folder, IngestOptions(group_tiny=False))
    split.clear()
    got = _ingest(tmp_path / "grouped", folder, IngestOptions())
    assert got == want
    events = [(alone, n) for table, alone, n in split if table == "events"]
    assert events and all(n > 1 for _, n in events)
    if big_rows == 1:  # every run alone
        assert all(alone == n for alone, n in events), events
    else:  # some alone, some partitioned together
        assert any(0 < alone < n for alone, n in events), events
    for table in TABLES:
        assert _rows(tmp_path / "grouped", table) == _rows(tmp_path / "alone", table), table


#: Medium real traces (40k-110k events): the nightly folder's biggest members (NCCL kernels,
#: memcpy/memset and instants, epoch-based decimal timestamps, the python_function module
#: tree), grouped here with the group's limits raised (a group of them measured no faster
#: than each alone with two processes: docs/performance.md, "Nightly folders").
MEDIUM = (
    "nccl_parser_config__nccl_data.json.gz",
    "negative_queue_length_values_check__rank0.json.gz",
    "ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "tracelens__h100__timesformer-base-k400.json.gz",
)


@pytest.mark.slow
def test_grouped_medium_traces_equal_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Medium traces written in one group give the rows each gives alone (every table)."""
    shared = _shared()
    if shared is None:
        pytest.skip("../shared/traces is absent")
    folder = tmp_path / "in"
    folder.mkdir()
    for name in (*MEDIUM, "trace_compare__base__base.json.gz"):
        shutil.copy(shared / name, folder / name)
    sizes: list[int] = []
    real = group_mod.TinyGroup._together

    def spy(self: group_mod.TinyGroup, members: list[group_mod.Member]) -> Any:
        sizes.append(len(members))
        return real(self, members)

    monkeypatch.setattr(group_mod.TinyGroup, "_together", spy)
    monkeypatch.setattr(group_mod, "TINY_EVENTS", 150_000)
    monkeypatch.setattr(group_mod, "GROUP_EVENTS", 400_000)
    want = _ingest(tmp_path / "alone", folder, IngestOptions(group_tiny=False))
    got = _ingest(tmp_path / "grouped", folder, IngestOptions())
    assert sum(sizes) == len(MEDIUM) + 1, sizes  # every one of them was grouped
    assert got == want
    for table in TABLES:
        assert _rows(tmp_path / "grouped", table) == _rows(tmp_path / "alone", table), table


def test_a_failing_group_falls_back_to_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(4):
        write_trace(folder / f"r{i}.pt.trace.json.gz", SynthConfig(steps=1, layers=1, seed=40 + i))

    def broken(self: group_mod.TinyGroup, members: list[group_mod.Member]) -> Any:
        raise RuntimeError("grouped SQL failed")

    monkeypatch.setattr(group_mod.TinyGroup, "_together", broken)
    root = tmp_path / "wh"
    report = Warehouse(root).ingest([folder], jobs=1)
    assert [r.outcome for r in report.results] == ["ingested"] * 4
    assert len(_rows(root, "runs")) == 4
    assert incomplete_runs(root) == [] and orphan_ingests(root) == set()
    assert staging_leftovers(root) == []
    assert Warehouse(root).verify().ok


def test_a_group_failing_after_reading_held_members_stages_them_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group lets its members' held chunks go once its tables hold their rows; when its
    SQL then fails, each member is staged again from its file and written alone."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        write_trace(folder / f"r{i}.pt.trace.json.gz", SynthConfig(steps=1, layers=1, seed=60 + i))
    want = Warehouse(tmp_path / "ok").ingest([folder], jobs=1)
    assert want.ok
    real = group_mod.copy_runs
    calls = {"copy_runs": 0, "staged": 0}
    real_stage = group_mod.stage_file

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls["copy_runs"] += 1
        raise RuntimeError("grouped SQL failed after staging")

    def restage(*args: Any, **kwargs: Any) -> Any:
        calls["staged"] += 1
        return real_stage(*args, **kwargs)

    monkeypatch.setattr(group_mod, "copy_runs", failing)
    monkeypatch.setattr(group_mod, "stage_file", restage)
    root = tmp_path / "wh"
    report = Warehouse(root).ingest([folder], jobs=1)
    assert calls["copy_runs"] >= 1 and calls["staged"] == 3  # each member staged again
    assert [r.outcome for r in report.results] == ["ingested"] * 3
    for table in TABLES:
        assert _rows(root, table) == _rows(tmp_path / "ok", table), table
    assert incomplete_runs(root) == [] and orphan_ingests(root) == set()
    assert staging_leftovers(root) == []
    monkeypatch.setattr(group_mod, "copy_runs", real)


def test_a_restaged_member_whose_bytes_changed_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Staged again after its group failed, a file rewritten in place (same size, same
    modification time, same inode) fails: its bytes are not those its run id hashes."""
    import os

    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(2):
        write_trace(folder / f"r{i}.pt.trace.json", SynthConfig(steps=1, layers=1, seed=70 + i))
    victim = folder / "r0.pt.trace.json"
    real_stage = group_mod.stage_file

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("grouped SQL failed after staging")

    def rewrite_then_stage(path: Path, *args: Any, **kwargs: Any) -> Any:
        if path == victim:
            st = victim.stat()
            data = victim.read_bytes()
            with open(victim, "r+b") as f:  # same inode, same size
                f.write(data.replace(b"aten::", b"aten;;", 1))
            os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
        return real_stage(path, *args, **kwargs)

    monkeypatch.setattr(group_mod, "copy_runs", failing)
    monkeypatch.setattr(group_mod, "stage_file", rewrite_then_stage)
    report = Warehouse(tmp_path / "wh").ingest([folder], jobs=1)
    outcomes = {Path(r.path).name: (r.outcome, r.error or "") for r in report.results}
    assert outcomes["r1.pt.trace.json"][0] == "ingested"
    assert outcomes["r0.pt.trace.json"][0] == "failed"
    assert "changed while it was read" in outcomes["r0.pt.trace.json"][1]


def test_held_bytes_bound_a_group(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A group runs once its members hold GROUP_HELD_BYTES of buffers in memory."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        write_trace(folder / f"r{i}.pt.trace.json.gz", SynthConfig(steps=1, layers=1, seed=80 + i))
    sizes: list[int] = []
    real = group_mod.TinyGroup._together

    def spy(self: group_mod.TinyGroup, members: list[group_mod.Member]) -> Any:
        sizes.append(len(members))
        assert all(m.staged.held for m in members)  # read from memory
        return real(self, members)

    monkeypatch.setattr(group_mod.TinyGroup, "_together", spy)
    monkeypatch.setattr(group_mod, "GROUP_HELD_BYTES", 1)
    assert Warehouse(tmp_path / "wh").ingest([folder], jobs=1).ok
    assert sizes == [1, 1, 1]


def test_a_file_changed_before_its_group_runs_fails_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    paths = []
    for i in range(3):
        p = folder / f"r{i}.pt.trace.json.gz"
        write_trace(p, SynthConfig(steps=1, layers=1, seed=50 + i))
        paths.append(p)
    real = group_mod.TinyGroup._together

    def touch_then_run(self: group_mod.TinyGroup, members: list[group_mod.Member]) -> Any:
        with open(paths[1], "ab") as f:  # still being written: its bytes are not the hashed ones
            f.write(b"\n")
        return real(self, members)

    monkeypatch.setattr(group_mod.TinyGroup, "_together", touch_then_run)
    root = tmp_path / "wh"
    report = Warehouse(root).ingest([folder], jobs=1)
    by_name = {Path(r.path).name: r for r in report.results}
    assert by_name["r0.pt.trace.json.gz"].outcome == "ingested"
    assert by_name["r2.pt.trace.json.gz"].outcome == "ingested"
    assert by_name["r1.pt.trace.json.gz"].outcome == "failed"
    assert "r1.pt.trace.json.gz" in (by_name["r1.pt.trace.json.gz"].error or "")
    assert len(_rows(root, "runs")) == 2
    assert incomplete_runs(root) == [] and orphan_ingests(root) == set()
    assert Warehouse(root).verify().ok


def test_the_group_keeps_block_memory_and_runs_without_that_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group's DuckDB asks for GROUP_BLOCK_SHARE of its limit as block-allocator memory;
    a DuckDB that does not know the setting opens without it and the group still runs."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(3):
        write_trace(folder / f"r{i}.pt.trace.json.gz", SynthConfig(steps=1, layers=1, seed=90 + i))
    real = group_mod.duckdb.connect
    asked: list[dict[str, Any]] = []

    def without_block_allocator(*args: Any, **kwargs: Any) -> Any:
        config = kwargs.get("config") or {}
        if "block_allocator_memory" in config:
            asked.append(dict(config))
            raise group_mod.duckdb.InvalidInputException("options were not recognized")
        return real(*args, **kwargs)

    monkeypatch.setattr(group_mod.duckdb, "connect", without_block_allocator)
    report = Warehouse(tmp_path / "wh").ingest([folder], jobs=1)
    monkeypatch.undo()
    assert [r.outcome for r in report.results] == ["ingested"] * 3
    assert asked and asked[0] == {"memory_limit": "80MB", "threads": 1,
                                  "block_allocator_memory": f"{int(80 * 1024 * 1024 * 0.6)}B"}
    con = group_mod._connect(IngestOptions())
    try:
        got = con.execute("SELECT current_setting('block_allocator_memory')").fetchone()[0]
    finally:
        con.close()
    assert got == "48.0 MiB"


def test_a_group_of_one_file_keeps_no_block_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One small trace: its group's DuckDB asks for no block-allocator memory (the kept
    blocks only raised the ingest's peak); several: it does."""
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(2):
        write_trace(folder / f"r{i}.pt.trace.json.gz", SynthConfig(steps=1, layers=1, seed=95 + i))
    real = group_mod.duckdb.connect
    configs: list[dict[str, Any]] = []

    def recorded(*args: Any, **kwargs: Any) -> Any:
        config = kwargs.get("config") or {}
        if config.get("memory_limit") == "80MB":  # the group's (staging connections: 64MB)
            configs.append(dict(config))
        return real(*args, **kwargs)

    monkeypatch.setattr(group_mod.duckdb, "connect", recorded)
    one = Warehouse(tmp_path / "wh1").ingest([folder / "r0.pt.trace.json.gz"], jobs=1)
    assert [r.outcome for r in one.results] == ["ingested"]
    assert configs == [{"memory_limit": "80MB", "threads": 1}]
    configs.clear()
    both = Warehouse(tmp_path / "wh2").ingest([folder], jobs=1)
    assert [r.outcome for r in both.results] == ["ingested"] * 2
    assert [sorted(c) for c in configs] == [["block_allocator_memory", "memory_limit", "threads"]]
