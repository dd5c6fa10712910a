"""The compiled staging path (tracewh.ingest.fast, tracewh/ingest/_fastshred.c).

It must stage exactly the rows the pure path stages (rows.prepare_events, orjson,
DuckDB's 02_shred.sql): every test here stages the same input both ways and
compares every staging table, value by value (``args_json`` as parsed JSON: the two
paths write the same values, not always the same spacing of numbers).
"""

from __future__ import annotations

import json
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers_hostile import handwritten
from helpers_staging import stage as _stage
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracewh.core.sqlfiles import SQL_DIR
from tracewh.ingest import fast
from tracewh.ingest.pipeline import IngestOptions, ingest_file
from tracewh.ingest.shred import STAGING_TABLES
from tracewh.schema.arrow import GPU_OP_CATEGORIES, PYTHON_CATEGORY
from tracewh.storage.store import Store
from tracewh.synth import SynthConfig, write_trace

module = fast.native()
pytestmark = pytest.mark.skipif(module is None, reason="tracewh.ingest._fastshred is not built")

_KIND_TYPES = {0: "BIGINT", 1: "DOUBLE", 2: "VARCHAR"}


def assert_same_staging(path: Path, tmp: Path, **kw: Any) -> dict[str, Any]:
    """Stage ``path`` both ways; every table, the event count and anomalies must agree."""
    pure_summary, pure = _stage(path, tmp / "pure", native=False, **kw)
    fast_summary, compiled = _stage(path, tmp / "fast", native=True, **kw)
    assert fast_summary == pure_summary
    for table in STAGING_TABLES:
        a, b = pure.get(table, []), compiled.get(table, [])
        assert len(a) == len(b), (path.name, table)
        for x, y in zip(a, b, strict=True):
            assert x == y, (path.name, table, x, y)
    return compiled


def test_the_compiled_columns_are_the_staging_columns() -> None:
    assert module is not None
    con = duckdb.connect()
    con.execute((SQL_DIR / "ingest" / "00_stage_tables.sql").read_text("utf-8"))
    for table, columns in module.columns().items():
        expected = [(r[0], r[1]) for r in con.execute(f"DESCRIBE {table}").fetchall()]
        assert [(name, _KIND_TYPES[kind]) for name, kind in columns] == expected, table
    assert set(module.columns()) == {"ev", "gev", "py", "gpu", "flow", "inst", "thr"}


@pytest.mark.parametrize(
    "text",
    ["0", "1", "-1", "0.001", "0.0005", "123.4567", "1700000000000000.123", "-0.5", "1E+3",
     "1.5E-7", "9223372036854775.807", "-9223372036854775.808", "2.50", "-0.0", "1e2"],
)
def test_exact_nanoseconds_of_decimal_text(text: str) -> None:
    assert module is not None
    assert module.ns_of_text(text) == int(Decimal(text) * 1000)


@pytest.mark.parametrize(
    "text", ["NaN", "Infinity", "-Infinity", "9223372036854775.808", "1E+30", "", "-", "1.2.3",
             "12345678901234567890123456789"],
)
def test_what_is_not_an_int64_of_nanoseconds_is_left_to_python(text: str) -> None:
    assert module is not None
    assert module.ns_of_text(text) is None


@settings(max_examples=300, deadline=None, database=None, derandomize=True)
@given(st.decimals(allow_nan=False, allow_infinity=False, min_value=-(10**15), max_value=10**15))
def test_nanoseconds_agree_with_decimal(value: Decimal) -> None:
    assert module is not None
    got = module.ns_of_text(str(value))
    if got is not None:
        assert got == int(value * 1000)
    else:  # only refused where Python's path has work to do: beyond int64 or 25 digits
        assert len(value.as_tuple().digits) > 25 or not -(1 << 63) <= int(value * 1000) < 1 << 63


