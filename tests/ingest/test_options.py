"""Ingest options on generated traces: --steps N, --skip-python, labels, run.json, job."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers_ingest import (
    GPU_CATS,
    RUNTIME_CATS,
    expected_rows,
    load_trace,
    ns,
    read_runs,
    visible_state,
)

from tracewh.api import Warehouse
from tracewh.synth import SynthConfig, write_trace


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("opt")
    out = {
        "steps": base / "a" / "steps.pt.trace.json.gz",
        "python": base / "b" / "python.pt.trace.json.gz",
    }
    write_trace(out["steps"], SynthConfig(steps=5, layers=1, seed=11))
    write_trace(out["python"], SynthConfig(steps=1, layers=1, seed=12, python=True))
    return out


def _steps_window(events: list[dict], n: int) -> tuple[int, int, list[int]]:
    spans = sorted(
        (ns(ev["ts"]), int(ev["name"][13:]), ns(ev["ts"]) + ns(ev["dur"]))
        for ev in events
        if ev.get("ph") == "X" and str(ev.get("name", "")).startswith("ProfilerStep#")
        and ev.get("cat") != "gpu_user_annotation"
    )[:n]
    return spans[0][0], max(s[2] for s in spans), sorted(s[1] for s in spans)


def test_steps_keeps_only_the_first_n_iterations(tmp_path: Path, traces: dict[str, Path]) -> None:
    doc = load_trace(traces["steps"], exact=True)
    events = doc["traceEvents"]
    base = int(doc.get("baseTimeNanoseconds") or 0)
    lo, hi, numbers = _steps_window(events, 2)
    launch_ts = {
        ev["args"]["correlation"]: ns(ev["ts"])
        for ev in events if ev.get("ph") == "X" and ev.get("cat") in RUNTIME_CATS
        and "correlation" in (ev.get("args") or {})
    }

    def placed(ev: dict) -> int:  # a GPU op belongs where its launch call is
        if ev.get("cat") in GPU_CATS:
            corr = (ev.get("args") or {}).get("correlation")
            if corr in launch_ts:
                return launch_ts[corr]
        return ns(ev["ts"])

    xs = [ev for ev in events if ev.get("ph") == "X" and ev.get("cat") != "python_function"]
    kept = [ev for ev in xs if lo <= placed(ev) < hi]
    assert 0 < len(kept) < len(xs)

    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([traces["steps"]], steps=2).ok
    (run,) = read_runs(wh.root)
    counts = visible_state(wh.root)["counts"]
    assert counts["events"][run["run_id"]] == len(kept)
    assert counts["gpu_ops"][run["run_id"]] == sum(1 for ev in kept if ev.get("cat") in GPU_CATS)
    assert run["steps_limit"] == 2
    assert run["n_dropped"] == len(xs) - len(kept)
    got = wh.sql("SELECT step, min(ts_ns) AS lo, max(ts_ns + dur_ns) AS hi FROM steps GROUP BY step ORDER BY step")
    assert got["step"].to_list() == numbers
    ts = wh.sql("SELECT min(ts_ns) AS a, max(ts_ns) AS b FROM events WHERE cat NOT IN ('kernel', 'gpu_memcpy', 'gpu_memset')")
    assert ts["a"][0] >= base + lo and ts["b"][0] < base + hi


def test_skip_python_drops_python_events_but_module_spans(
    tmp_path: Path, traces: dict[str, Path]
) -> None:
    events = load_trace(traces["python"])["traceEvents"]
    n_python = sum(1 for ev in events if ev.get("cat") == "python_function")
    n_module = sum(
        1 for ev in events
        if ev.get("cat") == "python_function" and ev["name"].startswith("nn.Module: ")
    )
    assert n_python > n_module > 0
    full, skipped = Warehouse(tmp_path / "full"), Warehouse(tmp_path / "skip")
    assert full.ingest([traces["python"]]).ok
    report = skipped.ingest([traces["python"]], skip_python=True)
    assert report.ok
    (run,) = read_runs(skipped.root)
    rid = run["run_id"]
    assert run["skip_python"] is True
    assert json.loads(run["anomalies_json"] or "{}").get("skipped_python") == n_python - n_module
    with_py = {t: c.get(rid, 0) for t, c in visible_state(full.root)["counts"].items()}
    without = {t: c.get(rid, 0) for t, c in visible_state(skipped.root)["counts"].items()}
    assert with_py == expected_rows(events)
    assert without == expected_rows(events, skip_python=True)
    assert with_py["python"] == n_python and without["python"] == n_module
    # module attribution needs only the module spans: the same with and without them
    query = "SELECT event_index, module_path FROM gpu_ops ORDER BY event_index"
    paths = full.sql(query)
    assert paths["module_path"].null_count() < paths.height
    assert skipped.sql(query).equals(paths)


def test_labels_from_run_json_and_options_and_job(tmp_path: Path) -> None:
    job_dir = tmp_path / "nightly" / "2025-01-08"
    trace = job_dir / "rank-0.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=1, layers=1, seed=13))
    (job_dir / "run.json").write_text(json.dumps({"model": "dit", "commit": "abc", "n": 3}))
    other = tmp_path / "other" / "rank-0.pt.trace.json.gz"
    write_trace(other, SynthConfig(steps=1, layers=1, seed=14))
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([job_dir], labels={"commit": "override", "branch": "main"}).ok
    assert wh.ingest([other], job="my-job").ok
    runs = {r["source_path"]: r for r in read_runs(wh.root)}
    first, second = runs[str(trace)], runs[str(other)]
    assert json.loads(first["labels_json"]) == {
        "model": "dit", "commit": "override", "n": "3", "branch": "main"
    }
    assert first["job"] == str(job_dir)
    assert json.loads(second["labels_json"]) == {}
    assert second["job"] == "my-job"
    assert wh.runs(where={"model": "dit"})["run_id"].to_list() == [first["run_id"]]


def test_unreadable_run_json_fails_the_file_clearly(tmp_path: Path) -> None:
    trace = tmp_path / "job" / "rank-0.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=1, layers=1, seed=15))
    (trace.parent / "run.json").write_text("{not json")
    report = Warehouse(tmp_path / "wh").ingest([trace.parent])
    (failed,) = report.failed
    assert "run.json" in failed.error and "internal error" not in failed.error
    assert read_runs(tmp_path / "wh") == []


def test_one_default_per_ingest_option() -> None:
    """The ingest's options are declared once (IngestOptions, DEFAULT_JOBS): the API's keyword
    defaults and the CLI's option defaults are the dataclass's."""
    import dataclasses
    import inspect

    import typer.main

    from tracewh.cli import app
    from tracewh.ingest import batch
    from tracewh.ingest.options import DEFAULT_JOBS, IngestOptions

    fields = {f.name: f.default for f in dataclasses.fields(IngestOptions)
              if f.default is not dataclasses.MISSING}
    api = {n: p.default for n, p in inspect.signature(Warehouse.ingest).parameters.items()}
    command = typer.main.get_command(app).commands["ingest"]  # type: ignore[attr-defined]
    cli = {p.name: p.default for p in command.params}
    shared = ("steps", "step_marker", "skip_python", "force", "job")
    for name in shared:
        assert api[name] == fields[name], name
        assert cli[name] == fields[name], name
    assert api["jobs"] == DEFAULT_JOBS == "auto"
    assert inspect.signature(batch.ingest_paths).parameters["jobs"].default == DEFAULT_JOBS
    assert cli["jobs"] is None  # --jobs not given: DEFAULT_JOBS (the CLI's _parse_jobs)
