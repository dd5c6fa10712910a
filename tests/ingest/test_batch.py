"""The batch driver: ``--jobs auto`` and how it picks processes."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from tracewh.cli import app
from tracewh.core.errors import UsageError
from tracewh.ingest import batch
from tracewh.ingest.batch import AUTO_MIN_BYTES, AUTO_MIN_FILES, resolve_jobs


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


def test_pool_tasks_go_from_the_costliest_down(tmp_path: Path) -> None:
    """Tasks of a pool: every file once, the big files first, costs decreasing, small
    files sharing the last tasks, equal files in their order, at most MAX_FILES a task."""
    paths = []
    for k in range(150):
        p = tmp_path / f"{k:03d}.json.gz"
        p.write_bytes(b"x" * (2_000_000 if k % 25 == 0 else 1_000 + k % 3))
        paths.append(str(p))
    tasks = batch._chunks(paths, 2, None)
    flat = [p for t in tasks for p in t]
    assert sorted(flat) == sorted(paths) and len(flat) == len(paths)
    costs = [sum(batch.file_cost(p) for p in t) for t in tasks]
    assert all(len(t) <= batch.MAX_FILES for t in tasks)
    big = [p for p in paths if Path(p).stat().st_size > 1_000_000]
    assert set(tasks[0]) <= set(big) and flat[: len(big)] == big
    assert costs[0] == max(costs) and costs[-1] < costs[0] / 4
    assert len(tasks[-1]) > 1  # the small ones go together
    same = [p for p in flat if Path(p).stat().st_size == 1_000]
    assert same == sorted(same)
    assert batch._chunks(paths, 1, None) == [tuple(paths)]