def _shred(events: list[Any], skip_python: bool = False) -> tuple[dict[str, Any], list[Any]]:
    assert module is not None
    shredder = module.Shredder(Decimal, frozenset(GPU_OP_CATEGORIES), PYTHON_CATEGORY, skip_python)
    slow: list[tuple[int, Any]] = []
    assert shredder.shred(iter(events), 100, slow) == len(events)
    return shredder.take_arrow(), slow


_BASE = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2,
         "ts": Decimal("1.5"), "dur": 3}


@pytest.mark.parametrize(
    "change",
    [
        {"pid": "Spans"}, {"pid": "\u00b2"}, {"tid": True}, {"pid": 1 << 63}, {"name": None}, {"name": 5},
        {"cat": ["x"]}, {"ts": None}, {"ts": "1.5"}, {"ts": Decimal("NaN")},
        {"ts": Decimal("1" * 30)}, {"dur": -1}, {"dur": "2"}, {"args": [1]},
        {"args": {"correlation": "7"}}, {"args": {"External id": 1 << 64}},
        {"args": {"x": 1 << 64}}, {"args": {"x": "\ud800"}}, {"name": "\udcff"},
        {"cat": "kernel", "args": {"grid": [1, 2]}},
        {"cat": "kernel", "args": {"grid": [1, 2, 3.5]}},
        {"cat": "kernel", "args": {"registers per thread": Decimal("1.5")}},
        {"cat": "kernel", "args": {"est. achieved occupancy %": "high"}},
        {"ph": "C"}, {"ph": "M"}, {"ph": "B"}, {"ph": 1}, {"ph": "s", "id": None},
        {"ph": "s", "id": "0x1"}, {"ph": "f", "id": 1, "bp": 3},
        {"ph": "s", "id": 1, "args": 0},  # found by the generated-events test
        {"ph": "i", "s": 1}, {"ph": "i", "args": {"Bytes": Decimal("1.5")}},
    ],
)
def test_unusual_events_are_handed_back_untouched(change: dict[str, Any]) -> None:
    event = {**_BASE, **change}
    before = repr(event)
    staged, slow = _shred([dict(_BASE), event, dict(_BASE)])
    assert [i for i, _ in slow] == [1]
    assert repr(slow[0][1]) == before  # not modified: the pure path sees what ijson yielded
    assert staged["ev"].num_rows == 2  # the two ordinary events


def test_ordinary_events_are_typed_exactly() -> None:
    staged, slow = _shred([
        {**_BASE, "args": {"External id": 7, "correlation": 9, "Input Dims": [[2, 3]],
                           "note": "a\n\"b\"", "scale": Decimal("0.25")}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7,
         "ts": Decimal("1700000000000000.123"), "dur": Decimal("2.0005"),
         "args": {"correlation": 9, "grid": [4, 1, 1], "block": [128, 1, 1],
                  "blocks per SM": Decimal("0.5"), "stream": 7}},
        {"ph": "s", "cat": "ac2g", "name": "", "id": 9, "pid": 1, "tid": 2, "ts": 5},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 2,
         "ts": 6, "s": "t", "args": {"Total Allocated": 1024, "Device Id": -1}},
    ])
    assert slow == []

    def column(table: str, name: str) -> list[Any]:
        rows = duckdb.connect().from_arrow(staged[table]).select(f'"{name}"').fetchall()
        return [r[0] for r in rows]

    def both(name: str) -> list[Any]:  # the CPU op (ev), then the kernel (gev)
        return column("ev", name) + column("gev", name)

    assert both("ts_ns") == [1500, 1700000000000000123]
    assert both("dur_ns") == [3000, 2000]  # 2000.5 ns truncated, as int(Decimal) does
    assert both("external_id") == [7, None]
    assert both("correlation") == [9, 9]
    assert both("stream") == [None, 7]
    assert both("device") == [None, 0]  # a GPU op without a device arg: its pid
    args = [json.loads(a) for a in both("args_json")]
    assert args[0] == {"Input Dims": [[2, 3]], "note": "a\n\"b\"", "scale": 0.25}
    assert args[1] == {"grid": [4, 1, 1], "block": [128, 1, 1], "blocks per SM": 0.5}
    assert column("gpu", "grid_x") == [4] and column("gpu", "block_x") == [128]
    assert column("gpu", "blocks_per_sm") == [0.5] and column("gpu", "bytes") == [None]
    assert column("flow", "flow_id") == [9] and column("flow", "name") == [""]
    assert column("inst", "total_allocated") == [1024] and column("inst", "device_id") == [-1]
    assert column("inst", "scope") == ["t"]


