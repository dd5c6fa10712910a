"""The pulling pool: the order files are taken in, and what a lost worker or task does."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracewh.api import Warehouse
from tracewh.ingest import batch, pool
from tracewh.ingest.options import FileResult, IngestOptions
from tracewh.ingest.tasks import Task
from tracewh.storage.store import Store
from tracewh.synth import SynthConfig, write_trace


def test_pulling_workers_take_the_costliest_first(tmp_path: Path) -> None:
    """The pull order: every file once, the big files first, equal files in their order."""
    paths = []
    for k in range(150):
        p = tmp_path / f"{k:03d}.json.gz"
        p.write_bytes(b"x" * (2_000_000 if k % 25 == 0 else 1_000 + k % 3))
        paths.append(str(p))
    order = pool.pull_order(paths)
    assert sorted(order) == sorted(paths) and len(order) == len(paths)
    big = [p for p in paths if Path(p).stat().st_size > 1_000_000]
    assert order[: len(big)] == big
    costs = [pool.file_cost(p) for p in order]
    assert costs == sorted(costs, reverse=True)
    same = [p for p in order if Path(p).stat().st_size == 1_000]
    assert same == sorted(same)
    # in this process: one task with every file (a cluster's tasks: tests/ingest/test_cluster.py)
    assert batch._chunks(paths, None) == [tuple(paths)]


@dataclass(frozen=True)
class _FailsOn:
    """A strategy whose worker fails on the file whose name starts with ``how``: ``dies``
    (exits at once, as if killed) or ``raises`` (fails outside a file's own ingest)."""

    how: str

    def run(self, store: Store, paths: Iterable[str], options: IngestOptions,
            on_results: Callable[[list[FileResult]], None] | None = None) -> list[FileResult]:
        out = []
        for p in paths:
            if Path(p).name.startswith(self.how):
                if self.how == "dies":
                    time.sleep(0.5)  # the other worker reports its files first
                    os._exit(9)
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
    with contextlib.suppress(pool.Lost):
        for results in pool.pulled(task, paths, 2):
            out += results
    return out


def _each_once(out: list[FileResult], names: list[str]) -> dict[str, FileResult]:
    """``out`` by file name, each file of ``names`` reported exactly once."""
    by_name = {Path(r.path).name: r for r in out}
    assert sorted(by_name) == sorted(names) and len(out) == len(names)  # each file once
    return by_name


def test_a_worker_that_raises_fails_its_file_and_the_others_go_on(tmp_path: Path) -> None:
    names = ["raises.json", *(f"ok{i}.json" for i in range(8))]
    out = _pull(tmp_path, _FailsOn("raises"), names)
    by_name = _each_once(out, names)
    assert by_name["raises.json"].outcome == "failed"
    assert "the worker failed: RuntimeError: the worker's own bug" in (by_name["raises.json"].error or "")
    assert all(by_name[n].outcome == "skipped" for n in names[1:])  # the other worker took them


def test_a_killed_worker_fails_every_file_not_reported(tmp_path: Path) -> None:
    names = ["dies.json", *(f"ok{i}.json" for i in range(8))]
    out = _pull(tmp_path, _FailsOn("dies"), names)
    by_name = _each_once(out, names)
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
