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
    "long_string_escapes", "duplicated_kernel", "kernel_far_before_trace", "correlation_reused",
    "markup_and_escape_names", "trace_events_named_in_values", "huge_input_dims",
}


def test_handwritten_oddities(tmp_path: Path) -> None:
    cases = [c for c in handwritten() if c.expect != "ok" or c.name in DEFAULT_OK]
    assert len(cases) >= 38
    tally = _check_batch(Warehouse(tmp_path / "wh"), _write(tmp_path / "in", cases))
    assert tally["ingested"] >= len(DEFAULT_OK) and tally["failed"] >= 20


def test_damaged_copies_of_a_real_trace(tmp_path: Path) -> None:
    names = {h.name for h in handwritten()}
    cases = [c for c in corpus(tmp_path, truncate=3, flip=6) if c.name not in names]
    assert len(cases) >= 12
    _check_batch(Warehouse(tmp_path / "wh"), _write(tmp_path / "in", cases))


MARKER = "<nested deeper than 254 levels>"  # orjson's depth limit, written by hand


def test_deep_nesting_is_clipped_and_recorded(tmp_path: Path) -> None:
    """~5000 levels of ``[[[...]]]`` in args, as an event, in the header and in the trailer."""
    cases = [c for c in handwritten() if c.name.startswith("deep_")]
    assert len(cases) == 4
    files = _write(tmp_path / "in", cases)
    wh = Warehouse(tmp_path / "wh")
    assert _check_batch(wh, files) == Counter(ingested=4)
    runs = {Path(r["source_path"]).name.split("_", 1)[1]: r for r in read_runs(wh.root)}
    for name in ("deep_args.json", "deep_event.json", "deep_header.json", "deep_trailer.json"):
        assert json.loads(runs[name]["anomalies_json"])["deep_nesting"] == 1, name
    for name, other in (("deep_header.json", ("traceName", "t")),
                        ("deep_trailer.json", ("schemaVersion", 1))):
        meta = json.loads(runs[name]["metadata_json"])
        value = meta["deep"]
        for _ in range(253):  # the metadata object is level 1, "deep" level 2
            assert isinstance(value, list) and len(value) == 1, name
            value = value[0]
        assert value == MARKER, name
        assert meta[other[0]] == other[1], name
    args = wh.sql(
        "SELECT e.args_json FROM events e JOIN runs r USING (run_id) "
        "WHERE e.name = 'd' AND r.file_name LIKE '%deep_args%'"
    )["args_json"][0]
    # orjson counts the chunk's list as level 1: row 2, args 3, lists 4..254, then the marker
    assert MARKER in args and args.count("[") == 251
    raw = wh.sql(
        "SELECT i.args_json FROM instants i JOIN runs r USING (run_id) "
        "WHERE r.file_name LIKE '%deep_event%'"
    )["args_json"][0]
    assert MARKER in raw


def test_base_time_outside_int64_keeps_relative_times(tmp_path: Path) -> None:
    cases = [c for c in handwritten() if c.name.startswith("base_time_")]
    assert len(cases) == 5
    wh = Warehouse(tmp_path / "wh")
    assert _check_batch(wh, _write(tmp_path / "in", cases)) == Counter(ingested=5)
    for run in read_runs(wh.root):
        name = run["file_name"].split("_", 1)[1]
        anomalies = json.loads(run["anomalies_json"])
        if name == "base_time_string.json":
            assert anomalies == {"mistyped_base_time": 1}
        else:
            assert anomalies == {"base_time_out_of_range": 1}, name
        assert run["base_time_ns"] is None, name
        assert run["start_ns"] == (-(10**12) if "underflows" in name else 100_000), name


def test_mistyped_gpu_args_are_counted(tmp_path: Path) -> None:
    (case,) = [c for c in handwritten() if c.name == "mistyped_kernel_args"]
    wh = Warehouse(tmp_path / "wh")
    _check_batch(wh, _write(tmp_path / "in", [case]))
    (run,) = read_runs(wh.root)
    assert json.loads(run["anomalies_json"]) == {
        "mistyped:grid": 1, "mistyped:block": 1, "mistyped:registers per thread": 1,
    }
    ops = wh.sql("SELECT name, grid_x, block_x, registers_per_thread FROM gpu_ops ORDER BY name")
    assert ops.rows() == [("gemm", 1, None, None), ("odd", None, None, None)]


def test_json_errors_are_one_clean_line(tmp_path: Path) -> None:
    """yajl's three-line message in one line: no bytes repr, no padding, truncation only at EOF."""
    wanted = {
        "unquoted_na": "corrupt JSON: lexical error: invalid char in json text "
        "(near: '1, \"tid\": 1, \"ts\": 1, \"dur\": N/A} ], \"traceName\": \"t\"}')",
        "bom": "corrupt JSON: lexical error: invalid char in json text (near: '\\ufeff{",
        "single_quotes": "corrupt JSON: lexical error: invalid char in json text (near: ",
        "trailing_garbage": "corrupt JSON: parse error: trailing garbage (near: ",
        "invalid_utf8_name": "corrupt JSON: lexical error: invalid bytes in UTF8 string "
        "(near: '\"cat\": \"cpu_op\", \"name\": \"ab\\xff\\xfecd\"",
        "utf16": "corrupt JSON: lexical error: invalid char in json text (near: '\\xff\\xfe{')",
        "raw_control_chars": "(near: '\", \"cat\": \"cpu_op\", \"name\": \"a\\x01b c d\"",
        "lone_surrogate_key": "corrupt JSON: a string holds an escaped lone surrogate (\\udfff)",
        "unterminated_string": "truncated JSON (the file ends early): parse error: premature EOF",
        "unterminated_last": "truncated JSON (the file ends early): parse error: premature EOF",
        "trace_events_null": "traceEvents is not a list (found null)",
    }
    cases = [c for c in handwritten() if c.name in wanted]
    files = _write(tmp_path / "in", cases)
    report = Warehouse(tmp_path / "wh").ingest(sorted(files))
    for result in report.results:
        case = files[result.path]
        assert result.outcome == "failed", case.name
        error = one_line_error(result, Path(result.path))
        assert wanted[case.name] in error, (case.name, error)
        assert "  " not in error and "b'" not in error and "right here" not in error, error
        assert len(error) < len(result.path) + 260, error
        assert ("truncated" in error) == case.name.startswith("unterminated_"), error


@pytest.mark.slow
def test_full_hostile_corpus(tmp_path: Path) -> None:
    """Hundreds of inputs, in batches of 40 into one warehouse, verified after each batch."""
    cases = corpus(tmp_path, truncate=100, flip=240)
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
    from tracewh.storage.store import Store

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