def test_skip_python_is_counted_here() -> None:
    assert module is not None
    shredder = module.Shredder(Decimal, frozenset(GPU_OP_CATEGORIES), PYTHON_CATEGORY, True)
    slow: list[tuple[int, Any]] = []
    events = [{**_BASE, "cat": "python_function"}, dict(_BASE)]
    assert shredder.shred(iter(events), 10, slow) == 2
    assert slow == [] and shredder.skipped_python == 1 and shredder.index == 2


def test_parser_errors_propagate() -> None:
    assert module is not None

    def broken() -> Any:
        yield dict(_BASE)
        raise ValueError("corrupt")

    shredder = module.Shredder(Decimal, frozenset(), PYTHON_CATEGORY)
    with pytest.raises(ValueError, match="corrupt"):
        shredder.shred(broken(), 10, [])


_LARGE_TRACE_BYTES = 1_500_000  # gzip: the five largest shared traces (~2/3 of this test's time)


@pytest.mark.parametrize(
    ("large", "min_rows"),
    [pytest.param(False, 50_000, id="small"),
     pytest.param(True, 100_000, id="large", marks=pytest.mark.slow)],
)
def test_real_traces_stage_the_same_both_ways(
    shared_traces: Path, tmp_path: Path, large: bool, min_rows: int
) -> None:
    traces = sorted(p for p in shared_traces.iterdir() if p.name.endswith((".json", ".json.gz"))
                    and (p.stat().st_size > _LARGE_TRACE_BYTES) == large)
    assert len(traces) >= (5 if large else 20)
    fast_rows = 0
    for k, path in enumerate(traces):
        tables = assert_same_staging(path, tmp_path / str(k))
        fast_rows += sum(len(v) for v in tables.values())
    assert fast_rows > min_rows


@pytest.mark.parametrize(
    "config",
    [SynthConfig(steps=3, layers=2, python=True, seed=5),
     SynthConfig(steps=2, layers=2, seed=9, python=True, flavor="rocm"),
     SynthConfig(steps=2, layers=2, seed=4, ranks=2)],
)
@pytest.mark.parametrize("skip_python", [False, True])
def test_synthetic_traces_stage_the_same_both_ways(
    tmp_path: Path, config: SynthConfig, skip_python: bool
) -> None:
    trace = tmp_path / "t.pt.trace.json.gz"
    write_trace(trace, config)
    assert_same_staging(trace, tmp_path / "s", skip_python=skip_python)


def test_split_parts_stage_the_same_both_ways(tmp_path: Path) -> None:
    trace = tmp_path / "t.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=4, layers=4, python=True, seed=3))
    assert_same_staging(trace, tmp_path / "s", parts=3, min_split_bytes=1)


@pytest.mark.slow  # ~10-30 s: make test-all (the default suite's 8-minute budget)
def test_handwritten_oddities_stage_the_same_both_ways(tmp_path: Path) -> None:
    for k, case in enumerate(handwritten()):
        path = tmp_path / f"c{k}{case.suffix}"
        path.write_bytes(case.data)
        assert_same_staging(path, tmp_path / f"s{k}")


