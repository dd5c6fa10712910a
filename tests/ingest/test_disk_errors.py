"""Write errors (ENOSPC, EIO, EFBIG) during an ingest, and a damaged warehouse."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from helpers_ingest import (
    driver_env,
    incomplete_runs,
    one_line_error,
    orphan_ingests,
    run_id_of,
    visible_state,
)
from typer.testing import CliRunner

import tracewh.storage.deltalog
import tracewh.storage.writes
from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.core.errors import QueryError, WarehouseError
from tracewh.synth import SynthConfig, write_trace

runner = CliRunner()


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("disk")
    out = {"a": base / "a.pt.trace.json.gz", "b": base / "b.pt.trace.json.gz",
           "medium": base / "medium.json"}
    write_trace(out["a"], SynthConfig(steps=1, layers=1, seed=61))
    write_trace(out["b"], SynthConfig(steps=1, layers=1, seed=62))
    write_trace(out["medium"], SynthConfig(size_bytes=3_000_000, layers=2, seed=63))
    return out


def _failing_writes(monkeypatch: pytest.MonkeyPatch, fail_at: Any, code: int) -> list[str]:
    """Make one Delta commit raise OSError(code): the ``fail_at``-th, or the one of that table.

    A local table's commits are written by ``tracewh.storage.deltalog.commit`` (every
    table's, through ``Store.add_files``); delta-rs still commits a ``--force``
    replace (``write_deltalake``) and object stores (``create_write_transaction``):
    all three are counted, in order.
    """
    real_write = tracewh.storage.writes.write_deltalake
    real_commit = DeltaTable.create_write_transaction
    real_log_commit = tracewh.storage.deltalog.commit
    calls: list[str] = []

    def hit(table: str) -> None:
        calls.append(table)
        if fail_at == table or fail_at == len(calls):
            raise OSError(code, os.strerror(code))

    def write(uri: str, *args: Any, **kwargs: Any) -> Any:
        hit(Path(str(uri)).name)
        return real_write(uri, *args, **kwargs)

    def commit(self: DeltaTable, *args: Any, **kwargs: Any) -> Any:
        hit(Path(str(self.table_uri)).name)
        return real_commit(self, *args, **kwargs)

    def log_commit(table_dir: str | Path, *args: Any, **kwargs: Any) -> int:
        hit(Path(str(table_dir)).name)
        return real_log_commit(table_dir, *args, **kwargs)

    monkeypatch.setattr(tracewh.storage.writes, "write_deltalake", write)
    monkeypatch.setattr(DeltaTable, "create_write_transaction", commit)
    monkeypatch.setattr(tracewh.storage.deltalog, "commit", log_commit)
    return calls


@pytest.mark.parametrize(
    ("fail_at", "code"),
    [
        (1, errno.ENOSPC),
        ("runs", errno.EIO),
        pytest.param(3, errno.EIO, marks=pytest.mark.slow),
        pytest.param("runs", errno.ENOSPC, marks=pytest.mark.slow),
    ],
    ids=["first-commit-ENOSPC", "runs-commit-EIO", "third-commit-EIO", "runs-commit-ENOSPC"],
)
def test_write_error_leaves_the_warehouse_unchanged(
    tmp_path: Path, traces: dict[str, Path], monkeypatch: pytest.MonkeyPatch, fail_at: Any, code: int
) -> None:
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([traces["a"]]).ok
    before = visible_state(wh.root)
    calls = _failing_writes(monkeypatch, fail_at, code)
    (result,) = wh.ingest([traces["b"]]).results
    assert fail_at in calls or len(calls) >= fail_at  # the fault was hit
    assert result.outcome == "failed"
    error = one_line_error(result, traces["b"])
    assert os.strerror(code) in error
    assert visible_state(wh.root) == before
    assert incomplete_runs(wh.root) == []
    assert wh.verify().ok
    monkeypatch.undo()
    (again,) = wh.ingest([traces["b"]]).results  # the disk has room again
    assert again.outcome == "ingested"
    assert orphan_ingests(wh.root) == set()
    assert wh.verify().ok


class PanicException(BaseException):
    """Stands in for pyo3's PanicException (a BaseException), what a delta-rs panic raises."""


