"""A warehouse on S3: a real S3-compatible server (moto in server mode) on 127.0.0.1.

Ingest, query in place (DuckDB through fsspec, Polars natively), two concurrent
writer processes, and a writer killed mid-commit. Expected counts come from a
local ingest of the same files (itself checked against plain-json counts in
the ingest tests) and from reading the Delta tables directly.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from helpers_ingest import CHILD_TABLES, REPO, run_id_of

from tracewh.api import Warehouse
from tracewh.ingest.cleanup import cleanup
from tracewh.storage.store import DuplicateRunError, Store
from tracewh.synth import SynthConfig, write_trace

pytest.importorskip("moto.server")
boto3 = pytest.importorskip("boto3")
pytest.importorskip("s3fs")

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

BUCKET = "tracewh-test"


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in a temp folder: nothing a failing ingest writes lands in the repository."""
    monkeypatch.chdir(tmp_path)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    """A moto S3 server process on 127.0.0.1 with one bucket; yields the storage options.

    A separate process, not a thread: delta-rs may block holding the GIL while it
    waits for the server.
    """
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    opts = {
        "aws_endpoint_url": f"http://127.0.0.1:{port}",
        "aws_access_key_id": "testing",
        "aws_secret_access_key": "testing",
        "aws_region": "us-east-1",
        "aws_allow_http": "true",
    }
    try:
        client = boto3.client(
            "s3", endpoint_url=opts["aws_endpoint_url"], region_name="us-east-1",
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                client.create_bucket(Bucket=BUCKET)
                break
            except Exception:  # the server is still starting
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.2)
        yield opts
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("s3_traces")
    paths = [out / "job" / f"rank-{i}.pt.trace.json.gz" for i in range(3)]
    for i, p in enumerate(paths):
        write_trace(p, SynthConfig(steps=1, layers=1, seed=70 + i))
    return paths


