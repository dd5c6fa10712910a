"""`tracewh ingest` and `tracewh runs` in-process through Typer's CliRunner."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from helpers_ingest import read_runs, run_id_of, visible_state
from typer.testing import CliRunner

from tracewh.cli import app
from tracewh.synth import SynthConfig, write_trace

runner = CliRunner()


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two good traces and three bad ones in one directory (plus a run.json sidecar)."""
    base = tmp_path_factory.mktemp("cli_ingest") / "job"
    good1, good2 = base / "rank-0.pt.trace.json.gz", base / "rank-1.pt.trace.json.gz"
    write_trace(good1, SynthConfig(steps=1, layers=1, seed=31))
    write_trace(good2, SynthConfig(steps=1, layers=1, seed=32))
    data = good1.read_bytes()
    (base / "truncated.json.gz").write_bytes(data[: len(data) // 2])
    (base / "empty.json").write_bytes(b"")
    (base / "nodes.json").write_text(json.dumps({"schema": "1.0", "nodes": []}))
    (base / "run.json").write_text(json.dumps({"model": "dit"}))
    return {"dir": base, "good1": good1, "good2": good2}


def test_bad_files_do_not_stop_the_batch(tmp_path: Path, batch: dict[str, Path]) -> None:
    wh = str(tmp_path / "wh")
    result = runner.invoke(app, ["ingest", str(batch["dir"]), "-w", wh, "--format", "json"])
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert set(out) == {"ingested", "skipped", "failed"}
    assert sorted(r["path"] for r in out["ingested"]) == [str(batch["good1"]), str(batch["good2"])]
    assert out["skipped"] == []
    failed = {Path(r["path"]).name: r["error"] for r in out["failed"]}
    assert set(failed) == {"truncated.json.gz", "empty.json", "nodes.json"}
    for name, error in failed.items():
        assert name in error and "\n" not in error and "internal error" not in error
    assert "not a Kineto trace" in failed["nodes.json"]
    assert "empty" in failed["empty.json"]
    assert "truncated" in failed["truncated.json.gz"]
    assert sorted(r["run_id"] for r in read_runs(Path(wh))) == sorted(
        [run_id_of(batch["good1"]), run_id_of(batch["good2"])]
    )
    assert "Traceback" not in result.output


def test_second_ingest_reports_already_ingested(tmp_path: Path, batch: dict[str, Path]) -> None:
    wh = str(tmp_path / "wh")
    first = runner.invoke(app, ["ingest", str(batch["good1"]), "-w", wh])
    assert first.exit_code == 0, first.output
    assert "ingested 1 file(s)" in first.stdout
    before = visible_state(Path(wh))
    second = runner.invoke(app, ["ingest", str(batch["good1"]), "-w", wh, "--format", "json"])
    assert second.exit_code == 0
    out = json.loads(second.stdout)
    assert out["ingested"] == [] and out["failed"] == []
    (skipped,) = out["skipped"]
    assert skipped["outcome"] == "skipped" and "already ingested" in skipped["error"]
    assert visible_state(Path(wh)) == before
    text = runner.invoke(app, ["ingest", str(batch["good1"]), "-w", wh])
    assert text.exit_code == 0 and "already ingested 1" in text.stdout


def test_force_reports_replaced(tmp_path: Path, batch: dict[str, Path]) -> None:
    wh = str(tmp_path / "wh")
    assert runner.invoke(app, ["ingest", str(batch["good1"]), "-w", wh]).exit_code == 0
    result = runner.invoke(app, ["ingest", str(batch["good1"]), "-w", wh, "--force", "-f", "json"])
    assert result.exit_code == 0
    (row,) = json.loads(result.stdout)["ingested"]
    assert row["outcome"] == "replaced" and row["run_id"] == run_id_of(batch["good1"])


def test_labels_steps_and_runs_json(tmp_path: Path, batch: dict[str, Path]) -> None:
    wh = str(tmp_path / "wh")
    result = runner.invoke(
        app,
        ["ingest", str(batch["good1"]), "-w", wh, "--label", "model=override", "-l", "k=v",
         "--steps", "1", "--skip-python"],
    )
    assert result.exit_code == 0, result.output
    runs = runner.invoke(app, ["runs", "-w", wh, "--format", "json"])
    assert runs.exit_code == 0
    (row,) = json.loads(runs.stdout)
    assert {"run_id", "source_path", "day", "job", "labels_json"} <= set(row)
    assert row["run_id"] == run_id_of(batch["good1"])
    assert row["job"] == str(batch["dir"])
    assert json.loads(row["labels_json"]) == {"model": "override", "k": "v"}
    assert row["steps_limit"] == 1 and row["skip_python"] is True


def test_warehouse_from_the_environment(tmp_path: Path, batch: dict[str, Path]) -> None:
    wh = tmp_path / "env_wh"
    result = runner.invoke(app, ["ingest", str(batch["good2"])], env={"TRACEWH_WAREHOUSE": str(wh)})
    assert result.exit_code == 0, result.output
    assert [r["run_id"] for r in read_runs(wh)] == [run_id_of(batch["good2"])]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--label", "novalue"], "--label must be KEY=VALUE"),
        (["--steps", "0"], "--steps must be at least 1"),
        (["--jobs", "0"], "--jobs must be at least 1"),
        (["--format", "xml"], "--format must be text or json"),
    ],
)
def test_bad_options_exit_2(tmp_path: Path, batch: dict[str, Path], args: list[str], message: str) -> None:
    result = runner.invoke(app, ["ingest", str(batch["good1"]), "-w", str(tmp_path / "wh"), *args])
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.output


@pytest.mark.parametrize("name", ["wh[1]", "wh%20x"])
def test_a_warehouse_path_delta_cannot_address_exits_2(
    tmp_path: Path, batch: dict[str, Path], name: str
) -> None:
    """delta-rs panics on '[' / ']' and decodes %XX: refused up front, nothing written."""
    wh = tmp_path / name / "wh"
    for args in (["ingest", str(batch["good1"]), "-w", str(wh)], ["kernels", "-w", str(wh)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "Delta Lake" in result.stderr and str(wh) in result.stderr
        assert "Traceback" not in result.output and "Panic" not in result.output
    assert not wh.exists()


def test_missing_path_fails_and_the_rest_goes_on(tmp_path: Path, batch: dict[str, Path]) -> None:
    wh = str(tmp_path / "wh")
    missing = tmp_path / "nope.json.gz"
    result = runner.invoke(app, ["ingest", str(missing), str(batch["good1"]), "-w", wh, "-f", "json"])
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert [r["path"] for r in out["failed"]] == [str(missing)]
    assert "no such file" in out["failed"][0]["error"]
    assert len(out["ingested"]) == 1


def test_plain_json_and_gzip_of_the_same_trace_are_two_runs(tmp_path: Path, batch: dict[str, Path]) -> None:
    plain = tmp_path / "src" / "rank-0.pt.trace.json"
    plain.parent.mkdir()
    plain.write_bytes(gzip.decompress(batch["good1"].read_bytes()))
    shutil.copyfile(batch["good1"], tmp_path / "src" / "rank-0.pt.trace.json.gz")
    wh = str(tmp_path / "wh")
    result = runner.invoke(app, ["ingest", str(plain.parent), "-w", wh, "-f", "json"])
    assert result.exit_code == 0, result.output
    counts = visible_state(Path(wh))["counts"]
    a, b = run_id_of(plain), run_id_of(batch["good1"])
    assert {t: c.get(a) for t, c in counts.items()} == {t: c.get(b) for t, c in counts.items()}
