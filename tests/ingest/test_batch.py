"""The batch driver: ``--jobs auto`` and how it picks processes."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.core.errors import UsageError
from tracewh.ingest import batch
from tracewh.ingest.batch import AUTO_MIN_BYTES, AUTO_MIN_FILES, resolve_jobs
from tracewh.ingest.options import FileResult, IngestOptions
from tracewh.ingest.tasks import Task
from tracewh.storage.store import Store
from tracewh.synth import SynthConfig, write_trace


def _files(tmp_path: Path, n: int, size: int, suffix: str = ".json.gz") -> list[Path]:
    out = []
    for i in range(n):
        p = tmp_path / f"f{i}{suffix}"
        p.write_bytes(b"x" * size)
        out.append(p)
    return out


def test_auto_uses_every_core_for_one_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch, "available_cores", lambda: 4)
    assert resolve_jobs("auto", _files(tmp_path, 1, 10)) == 4  # split when big, else one process
    assert resolve_jobs("auto", []) == 4


def test_auto_runs_many_files_side_by_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch, "available_cores", lambda: 4)
    assert resolve_jobs("auto", _files(tmp_path, AUTO_MIN_FILES, 10)) == 4
    # fewer files than cores but much JSON: one process per file
    (tmp_path / "big").mkdir()
    (tmp_path / "raw").mkdir()
    half = AUTO_MIN_BYTES // 10 // 2 + 1
    assert resolve_jobs("auto", _files(tmp_path / "big", 2, half)) == 2
    # the same bytes uncompressed are 10x less JSON: stays in this process
    assert resolve_jobs("auto", _files(tmp_path / "raw", 2, half, ".json")) == 1


def test_auto_keeps_a_few_small_files_in_this_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batch, "available_cores", lambda: 4)
    assert resolve_jobs("auto", _files(tmp_path, AUTO_MIN_FILES - 1, 10)) == 1


def test_explicit_jobs_stay(tmp_path: Path) -> None:
    files = _files(tmp_path, 3, 10)
    assert resolve_jobs(1, files) == 1
    assert resolve_jobs(3, files) == 3
    for bad in (0, -1, "two", True):
        with pytest.raises(UsageError, match="--jobs must be at least 1 or auto"):
            resolve_jobs(bad, files)  # type: ignore[arg-type]


def test_available_cores_follows_the_affinity_mask() -> None:
    import os

    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert batch.available_cores() == expected


@pytest.mark.parametrize("value", ["0", "-2", "x"])
def test_cli_rejects_bad_jobs(tmp_path: Path, value: str) -> None:
    result = CliRunner().invoke(app, ["ingest", str(tmp_path), "-w", str(tmp_path / "wh"), "--jobs", value])
    assert result.exit_code == 2
    assert "--jobs must be at least 1 or auto" in result.output


def test_pulling_workers_take_the_costliest_first(tmp_path: Path) -> None:
    """The pull order: every file once, the big files first, equal files in their order."""
    paths = []
    for k in range(150):
        p = tmp_path / f"{k:03d}.json.gz"
        p.write_bytes(b"x" * (2_000_000 if k % 25 == 0 else 1_000 + k % 3))
        paths.append(str(p))
    order = batch.pull_order(paths)
    assert sorted(order) == sorted(paths) and len(order) == len(paths)
    big = [p for p in paths if Path(p).stat().st_size > 1_000_000]
    assert order[: len(big)] == big
    costs = [batch.file_cost(p) for p in order]
    assert costs == sorted(costs, reverse=True)
    same = [p for p in order if Path(p).stat().st_size == 1_000]
    assert same == sorted(same)
    # in this process: one task with every file; on a cluster: one file per task
    assert batch._chunks(paths, None) == [tuple(paths)]


@dataclass(frozen=True)
class _Dies:
    """A strategy whose worker dies (as if killed) on the file named ``dies``."""

    def run(self, store: Store, paths: Iterable[str], options: IngestOptions,
            on_results: Callable[[list[FileResult]], None] | None = None) -> list[FileResult]:
        out = []
        for p in paths:
            if Path(p).name.startswith("dies"):
                time.sleep(0.5)  # the other worker reports its files first
                os._exit(9)
            out.append(FileResult(p, "skipped"))
            if on_results is not None:
                on_results(out[-1:])
        return out


@dataclass(frozen=True)
class _Raises:
    """A strategy that fails outside a file's own ingest on the file named ``raises``."""

    def run(self, store: Store, paths: Iterable[str], options: IngestOptions,
            on_results: Callable[[list[FileResult]], None] | None = None) -> list[FileResult]:
        out = []
        for p in paths:
            if Path(p).name.startswith("raises"):
                raise RuntimeError("the worker's own bug")
            out.append(FileResult(p, "skipped"))
            if on_results is not None:
                on_results(out[-1:])
        return out


