"""The Python API over a small generated warehouse: selectors, sql, scan, analyses."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest

from tracewh.api import Warehouse
from tracewh.core.errors import (
    EmptyWarehouseError,
    QueryError,
    RunNotFoundError,
    UsageError,
    WarehouseNotFoundError,
)
from tracewh.synth import SynthConfig, write_traces


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> tuple[Warehouse, list[Path]]:
    base = tmp_path_factory.mktemp("api")
    traces = base / "job-a"
    summaries = write_traces(traces, SynthConfig(steps=2, layers=1, ranks=2, seed=3))
    (traces / "run.json").write_text(json.dumps({"model": "tiny", "commit": "abc123"}))
    wh = Warehouse(base / "wh")
    report = wh.ingest([traces], labels={"branch": "main"})
    assert report.ok, report.to_dict()
    assert len(report.ingested) == 2
    return wh, [s.path for s in summaries]


def _classic(path: Path, cats: set[str]) -> dict[str, tuple[int, int]]:
    """The classic aggregation, computed with plain json: name -> (calls, total ns)."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for ev in doc["traceEvents"]:
        if ev.get("ph") == "X" and ev.get("cat") in cats and "dur" in ev:
            out[ev["name"]][0] += 1
            out[ev["name"]][1] += int(Decimal(ev["dur"]) * 1000)
    return {k: (v[0], v[1]) for k, v in out.items()}


def test_runs_carry_labels_job_and_rank(two_ranks: tuple[Warehouse, list[Path]]) -> None:
    wh, paths = two_ranks
    runs = wh.runs()
    assert runs.height == 2
    assert sorted(runs["rank"].to_list()) == [0, 1]
    labels = [json.loads(s) for s in runs["labels_json"]]
    assert all(lab["model"] == "tiny" and lab["branch"] == "main" for lab in labels)
    assert set(runs["job"]) == {str(paths[0].parent.resolve())}
    assert set(runs["source_path"]) == {str(p.resolve()) for p in paths}


def test_selectors(two_ranks: tuple[Warehouse, list[Path]]) -> None:
    wh, _ = two_ranks
    runs = wh.runs()
    rank1 = runs.filter(pl.col("rank") == 1)["run_id"][0]
    assert wh.resolve_run("rank=1").run_id == rank1
    assert wh.resolve_run(rank1[:6]).run_id == rank1
    assert wh.resolve_run("model=tiny").run_id in set(runs["run_id"])
    assert wh.resolve_run("latest").run_id in set(runs["run_id"])
    with pytest.raises(RunNotFoundError):
        wh.resolve_run("model=nope")
    with pytest.raises(RunNotFoundError):
        wh.resolve_run("ffffffffffff")
    assert wh.runs(where={"rank": "0"}).height == 1


def test_kernel_ranking_reproduces_the_classic_aggregation(
    two_ranks: tuple[Warehouse, list[Path]],
) -> None:
    wh, paths = two_ranks
    for rank, path in enumerate(paths):
        expected = _classic(path, {"kernel", "gpu_memcpy"})
        got = wh.kernels(f"rank={rank}", cats=["kernel", "gpu_memcpy"], by="total")
        assert dict(zip(got["name"], zip(got["calls"], got["total_ns"], strict=True), strict=True)) == expected
        totals = got["total_ns"].to_list()
        assert totals == sorted(totals, reverse=True)
        assert abs(got["pct"].sum() - 100.0) < 1e-6


def test_sql_and_scan_agree(two_ranks: tuple[Warehouse, list[Path]]) -> None:
    wh, _ = two_ranks
    n_sql = wh.sql("SELECT count(*) AS n FROM gpu_ops")["n"][0]
    n_scan = wh.scan("gpu_ops").select(pl.len()).collect().item()
    assert n_sql == n_scan > 0
    rid = wh.resolve_run("rank=0").run_id
    assert wh.sql("SELECT count(*) AS n FROM runs WHERE run_id = ?", [rid])["n"][0] == 1
    with pytest.raises(UsageError):
        wh.scan("nope")


def test_analyses_return_frames(two_ranks: tuple[Warehouse, list[Path]]) -> None:
    wh, _ = two_ranks
    gaps = wh.gaps()
    assert {"device", "stream", "ops", "busy_ns", "window_ns", "gap_ns", "idle_fraction",
            "host_wait_ns", "kernel_wait_ns", "other_wait_ns"} <= set(gaps.columns)
    assert (gaps["busy_ns"] + gaps["gap_ns"] == gaps["window_ns"]).all()
    assert wh.steps().height == 2  # two ProfilerSteps on one device
    assert wh.launches().height > 0
    assert wh.memcpy().height > 0
    assert wh.breakdown().height >= 1
    assert wh.ops().height > 0
    assert wh.ranks(view="imbalance").height > 0
    with pytest.raises(UsageError):
        wh.kernels(by="nope")


def test_errors_for_missing_and_empty_warehouses(tmp_path: Path) -> None:
    with pytest.raises(WarehouseNotFoundError):
        Warehouse(tmp_path / "nope").sql("SELECT 1")
    wh = Warehouse(tmp_path / "empty")
    wh.store.create()
    with pytest.raises(EmptyWarehouseError):
        wh.sql("SELECT 1")


def test_bad_sql_is_a_query_error(two_ranks: tuple[Warehouse, list[Path]]) -> None:
    wh, _ = two_ranks
    with pytest.raises(QueryError, match="nope"):
        wh.sql("SELECT * FROM nope")


def test_a_warehouse_written_before_a_table_was_added_gets_it(tmp_path: Path) -> None:
    """flow_args and module_spans came after the first warehouses: opening one adds them, empty."""
    import shutil

    traces = tmp_path / "job"
    write_traces(traces, SynthConfig(steps=1, layers=1, seed=5))
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([traces]).ok
    for table in ("flow_args", "module_spans"):  # as an older tracewh wrote it
        shutil.rmtree(tmp_path / "wh" / "tables" / table)
    old = Warehouse(tmp_path / "wh")
    assert old.sql("SELECT count(*) AS n FROM flow_args")["n"].to_list() == [0]
    assert old.sql("SELECT count(*) AS n FROM module_spans")["n"].to_list() == [0]
    assert old.sql("SELECT count(*) AS n FROM flows")["n"].to_list()[0] > 0
    assert (tmp_path / "wh" / "tables" / "flow_args" / "_delta_log").is_dir()



def test_connections_draw_no_progress_bar(two_ranks: tuple[Warehouse, list[Path]]) -> None:
    """A query over ~2 s would draw DuckDB's progress bar on stdout, into `--format json`.
    In a fresh interpreter (a setting made by an earlier connection of this process, an
    ingest's, could hide the default)."""
    import subprocess
    import sys

    wh, _ = two_ranks
    code = (
        "import sys\n"
        "from tracewh.api import Warehouse\n"
        "wh = Warehouse(sys.argv[1])\n"
        "q = \"SELECT current_setting('enable_progress_bar') AS p\"\n"
        "got = [wh.sql(q)['p'][0]]\n"
        "with wh.session():\n"
        "    got.append(wh.sql(q)['p'][0])\n"
        "con = wh.connect()\n"
        "got.append(con.sql(q).fetchall()[0][0])\n"
        "print(got)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(wh.root)], capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == "[False, False, False]", out.stdout + out.stderr
