"""Hostile input: every file is ingested with its oddity recorded, or rejected with one
clean line naming it; never a traceback, a partial run, or a stopped batch."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers_hostile import Case, corpus, handwritten
from helpers_ingest import (
    expected_rows,
    incomplete_runs,
    one_line_error,
    read_runs,
    staging_leftovers,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracewh.api import Warehouse
from tracewh.ingest.pipeline import IngestOptions, ingest_file


def _write(folder: Path, cases: list[Case]) -> dict[str, Case]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for i, case in enumerate(cases):
        path = folder / f"{i:04d}_{case.name}{case.suffix}"
        path.write_bytes(case.data)
        out[str(path)] = case
    return out


def _check_batch(wh: Warehouse, files: dict[str, Case]) -> Counter[str]:
    """Ingest ``files`` as one batch and check every result; returns outcome counts."""
    known = {r["run_id"] for r in read_runs(wh.root)} if wh.store.exists() else set()
    report = wh.ingest(sorted(files))
    assert len(report.results) == len(files)  # the batch went through every file
    runs = {r["run_id"]: r for r in read_runs(wh.root)}
    tally: Counter[str] = Counter()
    for result in report.results:
        case = files[result.path]
        where = f"{case.name}: {result.outcome} {result.error}"
        assert result.outcome in ("ingested", "failed"), where
        tally[result.outcome] += 1
        if result.outcome == "failed":
            error = one_line_error(result, Path(result.path))
            assert case.expect != "ok", where
            assert case.detail is None or case.detail in error, where
            assert result.run_id not in runs, where
        else:
            assert case.expect != "fail", where
            run = runs[result.run_id]
            anomalies = json.loads(run["anomalies_json"] or "{}")
            assert case.detail is None or case.detail in anomalies, (where, anomalies)
    assert set(runs) - known == {r.run_id for r in report.results if r.outcome == "ingested"}
    assert incomplete_runs(wh.root) == []
    verify = wh.verify()
    assert verify.ok, verify.problems
    assert staging_leftovers(wh.root) == []
    return tally


#: "ok" cases in the default suite (each costs a full commit); the slow test runs them all
DEFAULT_OK = {
    "non_object_events", "missing_ph", "missing_ts", "ts_string", "negative_dur",
    "ts_beyond_int64", "pid_beyond_uint64", "args_not_object", "megabyte_kernel_name",
}


def test_handwritten_oddities(tmp_path: Path) -> None:
    cases = [c for c in handwritten() if not c.bug and (c.expect != "ok" or c.name in DEFAULT_OK)]
    assert len(cases) >= 38
    tally = _check_batch(Warehouse(tmp_path / "wh"), _write(tmp_path / "in", cases))
    assert tally["ingested"] >= len(DEFAULT_OK) and tally["failed"] >= 20


def test_damaged_copies_of_a_real_trace(tmp_path: Path) -> None:
    names = {h.name for h in handwritten()}
    cases = [c for c in corpus(tmp_path, truncate=3, flip=6) if c.name not in names]
    assert len(cases) >= 12
    _check_batch(Warehouse(tmp_path / "wh"), _write(tmp_path / "in", cases))


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c.name) for c in handwritten() if c.bug]
)
@pytest.mark.xfail(strict=True, reason="bug: internal error on hostile input (see Case.bug)")
def test_known_bugs_fail_cleanly(tmp_path: Path, case: Case) -> None:
    _check_batch(Warehouse(tmp_path / "wh"), _write(tmp_path / "in", [case]))


@pytest.mark.slow
def test_full_hostile_corpus(tmp_path: Path) -> None:
    """Hundreds of inputs, in batches of 40 into one warehouse, verified after each batch."""
    cases = [c for c in corpus(tmp_path, truncate=100, flip=240) if not c.bug]
    assert len(cases) >= 380
    wh = Warehouse(tmp_path / "wh")
    tally: Counter[str] = Counter()
    for start in range(0, len(cases), 40):
        tally += _check_batch(wh, _write(tmp_path / f"in{start}", cases[start : start + 40]))
    print(f"\nhostile corpus: {len(cases)} inputs, {dict(tally)}")


# ---------------------------------------------------------------- hypothesis
_NUM = st.one_of(
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.integers(min_value=0, max_value=10**16),
    st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-(10**16), max_value=10**16),
)
_ANY = st.one_of(_NUM, st.text(max_size=8), st.none(), st.booleans(),
                 st.lists(st.integers(), max_size=3))
_EVENT = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.sampled_from(["X", "X", "X", "i", "I", "C", "M", "s", "f", "t", "B", "", "x"]) | _ANY,
        "cat": st.sampled_from(["cpu_op", "kernel", "cuda_runtime", "python_function", "gpu_memcpy",
                                "ac2g", "Kernel", "Runtime"]) | _ANY,
        "name": st.sampled_from(["aten::mm", "ProfilerStep#1", "ProfilerStep#2", "process_name",
                                 "cudaLaunchKernel"]) | _ANY,
        "pid": st.sampled_from([0, 1, "Spans", ""]) | _ANY,
        "tid": st.sampled_from([0, 7, "Traces"]) | _ANY,
        "ts": _NUM | _ANY,
        "dur": _NUM | _ANY,
        "id": _ANY,
        "args": st.dictionaries(
            st.sampled_from(["correlation", "External id", "stream", "device", "grid", "name",
                             "sort_index", "Total Allocated", "Python id", "bytes", "x"]) | st.text(max_size=4),
            _ANY, max_size=4,
        ) | _ANY,
    },
)


def _dump(events: list[Any], header: dict[str, Any]) -> bytes:
    def enc(o: Any) -> str:
        if isinstance(o, dict):
            return "{" + ", ".join(f"{json.dumps(k)}: {enc(v)}" for k, v in o.items()) + "}"
        if isinstance(o, list):
            return "[" + ", ".join(enc(v) for v in o) + "]"
        if not isinstance(o, int | str | bool | None.__class__):
            return str(o)  # a Decimal, written as a JSON number with its exact digits
        return json.dumps(o)
    head = "".join(f"{json.dumps(k)}: {enc(v)}, " for k, v in header.items())
    return ("{" + head + '"traceEvents": ' + enc(events) + "}").encode()


def _hypothesis_check(root: Path, folder: Path, events: list[Any], header: dict[str, Any]) -> None:
    data = _dump(events, header)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"h{abs(hash(data))}.json"
    path.write_bytes(data)
    from tracewh.store import Store

    store = Store(root)
    store.create()
    result = ingest_file(store, path, IngestOptions())
    assert result.outcome in ("ingested", "failed", "skipped"), result
    if result.outcome == "failed":
        one_line_error(result, path)
        assert result.run_id not in {r["run_id"] for r in read_runs(root)}
        return
    run = {r["run_id"]: r for r in read_runs(root)}[result.run_id]
    recorded = json.loads(run["rows_json"])
    expected = expected_rows(events)
    for table in ("events", "gpu_ops", "python", "flows", "instants", "counters"):
        assert recorded.get(table, 0) == expected[table], (table, recorded, expected)
    assert run["n_events"] == len(events)


_HEADER = st.dictionaries(
    st.sampled_from(["schemaVersion", "baseTimeNanoseconds", "distributedInfo", "deviceProperties"]),
    _ANY | st.fixed_dictionaries({"rank": _ANY}),
    max_size=3,
)


@settings(max_examples=8, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(events=st.lists(_EVENT | _ANY, min_size=0, max_size=12), header=_HEADER)
def test_generated_event_lists(tmp_path: Path, events: list[Any], header: dict[str, Any]) -> None:
    _hypothesis_check(tmp_path / "wh", tmp_path / "in", events, header)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(events=st.lists(_EVENT | _ANY, min_size=0, max_size=30), header=_HEADER)
def test_generated_event_lists_many(tmp_path: Path, events: list[Any], header: dict[str, Any]) -> None:
    _hypothesis_check(tmp_path / "wh", tmp_path / "in", events, header)


def test_after_hostile_batches_the_warehouse_still_ingests(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    files = _write(tmp_path / "in", [c for c in handwritten() if c.expect == "fail"][:6])
    wh.ingest(sorted(files))
    good = _write(tmp_path / "good", [c for c in handwritten() if c.name == "missing_dur"])
    (result,) = wh.ingest(list(good)).results
    assert result.outcome == "ingested"
    assert wh.sql("SELECT count(*) AS n FROM runs")["n"][0] == 1