def test_a_whole_ingest_is_the_same_both_ways(tmp_path: Path) -> None:
    trace = tmp_path / "t.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=3, layers=3, python=True, seed=11))
    out = {}
    for native in (False, True):
        store = Store(tmp_path / f"wh-{native}")
        store.create()
        result = ingest_file(store, trace, IngestOptions(native=native))
        assert result.outcome == "ingested", result.error
        con = duckdb.connect()
        tables = {}
        for table, files in store.snapshot_files().items():
            if not files or table == "ingest_log":
                continue
            rows = con.execute(
                f"SELECT * EXCLUDE (ingest_id) FROM read_parquet({[str(f) for f in files]!r})"
            ).fetchall()
            tables[table] = sorted(
                (tuple(v for v in r if not hasattr(v, "tzinfo")) for r in rows), key=repr
            )
        out[native] = tables
    assert out[True].keys() == out[False].keys()
    for table in out[True]:
        if table == "runs":
            continue  # rows_json etc. compared below; ingested_at differs
        assert out[True][table] == out[False][table], table


_VALUE = st.one_of(
    st.integers(min_value=-(1 << 66), max_value=1 << 66), st.none(), st.booleans(),
    st.text(max_size=6), st.decimals(allow_nan=False, allow_infinity=False, places=3,
                                     min_value=-(10**17), max_value=10**17),
    st.lists(st.integers(min_value=-5, max_value=1 << 64), max_size=4),
)
_EVENT = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "X", "X", "s", "f", "t", "i", "I", "C", "M"])},
    optional={
        "cat": st.sampled_from([*sorted(GPU_OP_CATEGORIES), "cpu_op", PYTHON_CATEGORY]) | _VALUE,
        "name": st.sampled_from(["aten::mm", "gemm", "ProfilerStep#3", "thread_name"]) | _VALUE,
        "pid": st.sampled_from([0, 1, -5, 1 << 63, "Spans"]) | _VALUE,
        "tid": st.sampled_from([0, 7, (1 << 64) - 1]) | _VALUE,
        "ts": _VALUE, "dur": _VALUE, "id": _VALUE, "bp": st.sampled_from(["e"]) | _VALUE,
        "s": st.sampled_from(["t", "p"]) | _VALUE,
        "args": st.dictionaries(
            st.sampled_from(["correlation", "External id", "external id", "stream", "device",
                             "grid", "block", "registers per thread", "blocks per SM",
                             "Python id", "Python parent id", "Bytes", "Total Allocated",
                             "name", "sort_index", "x"]),
            _VALUE, max_size=5,
        ) | _VALUE,
    },
)


def _write(events: list[Any], path: Path) -> None:
    def enc(o: Any) -> str:
        if isinstance(o, dict):
            return "{" + ", ".join(f"{json.dumps(k)}: {enc(v)}" for k, v in o.items()) + "}"
        if isinstance(o, list):
            return "[" + ", ".join(enc(v) for v in o) + "]"
        if isinstance(o, Decimal):
            return str(o)  # a JSON number with its exact digits
        return json.dumps(o)

    path.write_text('{"traceEvents": ' + enc(events) + "}", encoding="utf-8")


def _check_generated(tmp_path: Path, events: list[Any], skip_python: bool) -> None:
    case = Path(tempfile.mkdtemp(dir=tmp_path))
    _write(events, case / "t.json")
    assert_same_staging(case / "t.json", case, skip_python=skip_python)


