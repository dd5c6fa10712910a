"""Ingest on a Dask cluster gives the same warehouse as a local ingest of the same files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers_ingest import expected_rows, load_trace, run_id_of, visible_state
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.core.errors import UsageError
from tracewh.ingest.batch import build_executor
from tracewh.ingest.dask_executor import DaskExecutor, parse_dask
from tracewh.synth import SynthConfig, write_trace

distributed = pytest.importorskip("dask.distributed")

# dask's own shutdown chatter (event loops, sockets of the local cluster)
pytestmark = [
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:distributed.*"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning:tornado.*"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A local cluster of 2 worker processes, 1 thread each; yields the scheduler address."""
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
        scheduler_kwargs={"dashboard_address": ":0"},
    ) as lc:
        yield lc.scheduler_address


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dask_traces")
    for i in range(4):
        write_trace(out / f"job/rank-{i}.pt.trace.json.gz", SynthConfig(steps=1, layers=1, seed=40 + i))
    (out / "job" / "bad.json").write_text("{not json")
    return out


def test_parse_dask() -> None:
    assert parse_dask("local:3") == DaskExecutor(workers=3)
    assert parse_dask(" tcp://10.1.2.3:8786 ").address == "tcp://10.1.2.3:8786"
    assert parse_dask("local").workers >= 1
    for bad in ("local:0", "local:x", ""):
        with pytest.raises(UsageError):
            parse_dask(bad)
    assert build_executor(dask=None) is None


def test_dask_equals_local(cluster: str, traces: Path, tmp_path: Path) -> None:
    local = Warehouse(tmp_path / "local")
    local_report = local.ingest([traces])
    seen: list[str] = []
    on_dask = Warehouse(tmp_path / "dask")
    executor = DaskExecutor(address=cluster, on_error=None)
    report = on_dask.ingest([traces], executor=executor, on_result=lambda r: seen.append(r.path))

    good = sorted((traces / "job").glob("rank-*.json.gz"))
    assert sorted(r.run_id for r in report.ingested) == sorted(run_id_of(p) for p in good)
    assert [r.path for r in report.failed] == [str(traces / "job" / "bad.json")]
    assert sorted(seen) == sorted(r.path for r in report.results)
    assert [(r.path, r.outcome, r.run_id) for r in report.results] == [
        (r.path, r.outcome, r.run_id) for r in local_report.results
    ]
    state = visible_state(on_dask.root)
    assert state == visible_state(local.root)
    # and both match an independent count of the trace files
    for p in good:
        for table, n in expected_rows(load_trace(p)["traceEvents"]).items():
            assert state["counts"][table].get(run_id_of(p), 0) == n, (p.name, table)
    # a second Dask ingest is a no-op
    again = on_dask.ingest([traces], executor=executor)
    assert len(again.skipped) == len(good) and not again.ingested
    assert visible_state(on_dask.root) == state


def test_tasks_of_several_files_equal_local(cluster: str, traces: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Files packed into tasks (one commit batch and one tiny-trace group per task on a
    worker) give the warehouse a local ingest gives; a bad file in a task fails alone."""
    from tracewh.ingest import cluster as tasks_of

    monkeypatch.setattr(tasks_of, "TASKS_PER_SLOT", 1)  # 5 files, 2 workers: 2 tasks
    executor = DaskExecutor(address=cluster, on_error=None)
    sent: list[int] = []
    real_map = executor.map_unordered

    def recording(fn, items):  # type: ignore[no-untyped-def]
        sent.extend(len(t.paths) for t in items)
        return real_map(fn, items)

    object.__setattr__(executor, "map_unordered", recording)
    local = Warehouse(tmp_path / "local")
    local_report = local.ingest([traces])
    on_dask = Warehouse(tmp_path / "dask")
    report = on_dask.ingest([traces], executor=executor)
    assert sorted(sent) == [2, 3]
    assert [(r.path, r.outcome, r.run_id) for r in report.results] == [
        (r.path, r.outcome, r.run_id) for r in local_report.results
    ]
    assert visible_state(on_dask.root) == visible_state(local.root)


def test_slots_of_a_cluster(cluster: str) -> None:
    from tracewh.core.errors import BackendError

    assert DaskExecutor(workers=3).slots() == 3  # a local cluster: its workers, no start
    assert DaskExecutor(address=cluster).slots() == 2  # the scheduler's worker threads
    with pytest.raises(BackendError, match="cannot reach the Dask scheduler"):
        DaskExecutor(address="tcp://127.0.0.1:9", timeout="1s").slots()


def test_lost_task_becomes_failed_result(cluster: str) -> None:
    executor = DaskExecutor(address=cluster, on_error=lambda item, exc: f"lost {item}")
    assert sorted(map(str, executor.map_unordered(_boom_on_two, [1, 2, 3]))) == ["1", "3", "lost 2"]


def _boom_on_two(x: int) -> int | str:
    if x == 2:
        raise RuntimeError("worker died")
    return x


@pytest.mark.slow
def test_cli_dask_local(traces: Path, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    result = CliRunner().invoke(
        app, ["ingest", str(traces), "-w", str(wh), "--dask", "local:2", "--format", "json"]
    )
    assert result.exit_code == 1, result.output  # bad.json failed, the rest ingested
    assert result.stdout.startswith("{"), result.output
    out = json.loads(result.stdout)
    assert len(out["ingested"]) == 4 and len(out["failed"]) == 1
    usage = CliRunner().invoke(app, ["ingest", str(traces), "-w", str(wh), "--dask", "local", "-j", "2"])
    assert usage.exit_code == 2
