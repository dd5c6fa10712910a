"""Fingerprints of runs ingested before the `fingerprints` table: computed from the stored
tables (sql/08_fingerprints.sql) equal to the ingest-time ones, used by history commands,
stored by `tracewh compact` (tracewh/ingest/backfill.py) once, visibly with the run."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.ingest import backfill
from tracewh.synth import SynthConfig, write_history

#: Real traces of different kinds: CUDA (A100), ROCm (MI250, MI300 with modules), the
#: legacy 2021 format, Triton, CPU-only and a non-GPU rank.
REAL = (
    "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "trace_file_list__inference_rank_1.json.gz",
    "triton_example__triton_example.json.gz",
    "tracelens__mi300__bert-small-uncased.json.gz",
    "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "mixed_files__rank_non_gpu.json.gz",
)
CPU_ONLY = "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
COLS = ["run_id", "ingest_id", "day", "source", "tokens", "minhash"]


def _stored(wh: Warehouse) -> pl.DataFrame:
    return wh.sql(f"SELECT {', '.join(COLS)} FROM fingerprints ORDER BY run_id")


def _computed(wh: Warehouse, ids: list[str]) -> pl.DataFrame:
    return wh.sql(f"SELECT {', '.join(COLS)} FROM run_fingerprints_in($ids) ORDER BY run_id",
                  {"ids": ids})  # fmt: skip


def test_backfilled_signature_equals_the_ingest_time_one(shared_traces: Path, tmp_path: Path) -> None:
    folder = tmp_path / "t"
    folder.mkdir()
    for name in REAL:
        (folder / name).symlink_to(shared_traces / name)
    wh = Warehouse(tmp_path / "wh")
    # links out of a scanned folder are not followed (issue 33): the links are given by name
    assert wh.ingest([folder / name for name in REAL], jobs=1).ok
    stored = _stored(wh)
    assert stored.height == len(REAL)
    assert set(stored["source"]) == {"gpu", "cpu"}
    assert_frame_equal(_computed(wh, stored["run_id"].to_list()), stored)
    # the CPU-only trace's tokens, counted from the JSON: distinct (operator, Input Dims)
    with gzip.open(shared_traces / CPU_ONLY, "rt") as f:
        events = json.load(f)["traceEvents"]
    ops = {(e["name"], json.dumps(e.get("args", {}).get("Input Dims"), separators=(",", ":")))
           for e in events if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "Operator")}  # fmt: skip
    cpu = stored.join(wh.sql("SELECT run_id, file_name FROM runs"), on="run_id").filter(
        pl.col("file_name") == CPU_ONLY)  # fmt: skip
    assert cpu["source"].to_list() == ["cpu"] and cpu["tokens"].to_list() == [len(ops)]
    assert all(len(m) == 128 for m in stored["minhash"].to_list())
    # the same warehouse as an older tracewh wrote it: the same workloads, from the tables
    expected = _identity(wh)
    assert expected["workload"].n_unique() >= 5
    _as_older_tracewh(tmp_path / "wh")
    assert_frame_equal(_identity(Warehouse(tmp_path / "wh")), expected)


def _nights(root: Path, flavor: str, nights: int, seed: int) -> None:
    """Nights of one synthetic model without run.json (no labels: tied by fingerprint)."""
    write_history(root, SynthConfig(flavor=flavor, steps=2, layers=2, seed=seed), runs=nights)
    for f in root.rglob("run.json"):
        f.unlink()


def _as_older_tracewh(root: Path) -> None:
    """The warehouse as a tracewh before fingerprints wrote it: no table, rows_json without it."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from tracewh.schema.arrow import RUNS
    from tracewh.storage.store import Store

    shutil.rmtree(root / "tables" / "fingerprints")
    runs = Store(root).read_table("runs").to_pylist()
    for r in runs:
        rows = json.loads(r["rows_json"])
        rows.pop("fingerprints", None)
        r["rows_json"] = json.dumps(rows)
    write_deltalake(str(root / "tables" / "runs"), pa.Table.from_pylist(runs, schema=RUNS),
                    mode="overwrite")  # fmt: skip


def _identity(wh: Warehouse) -> pl.DataFrame:
    return wh.runs().select("run_id", "workload", "workload_by").sort("run_id")