def _pull(tmp_path: Path, strategy: object, names: list[str]) -> list[FileResult]:
    paths = []
    for name in names:
        (tmp_path / name).write_bytes(b"{}")
        paths.append(str(tmp_path / name))
    task = Task(Store(tmp_path / "wh"), (), IngestOptions(), strategy)  # type: ignore[arg-type]
    out: list[FileResult] = []
    with contextlib.suppress(batch._Lost):
        for results in batch._pulled(task, paths, 2):
            out += results
    return out


def test_a_worker_that_raises_fails_its_file_and_the_others_go_on(tmp_path: Path) -> None:
    names = ["raises.json", *(f"ok{i}.json" for i in range(8))]
    out = _pull(tmp_path, _Raises(), names)
    by_name = {Path(r.path).name: r for r in out}
    assert sorted(by_name) == sorted(names) and len(out) == len(names)  # each file once
    assert by_name["raises.json"].outcome == "failed"
    assert "the worker failed: RuntimeError: the worker's own bug" in (by_name["raises.json"].error or "")
    assert all(by_name[n].outcome == "skipped" for n in names[1:])  # the other worker took them


def test_a_killed_worker_fails_every_file_not_reported(tmp_path: Path) -> None:
    names = ["dies.json", *(f"ok{i}.json" for i in range(8))]
    out = _pull(tmp_path, _Dies(), names)
    by_name = {Path(r.path).name: r for r in out}
    assert sorted(by_name) == sorted(names) and len(out) == len(names)  # each file once
    assert by_name["dies.json"].outcome == "failed"
    assert "the worker failed: BrokenProcessPool" in (by_name["dies.json"].error or "")
    assert sum(r.outcome == "skipped" for r in out) >= 1  # reported before the pool broke


@dataclass(frozen=True)
class _Unpicklable:
    """A strategy no worker can receive (it holds a lambda): no task ever runs."""

    hook: Callable[[], None] = lambda: None

    def run(self, *args: Any, **kwargs: Any) -> list[FileResult]:
        raise AssertionError("never runs")


def test_a_task_that_never_reaches_a_worker_fails_its_files_without_hanging(tmp_path: Path) -> None:
    names = [f"ok{i}.json" for i in range(3)]
    done: list[list[FileResult]] = []
    thread = threading.Thread(target=lambda: done.append(_pull(tmp_path, _Unpicklable(), names)),
                              daemon=True)
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "the parent still waits for results that never come"
    (out,) = done
    assert sorted(Path(r.path).name for r in out) == names
    assert all(r.outcome == "failed" and "the worker failed" in (r.error or "") for r in out)


def test_pulling_workers_report_every_file_once(tmp_path: Path) -> None:
    """A folder ingested by two pulling workers: each file's result once, as in one process."""
    src = tmp_path / "src"
    for i in range(5):
        write_trace(src / f"n{i}.pt.trace.json", SynthConfig(size_bytes=30_000, layers=1, seed=40 + i))
    (src / "bad.pt.trace.json").write_text("{ not json")
    seen: list[FileResult] = []
    two = Warehouse(tmp_path / "two").ingest([src], jobs=2, on_result=seen.append)
    one = Warehouse(tmp_path / "one").ingest([src], jobs=1)
    assert sorted(r.path for r in seen) == sorted(r.path for r in two.results)
    assert len(seen) == 6 and len(two.ingested) == 5 and len(two.failed) == 1
    assert [(r.path, r.outcome, r.run_id) for r in two.results] == [
        (r.path, r.outcome, r.run_id) for r in one.results]
