"""The batch driver: ``--jobs auto`` and how it picks processes."""

from __future__ import annotations

import os
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

    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert batch.available_cores() == expected


@pytest.mark.parametrize("value", ["0", "-2", "x"])
def test_cli_rejects_bad_jobs(tmp_path: Path, value: str) -> None:
    result = CliRunner().invoke(app, ["ingest", str(tmp_path), "-w", str(tmp_path / "wh"), "--jobs", value])
    assert result.exit_code == 2
    assert "--jobs must be at least 1 or auto" in result.output