@pytest.mark.slow  # ~10-30 s: make test-all (the default suite's 8-minute budget)
def test_an_old_warehouse_compares_as_a_new_one(tmp_path: Path) -> None:
    """Fingerprints table removed (as an older tracewh wrote the warehouse): the runs get
    the same workloads from their tables; a run ingested after the upgrade mixes in;
    compact stores exactly the ingest-time rows, once; verify passes; --force replaces."""
    _nights(tmp_path / "cuda", "cuda", 5, 1)
    _nights(tmp_path / "rocm", "rocm", 3, 2)
    late = sorted((tmp_path / "cuda").iterdir())[-1]
    shutil.move(str(late), tmp_path / "late")  # ingested after the upgrade
    root = tmp_path / "wh"
    wh = Warehouse(root)
    assert wh.ingest([tmp_path / "cuda", tmp_path / "rocm"], jobs=1).ok
    assert wh.ingest([tmp_path / "late"], jobs=1).ok
    expected = _identity(wh)
    original = _stored(wh)
    assert set(expected["workload_by"]) == {"fingerprint"}
    check_new = wh.check("latest")

    late_id = wh.resolve_run("latest").run_id
    _as_older_tracewh(root)
    old = Warehouse(root)
    assert _stored(old).is_empty()
    assert old.verify().ok, old.verify().problems
    assert_frame_equal(_identity(old), expected)
    report = old.changes(since=None)
    assert report.fingerprinted == expected.height
    check_old = old.check("latest")
    assert check_old.fingerprinted == expected.height
    assert [c.baseline_runs for c in check_old.checked] == [c.baseline_runs for c in check_new.checked]
    assert [c.workload for c in check_old.checked] == [c.workload for c in check_new.checked]
    # the late night re-ingested by the new tracewh: the table again, with its row only
    assert old.ingest([tmp_path / "late"], jobs=1, force=True).ok
    assert _stored(old)["run_id"].to_list() == [late_id]
    assert_frame_equal(_identity(old), expected)
    assert old.changes(since=None).fingerprinted == expected.height - 1

    res = CliRunner().invoke(app, ["compact", "-w", str(root), "--format", "json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["fingerprints_added"] == expected.height - 1
    after = _stored(old)
    assert_frame_equal(after.drop("ingest_id"), original.drop("ingest_id"))
    assert old.verify().ok, old.verify().problems
    assert old.changes(since=None).fingerprinted == 0
    assert_frame_equal(_identity(old), expected)
    assert old.compact().fingerprints_added == 0  # stored once
    assert old.sql("SELECT count(*) AS n FROM raw_fingerprints")["n"][0] == expected.height

    # a backfilled run replaced by --force: its new row, the backfilled one an orphan
    first = expected["run_id"].to_list()[0]
    src = old.sql("SELECT source_path FROM runs WHERE run_id = $r", {"r": first})["source_path"][0]
    assert old.ingest([src], jobs=1, force=True).ok
    assert old.verify().ok
    assert old.sql("SELECT count(*) AS n FROM fingerprints WHERE run_id = $r", {"r": first})["n"][0] == 1
    old.compact()
    assert old.sql("SELECT count(*) AS n FROM raw_fingerprints")["n"][0] == expected.height
    assert_frame_equal(_identity(old), expected)


def _old_warehouse(tmp_path: Path) -> tuple[Warehouse, pl.DataFrame]:
    _nights(tmp_path / "n", "cuda", 2, 3)
    root = tmp_path / "wh"
    wh = Warehouse(root)
    assert wh.ingest([tmp_path / "n"], jobs=1).ok
    _as_older_tracewh(root)
    old = Warehouse(root)
    ids = old.sql("SELECT run_id FROM runs ORDER BY run_id")["run_id"].to_list()
    return old, _computed(old, ids)


def test_add_fingerprints_adds_each_missing_row_once(tmp_path: Path) -> None:
    wh, rows = _old_warehouse(tmp_path)
    assert rows.height == 2
    stale = rows.head(1).with_columns(pl.lit("0" * 32).alias("ingest_id"))  # a replaced version
    assert backfill.add_fingerprints(wh.store, stale.to_arrow()) == 0
    doubled = pl.concat([rows, rows])
    assert backfill.add_fingerprints(wh.store, doubled.to_arrow()) == 2
    assert backfill.add_fingerprints(wh.store, rows.to_arrow()) == 0
    assert_frame_equal(_stored(wh), rows)
    assert wh.verify().ok


def test_a_concurrent_backfill_commits_first(tmp_path: Path, monkeypatch: Any) -> None:
    """Another machine adds the same rows between our check and our commit: our conditional
    commit fails, the retry finds them and adds nothing (each row once)."""
    from deltalake import write_deltalake

    wh, rows = _old_warehouse(tmp_path)
    real = backfill._wanted
    calls: list[int] = []

    def racing(store: Any, table: str, todo: Any, version: int, *, unique: bool) -> Any:
        out = real(store, table, todo, version, unique=unique)
        if not calls:  # the other backfill commits right after our check
            write_deltalake(store.table_uri("fingerprints"), out, mode="append",
                            partition_by=["day"])  # fmt: skip
        calls.append(out.num_rows)
        return out

    monkeypatch.setattr(backfill, "_wanted", racing)
    assert backfill.add_fingerprints(wh.store, rows.to_arrow()) == 0
    assert calls == [2, 0]
    assert_frame_equal(_stored(wh), rows)
    assert wh.verify().ok


def test_a_lost_row_of_a_newer_run_comes_back(tmp_path: Path) -> None:
    """A run whose ingest-time row was lost (rows_json names it: verify fails) gets it back
    from its tables, equal to the lost one, and verify passes again."""
    _nights(tmp_path / "n", "cuda", 1, 4)
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([tmp_path / "n"], jobs=1).ok
    rows = _stored(wh)
    wh.store.delete("fingerprints", "true")
    assert not wh.verify().ok
    assert wh.backfill_fingerprints() == 1
    assert_frame_equal(_stored(wh), rows)
    assert wh.verify().ok