@settings(max_examples=15, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(events=st.lists(_EVENT, min_size=1, max_size=20), skip_python=st.booleans())
def test_generated_events_stage_the_same_both_ways(
    tmp_path: Path, events: list[Any], skip_python: bool
) -> None:
    _check_generated(tmp_path, events, skip_python)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(events=st.lists(_EVENT, min_size=1, max_size=40), skip_python=st.booleans())
def test_generated_events_stage_the_same_both_ways_many(
    tmp_path: Path, events: list[Any], skip_python: bool
) -> None:
    _check_generated(tmp_path, events, skip_python)


def test_arrow_chunks_match_the_raw_buffers() -> None:
    """take_arrow()'s C stream (read by pyarrow, an independent consumer) holds the same
    values, types and nulls as take()'s raw buffers; it can be exported twice and
    outlives the chunk object."""
    import pyarrow as pa

    assert module is not None
    events = [
        {**_BASE, "args": {"External id": 7, "note": "x" * 300}},
        {**_BASE, "name": "", "args": {}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 5, "dur": 1,
         "args": {"correlation": 9, "grid": [4, 1, 1], "blocks per SM": Decimal("0.5")}},
        {"ph": "s", "cat": "ac2g", "name": "", "id": 9, "pid": 1, "tid": 2, "ts": 5},
    ]
    kinds = {0: pa.int64(), 1: pa.float64(), 2: pa.large_string()}

    def shred() -> Any:
        shredder = module.Shredder(Decimal, frozenset(GPU_OP_CATEGORIES), PYTHON_CATEGORY, False)
        assert shredder.shred(iter([dict(e) for e in events]), 100, []) == len(events)
        return shredder

    raw = shred().take()
    chunks = shred().take_arrow()
    assert sorted(raw) == sorted(chunks)
    for table, columns in raw.items():
        expected = pa.table({
            name: pa.Array.from_buffers(
                kinds[kind], n,
                [pa.py_buffer(valid) if nulls else None,
                 *([pa.py_buffer(offsets)] if offsets is not None else []),
                 pa.py_buffer(data)],
                null_count=nulls,
            )
            for name, kind, n, nulls, valid, data, offsets in columns
        })
        chunk = chunks.pop(table)
        assert chunk.num_rows == expected.num_rows
        assert chunk.column_names == tuple(expected.column_names)
        first = pa.RecordBatchReader.from_stream(chunk).read_all()
        capsule = chunk.__arrow_c_stream__()
        del chunk  # the stream keeps the buffers
        again = pa.RecordBatchReader._import_from_c_capsule(capsule).read_all()
        assert first.equals(expected) and again.equals(expected), table
    assert not chunks


def test_the_writer_connection_is_kept_between_small_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's small parts are held in memory (``Staged.held``: no file until one is
    needed) and share one writer connection (``StageConnections.writer``) when written;
    each stages the rows it stages alone; a part of several chunks closes it."""
    from helpers_staging import rows

    from tracewh.ingest.parts import stage_file, write_held
    from tracewh.ingest.shred import StageConnections, stage_part, stager_for

    traces = []
    for seed in (1, 2, 3):
        trace = tmp_path / f"t{seed}.pt.trace.json.gz"
        write_trace(trace, SynthConfig(steps=2, layers=2, python=True, seed=seed))
        traces.append(trace)
    connections = StageConnections()
    kept: list[Any] = []
    try:
        for k, trace in enumerate(traces):
            alone, shared = tmp_path / f"alone{k}", tmp_path / f"shared{k}"
            alone.mkdir()
            shared.mkdir()
            a = stage_file(trace, alone, stager=stager_for(True))
            b = stage_file(trace, shared, stager=stager_for(True), connections=connections)
            assert a.held is None and b.held  # held: no staged file, no DuckDB yet
            assert not list(Path(b.parts[0][0]).rglob("*.parquet"))
            assert connections.writer._con is None or k > 0
            write_held(b, connections.writer)
            assert b.held is None
            kept.append(connections.writer._con)
            staged_ev = Path(b.parts[0][0]) / "ev"
            # a table with staged files gets no empty schema file beside them
            names = sorted(f.name for f in staged_ev.glob("*.parquet"))
            assert "fast-000000.parquet" in names and "schema.parquet" not in names
            assert (a.events, a.anomalies) == (b.events, b.anomalies)
            for table in STAGING_TABLES:
                assert rows(Path(b.parts[0][0]), table) == rows(Path(a.parts[0][0]), table), (
                    trace.name, table)
        assert kept[0] is not None and kept[0] is kept[1] is kept[2]
        # a larger part: the connection is closed, not kept
        big = tmp_path / "big"
        big.mkdir()
        monkeypatch.setattr(fast, "KEEP_EVENTS", 10)
        monkeypatch.setattr(fast, "HOLD_EVENTS", 10)  # too large to hold: written
        part = stage_part(traces[0], big, stager=stager_for(True), connections=connections)
        assert part.held is None and list((big / "ev").glob("fast-*.parquet"))
        assert connections.writer._con is None
    finally:
        connections.close()
    assert connections.writer._con is None
