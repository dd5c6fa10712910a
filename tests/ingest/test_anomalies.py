"""Plausible bad input that skews a run's figures is found and recorded (issue 18, item 11).

Each case takes a realistic synthetic trace, damages it the way a broken exporter or a
careless merge would, ingests it as a real process, and checks runs.anomalies_json
against counts made here with plain json loops.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from helpers_ingest import GPU_CATS, RUNTIME_CATS, driver_env, read_runs

from tracewh.synth import SynthConfig, write_trace

TRACEWH = str(Path(sys.executable).with_name("tracewh"))
KEYS = ("duplicate_events", "correlation_reuse", "gpu_outside_cpu_window")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("anom") / "base.pt.trace.json"
    write_trace(path, SynthConfig(steps=3, layers=2, seed=21))
    return json.loads(path.read_text())


def _ingest(tmp: Path, doc: dict[str, Any], name: str) -> dict[str, Any]:
    path = tmp / "in" / f"{name}.pt.trace.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    p = subprocess.run([TRACEWH, "ingest", str(path), "-w", str(tmp / "wh")], capture_output=True,
                       text=True, env=driver_env())
    assert p.returncode == 0, p.stdout + p.stderr
    (run,) = [r for r in read_runs(tmp / "wh") if r["file_name"] == path.name]
    return json.loads(run["anomalies_json"] or "{}")


def _gpu(ev: dict[str, Any]) -> bool:
    return ev.get("ph") == "X" and ev.get("cat") in GPU_CATS


def test_a_clean_trace_has_none(tmp_path: Path, base: dict[str, Any]) -> None:
    found = _ingest(tmp_path, base, "clean")
    assert not {k: v for k, v in found.items() if k in KEYS}


def test_every_kernel_event_duplicated(tmp_path: Path, base: dict[str, Any]) -> None:
    doc = copy.deepcopy(base)
    events: list[dict[str, Any]] = []
    for ev in doc["traceEvents"]:
        events.append(ev)
        if _gpu(ev) and ev["cat"] == "kernel":
            events.append(copy.deepcopy(ev))
    doc["traceEvents"] = events
    n_kernels = sum(1 for ev in base["traceEvents"] if _gpu(ev) and ev["cat"] == "kernel")
    found = _ingest(tmp_path, doc, "dup")
    assert found["duplicate_events"] == n_kernels > 0
    assert found.get("correlation_reuse", 0) == 0


def _contradicted(events: list[dict[str, Any]]) -> int:
    """GPU ops whose correlation several runtime calls carry, a later one before the op."""
    calls: dict[int, list[float]] = defaultdict(list)
    for ev in events:
        if ev.get("ph") == "X" and ev.get("cat") in RUNTIME_CATS and "correlation" in ev.get("args", {}):
            calls[ev["args"]["correlation"]].append(float(ev["ts"]))
    n = 0
    for ev in events:
        c = ev.get("args", {}).get("correlation") if _gpu(ev) else None
        if c is None or len(calls[c]) < 2:
            continue
        first = min(calls[c])  # the linkage takes the earliest call carrying the id
        n += any(first < t <= float(ev["ts"]) for t in calls[c])
    return n


def test_correlation_ids_reused(tmp_path: Path, base: dict[str, Any]) -> None:
    doc = copy.deepcopy(base)
    for ev in doc["traceEvents"]:  # ids restart every 40: a merged or wrapped trace
        args = ev.get("args")
        if isinstance(args, dict) and isinstance(args.get("correlation"), int):
            args["correlation"] = args["correlation"] % 40 + 1
        if ev.get("ph") in ("s", "f") and ev.get("cat") == "ac2g":
            ev["id"] = ev["id"] + 10_000_000  # flows would link them right anyway: keep them off
            ev["cat"] = "other_flow"
    expected = _contradicted(doc["traceEvents"])
    assert expected > 0
    found = _ingest(tmp_path, doc, "reuse")
    assert found["correlation_reuse"] == expected


def test_a_kernel_far_before_the_trace(tmp_path: Path, base: dict[str, Any]) -> None:
    doc = copy.deepcopy(base)
    kernel = next(ev for ev in doc["traceEvents"] if _gpu(ev))
    kernel["ts"] = float(kernel["ts"]) - 1000e6  # 1000 s earlier (ts in µs)
    found = _ingest(tmp_path, doc, "early")
    assert found["gpu_outside_cpu_window"] == 1


@pytest.mark.slow  # ~10-30 s: make test-all (the default suite's 8-minute budget)
def test_flagged_runs_are_shown_and_listed(tmp_path: Path, base: dict[str, Any]) -> None:
    doc = copy.deepcopy(base)
    doc["traceEvents"] = [*doc["traceEvents"], *[copy.deepcopy(e) for e in doc["traceEvents"] if _gpu(e)]]
    _ingest(tmp_path, doc, "flagged")
    _ingest(tmp_path, base, "clean")
    wh = str(tmp_path / "wh")
    rows = json.loads(subprocess.run([TRACEWH, "runs", "-w", wh, "-f", "json"], capture_output=True,
                                     text=True, env=driver_env()).stdout)
    unusable = {r["file_name"]: r["unusable"] for r in rows}
    assert unusable == {"flagged.pt.trace.json": "duplicated_events", "clean.pt.trace.json": None}
    wide = {**driver_env(), "COLUMNS": "400"}  # the pytest paths are long: a wide table
    table = subprocess.run([TRACEWH, "runs", "-w", wh], capture_output=True, text=True,
                           env=wide).stdout
    assert "duplicated_events" in table
    sql = subprocess.run(
        [TRACEWH, "sql", "-w", wh, "-f", "json",
         "SELECT r.anomaly FROM run_anomalies r JOIN runs USING (run_id) "
         "WHERE file_name = 'flagged.pt.trace.json' AND anomaly = 'duplicate_events'"],
        capture_output=True, text=True, env=driver_env())
    assert [r["anomaly"] for r in json.loads(sql.stdout)] == ["duplicate_events"]
    out = tmp_path / "rep"
    subprocess.run([TRACEWH, "report", "-w", wh, "--run", "file_name=flagged.pt.trace.json",
                    "--out", str(out)], check=True, capture_output=True, env=driver_env())
    text = (out / "report.md").read_text()
    assert "EXCLUDED (duplicated_events)" in text