def test_a_delta_rs_panic_fails_the_file_not_the_batch(
    tmp_path: Path, traces: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tracewh.ingest.derive as derive

    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([traces["a"]]).ok
    before = visible_state(wh.root)
    real = derive.copy_and_commit

    def panicking(*args: Any, **kwargs: Any) -> int:
        if args[2] == "gpu_ops":
            raise PanicException("called `Result::unwrap()` on an `Err` value")
        return real(*args, **kwargs)

    monkeypatch.setattr(derive, "copy_and_commit", panicking)
    # tiny traces of a batch are written together (tracewh.ingest.group): the same panic there
    import tracewh.ingest.group as group

    real_runs = group.copy_runs

    def panicking_runs(*args: Any, **kwargs: Any) -> dict[str, int]:
        if args[2] == "gpu_ops":
            raise PanicException("called `Result::unwrap()` on an `Err` value")
        return real_runs(*args, **kwargs)

    monkeypatch.setattr(group, "copy_runs", panicking_runs)
    report = wh.ingest([traces["b"], traces["medium"]])
    assert [r.outcome for r in report.results] == ["failed", "failed"]  # the batch went on
    assert "delta-rs panicked" in one_line_error(report.results[0], traces["b"])
    assert visible_state(wh.root) == before
    assert incomplete_runs(wh.root) == []
    monkeypatch.undo()
    assert wh.ingest([traces["b"]]).ok
    assert wh.verify().ok


_LIMITED = """
import json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over-limit writes fail with EFBIG instead
import tracewh.storage.store
from tracewh.api import Warehouse
root, path, limit, where = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def set_limit():
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
if where == "delta":  # staging is fine; the limit hits the table writer (DuckDB COPY + delta-rs)
    import tracewh.ingest.derive as derive
    import tracewh.ingest.group as group  # a small trace held in memory is linked there
    def limited(real):
        def write(*a, **k):
            set_limit()
            return real(*a, **k)
        return write
    derive.copy_and_commit = limited(derive.copy_and_commit)
    group.copy_runs = limited(group.copy_runs)
else:
    import tracewh.ingest.fast as fast
    fast.HOLD_EVENTS = 0  # staged to files as a bigger trace is (this one would stay in memory)
    Warehouse(root).store.create()
    set_limit()
print(json.dumps(Warehouse(root).ingest([path]).to_dict()))
"""


@pytest.mark.parametrize("where", [pytest.param("staging", marks=pytest.mark.slow), "delta"])
def test_real_file_size_limit_fails_cleanly(tmp_path: Path, traces: dict[str, Path], where: str) -> None:
    """A genuine OS write error (RLIMIT_FSIZE -> EFBIG) in the staging files or inside delta-rs."""
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([traces["a"]]).ok
    before = visible_state(wh.root)
    proc = subprocess.run(
        [sys.executable, "-c", _LIMITED, str(wh.root), str(traces["medium"]), "60000" if where == "staging" else "4000", where],
        capture_output=True, text=True, env=driver_env(), timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (failed,) = json.loads(proc.stdout)["failed"]
    error = one_line_error(failed, traces["medium"])
    assert "File too large" in error or "Errno 27" in error, error
    assert visible_state(wh.root) == before
    assert wh.verify().ok
    (again,) = wh.ingest([traces["medium"]]).results
    assert again.outcome == "ingested" and again.run_id == run_id_of(traces["medium"])
    assert orphan_ingests(wh.root) == set()


# ------------------------------------------------------------ damaged warehouse
def _damaged(tmp_path: Path, traces: dict[str, Path], table: str, how: str) -> tuple[Warehouse, Path]:
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([traces["a"]]).ok
    (victim,) = sorted((wh.root / "tables" / table).rglob("*.parquet"))[:1]
    if how == "truncate":
        data = victim.read_bytes()
        victim.write_bytes(data[: len(data) // 2])
    else:
        victim.unlink()
    return wh, victim


@pytest.mark.parametrize("table", ["events", "runs"])
@pytest.mark.parametrize("how", ["truncate", "delete"])
def test_damaged_warehouse_is_detected(tmp_path: Path, traces: dict[str, Path], table: str, how: str) -> None:
    wh, victim = _damaged(tmp_path, traces, table, how)
    result = runner.invoke(app, ["verify", "-w", str(wh.root)])
    assert result.exit_code == 1
    assert "verify FAILED" in result.stdout
    problem = [line for line in result.stdout.splitlines() if "problem:" in line]
    assert problem and table in problem[0] and victim.name in problem[0]
    assert "Traceback" not in result.output
    # queries fail with a clear error instead of returning wrong numbers
    with pytest.raises((QueryError, WarehouseError)) as info:
        wh.sql(f"SELECT count(*) AS n FROM {table}")
    assert "verify" in str(info.value) or "missing" in str(info.value) or "damaged" in str(info.value)
    cli = runner.invoke(app, ["sql", f"SELECT count(*) FROM {table}", "-w", str(wh.root)])
    assert cli.exit_code in (1, 2)
    assert cli.stderr.startswith("error: ") and "Traceback" not in cli.output
    assert len(cli.stderr.strip().splitlines()) == 1
