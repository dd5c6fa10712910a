"""Re-ingest, same bytes under another name, --force, and untouched sources."""

from __future__ import annotations

import os
import shutil
import stat
import threading
from pathlib import Path

import pytest
from helpers_ingest import (
    expected_rows,
    incomplete_runs,
    load_trace,
    orphan_ingests,
    raw_counts,
    read_runs,
    run_id_of,
    sha256,
    visible_state,
)

from tracewh.api import Warehouse
from tracewh.synth import SynthConfig, write_trace


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("idem") / "a" / "rank-0.pt.trace.json.gz"
    write_trace(path, SynthConfig(steps=2, layers=1, seed=21))
    return path


def _raw_total(root: Path) -> dict[str, int]:
    return {t: sum(raw_counts(root, t).values()) for t in visible_state(root)["counts"]}


def test_reingest_of_the_same_bytes_is_skipped(tmp_path: Path, trace: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    first = wh.ingest([trace]).results[0]
    assert first.outcome == "ingested" and first.run_id == run_id_of(trace)
    before, raw_before = visible_state(wh.root), _raw_total(wh.root)
    again = wh.ingest([trace]).results[0]
    assert again.outcome == "skipped"
    assert "already ingested" in again.error and str(trace) in again.error
    assert visible_state(wh.root) == before
    assert _raw_total(wh.root) == raw_before  # no duplicate rows, not even invisible ones
    rid = first.run_id
    assert {t: c[rid] for t, c in before["counts"].items() if rid in c} == {
        t: n for t, n in expected_rows(load_trace(trace)["traceEvents"]).items() if n
    }


def test_same_bytes_under_another_name_are_skipped(tmp_path: Path, trace: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([trace]).ok
    copy = tmp_path / "elsewhere" / "renamed.json.gz"
    copy.parent.mkdir()
    shutil.copyfile(trace, copy)
    before = visible_state(wh.root)
    result = wh.ingest([copy]).results[0]
    assert result.outcome == "skipped" and "already ingested" in result.error
    assert str(trace) in result.error  # names where the run came from
    assert visible_state(wh.root) == before
    assert [r["source_path"] for r in read_runs(wh.root)] == [str(trace)]


def test_force_replaces_the_run_atomically(tmp_path: Path, trace: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([trace]).ok
    (old,) = read_runs(wh.root)
    before = visible_state(wh.root)
    seen: list[tuple[int, list[str]]] = []
    stop = threading.Event()

    def reader() -> None:  # a reader during the replace sees one complete run, always
        while not stop.is_set():
            seen.append((len(read_runs(wh.root)), incomplete_runs(wh.root)))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        result = wh.ingest([trace], force=True).results[0]
    finally:
        stop.set()
        thread.join()
    assert result.outcome == "replaced"
    (new,) = read_runs(wh.root)
    assert new["run_id"] == old["run_id"] and new["ingest_id"] != old["ingest_id"]
    assert visible_state(wh.root)["counts"] == before["counts"]
    assert seen and all(n == 1 and not bad for n, bad in seen), seen[:5]
    # the replaced rows are invisible leftovers until the next ingest cleans them up
    assert orphan_ingests(wh.root) <= {old["ingest_id"]}
    assert wh.verify().ok
    other = tmp_path / "b" / "rank-0.pt.trace.json.gz"
    write_trace(other, SynthConfig(steps=1, layers=1, seed=22))
    assert wh.ingest([other]).ok
    assert orphan_ingests(wh.root) == set()
    report = wh.verify()
    assert report.ok
    assert not [n for n in report.notes if "orphan" in n or "staging" in n], report.notes


def test_sources_are_never_modified(tmp_path: Path, trace: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    shutil.copyfile(trace, src / "good.pt.trace.json.gz")
    (src / "bad.json").write_text('{"traceEvents": [{"ph": "X", "ts": 1')
    (src / "not_kineto.json").write_text('{"nodes": []}')
    (src / "run.json").write_text('{"model": "m"}')
    files = sorted(p for p in src.iterdir())
    for p in files:
        p.chmod(0o444)
    src.chmod(0o555)  # nothing may be written next to the traces either
    try:
        before = {p: (sha256(p), p.stat().st_mtime_ns, stat.S_IMODE(p.stat().st_mode)) for p in files}
        wh = Warehouse(tmp_path / "wh")
        report = wh.ingest([src])
        assert [Path(r.path).name for r in report.ingested] == ["good.pt.trace.json.gz"]
        assert len(report.failed) == 2
        wh.ingest([src], force=True)
        after = {p: (sha256(p), p.stat().st_mtime_ns, stat.S_IMODE(p.stat().st_mode)) for p in files}
        assert after == before
        assert sorted(os.listdir(src)) == sorted(p.name for p in files)
    finally:
        src.chmod(0o755)


def test_a_run_committed_by_this_same_command_says_so(tmp_path: Path) -> None:
    """A file whose run this very ingest command committed (a cluster task run again after
    its worker died) is skipped, and the reason says it was this command."""
    from dataclasses import replace
    from datetime import UTC, datetime

    from tracewh.ingest.pipeline import IngestOptions, ingest_file
    from tracewh.storage.store import Store
    from tracewh.synth import SynthConfig, write_trace

    trace = tmp_path / "rank-0.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=1, layers=1, seed=5))
    store = Store(tmp_path / "wh")
    store.create()
    at = datetime(2026, 12, 7, 12, 0, 0, 123456, tzinfo=UTC)
    options = replace(IngestOptions(), ingested_at=at)
    assert ingest_file(store, trace, options).outcome == "ingested"
    again = ingest_file(store, trace, options)
    assert again.outcome == "skipped" and "by this ingest command" in (again.error or "")
    later = ingest_file(store, trace, replace(options, ingested_at=datetime.now(UTC)))
    assert later.outcome == "skipped" and "by this ingest command" not in (later.error or "")
    assert "already ingested (run" in (later.error or "")