@pytest.fixture(scope="module")
def local_counts(traces: list[Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    wh = Warehouse(tmp_path_factory.mktemp("s3_local") / "wh")
    assert wh.ingest(traces).ok
    return _counts(wh)


def _counts(wh: Warehouse) -> dict[str, Any]:
    """Visible rows per table and run, read with Polars ``scan`` (the runs-join rule)."""
    out: dict[str, Any] = {"runs": sorted(wh.scan("runs").collect()["run_id"].to_list())}
    for table in CHILD_TABLES:
        df = wh.scan(table).group_by("run_id").len().collect()
        out[table] = dict(sorted(zip(df["run_id"].to_list(), df["len"].to_list(), strict=True)))
    return out


def _raw(url: str, opts: dict[str, str], table: str) -> Counter[tuple[str, str]]:
    """Rows per (run_id, ingest_id) of a table, visible or not (straight from Delta)."""
    t = DeltaTable(f"{url}/tables/{table}", storage_options=opts).to_pyarrow_table(
        columns=["run_id", "ingest_id"]
    )
    return Counter(zip(t.column("run_id").to_pylist(), t.column("ingest_id").to_pylist(), strict=True))


DRIVER = """
import json, sys
from tracewh.api import Warehouse
report = Warehouse(sys.argv[1], storage_options=json.loads(sys.argv[2])).ingest(sys.argv[3:])
print(json.dumps(report.to_dict()))
"""


def _start(url: str, opts: dict[str, str], paths: list[Path]) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # run from the temp cwd
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, url, json.dumps(opts), *map(str, paths)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )


@pytest.mark.slow
def test_ingest_and_query_in_place(
    s3: dict[str, str], traces: list[Path], local_counts: dict[str, Any]
) -> None:
    url = f"s3://{BUCKET}/one/"
    wh = Warehouse(url, storage_options=s3)
    assert wh.root == f"s3://{BUCKET}/one"
    report = wh.ingest(traces)
    assert report.ok, report.to_dict()
    assert sorted(r.run_id for r in report.ingested) == sorted(run_id_of(p) for p in traces)
    assert _counts(wh) == local_counts  # Polars scan_delta on s3://
    # DuckDB through fsspec: the views, the per-run macros and the runs-only path
    runs = wh.runs()
    assert sorted(runs["run_id"].to_list()) == local_counts["runs"]
    per_run = wh.sql("SELECT run_id, count(*) AS n FROM gpu_ops GROUP BY run_id ORDER BY run_id")
    assert dict(per_run.iter_rows()) == local_counts["gpu_ops"]
    top = wh.kernels(run_id_of(traces[0]), top=3)
    assert top.height == 3
    # re-ingest is a no-op
    again = wh.ingest(traces)
    assert len(again.skipped) == len(traces) and not again.ingested
    assert _counts(wh) == local_counts


def test_ingest_one_query_and_refuse_duplicate(
    s3: dict[str, str], traces: list[Path], local_counts: dict[str, Any]
) -> None:
    url = f"s3://{BUCKET}/dup"
    wh = Warehouse(url, storage_options=s3)
    assert wh.ingest(traces[:1]).ok
    rid = run_id_of(traces[0])
    assert wh.runs()["run_id"].to_list() == [rid]  # DuckDB through fsspec
    gpu = wh.scan("gpu_ops").collect()  # Polars on s3://
    assert gpu.height == local_counts["gpu_ops"][rid]
    row = wh.store.table("runs").to_pyarrow_table()
    with pytest.raises(DuplicateRunError) as info:
        wh.store.append("runs", lambda: row)
    assert info.value.run_id == run_id_of(traces[0])
    assert wh.store.table("runs").to_pyarrow_table().num_rows == 1


@pytest.mark.slow
def test_two_concurrent_writers(
    s3: dict[str, str], traces: list[Path], local_counts: dict[str, Any]
) -> None:
    url = f"s3://{BUCKET}/concurrent"
    procs = [_start(url, s3, traces), _start(url, s3, list(reversed(traces)))]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    reports = [json.loads(out) for out, _ in outs]
    ingested = Counter(r["run_id"] for rep in reports for r in rep["ingested"])
    assert sorted(ingested) == local_counts["runs"] and set(ingested.values()) == {1}
    assert not any(rep["failed"] for rep in reports)
    wh = Warehouse(url, storage_options=s3)
    assert _counts(wh) == local_counts  # no duplicates, nothing lost
    runs = wh.store.table("runs").to_pyarrow_table()
    assert runs.num_rows == len(traces)


@pytest.mark.slow
def test_kill_mid_commit(s3: dict[str, str], traces: list[Path], local_counts: dict[str, Any]) -> None:
    url = f"s3://{BUCKET}/killed"
    wh = Warehouse(url, storage_options=s3)
    assert wh.ingest(traces[:1]).ok
    before = _counts(wh)
    proc = _start(url, s3, traces[1:2])
    events = f"{url}/tables/events"
    version = DeltaTable(events, storage_options=s3).version()
    deadline = time.monotonic() + 120
    while DeltaTable(events, storage_options=s3).version() == version:  # first child commit
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert _counts(wh) == before  # the killed ingest is invisible
    killed = {i for (r, i) in _raw(url, s3, "events") if r == run_id_of(traces[1])}
    assert len(killed) == 1
    # its lease is still fresh: cleanup keeps its rows; once stale they are orphans
    assert cleanup(wh.store).orphan_ingests == ()
    stale = Store(url, storage_options=s3, lease_s=0.0)
    assert set(cleanup(stale).orphan_ingests) == killed
    assert all(i not in killed for t in CHILD_TABLES for (_, i) in _raw(url, s3, t))
    # the next ingest succeeds
    report = wh.ingest(traces)
    assert report.ok and [r.run_id for r in report.ingested] == [run_id_of(p) for p in traces[1:]]
    assert _counts(wh) == local_counts
