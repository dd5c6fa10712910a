"""The direct scanner (tracewh/ingest/_fastscan.c, fast.scan_events).

It reads the document's bytes itself; whatever it stages must be exactly what the
ijson paths stage (the compiled shredder of ijson's dicts, and the pure path), and
whatever it is not sure of must end in the ijson path's own result or error. Every
comparison here stages the same file three ways.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from helpers_staging import stage as _stage

from tracewh.ingest import fast
from tracewh.ingest.shred import STAGING_TABLES
from tracewh.schema.arrow import GPU_OP_CATEGORIES, PYTHON_CATEGORY

module = fast.native()
pytestmark = pytest.mark.skipif(not fast.scanner(module), reason="the scanner is not built")


def _three_ways(path: Path, tmp: Path, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> Any:
    """Stage ``path`` pure, through ijson's dicts and scanned; all must agree."""
    pure = _stage(path, tmp / "pure", native=False, **kw)
    scanned = _stage(path, tmp / "scan", native=True, **kw)
    with monkeypatch.context() as m:
        m.setattr(fast, "scanner", lambda _module: False)
        dicts = _stage(path, tmp / "dicts", native=True, **kw)
    for other in (dicts, scanned):
        assert other[0] == pure[0], path.name
        for table in STAGING_TABLES:
            assert other[1].get(table, []) == pure[1].get(table, []), (path.name, table)
    return scanned


def _scan(data: bytes, chunk: int = 1 << 16, skip_python: bool = False) -> tuple[int, Any, list[Any]]:
    assert module is not None
    shredder = module.Shredder(Decimal, frozenset(GPU_OP_CATEGORIES), PYTHON_CATEGORY, skip_python)
    pos = 0

    def read() -> bytes:
        nonlocal pos
        out = data[pos : pos + chunk]
        pos += len(out)
        return out

    slow: list[Any] = []
    while (status := shredder.scan(read, 7, slow)) == 0:
        pass
    return status, shredder, slow


_EV = ('{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, '
       '"ts": 1700000000000000.125, "dur": 3.5, "args": {"External id": 7}}')

ODD_EVENTS = [
    # escapes in names, categories, args keys and values
    '{"ph": "X", "cat": "cpu_op", "name": "a\\"b\\\\c\\/d\\n\\t\\u00e9\\ud83d\\ude00\\u0001",'
    ' "pid": 1, "tid": 1, "ts": 5, "dur": 1}',
    '{"ph": "\\u0058", "cat": "cpu\\u005fop", "name": "x", "pid": 1, "tid": 1, "ts": 5, "dur": 1}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5, "dur": 1,'
    ' "args": {"n\\u00e4me": 1, "v": "caf\\u00e9 \\"q\\"", "raw": "é ü \\u2028"}}',
    '{"p\\u0068": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5}',
    # duplicate keys: the dict keeps the last value at the first position
    '{"ph": "X", "cat": "cpu_op", "name": "x", "name": "y", "pid": 1, "tid": 1, "ts": 5}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5,'
    ' "args": {"a": 1, "b": 2, "a": 3}}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5,'
    ' "args": {"nested": {"k": 1, "k": [2]}}}',
    # numbers: exponents, negative zero, int64 edges, beyond int64, long fractions
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": -0, "tid": 9223372036854775807,'
    ' "ts": 1E3, "dur": 0.0005, "args": {"f": 1.5e-7, "g": -0.0, "h": 1E400, "i": 12}}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": -9223372036854775808,'
    ' "ts": 1.0e1, "args": {"big": 9223372036854775808}}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5,'
    ' "args": {"f": 0.1000000000000000055511151231257827021181583404541015625}}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 9223372036854775.807}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 9223372036854776}',
    # the external id spellings, in either order, with or without the other
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5,'
    ' "args": {"external id": 3, "z": 1}}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5,'
    ' "args": {"z": 1, "external id": 3}}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5,'
    ' "args": {"external id": 3}}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5,'
    ' "args": {"external id": 3, "External id": 4}}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5,'
    ' "args": {"External id": null, "a": 0, "external id": 3, "b": 1}}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5,'
    ' "args": {"External id": 4, "external id": "text"}}',
    # python_function ids, GPU args, empty args, instants, flows
    '{"ph": "X", "cat": "python_function", "name": "nn.Module: M_0", "pid": 1, "tid": 1,'
    ' "ts": 5, "dur": 2, "args": {"Python parent id": 1, "Python id": 2, "Python thread": 0}}',
    '{"ph": "X", "cat": "python_function", "name": "f", "pid": 1, "tid": 1, "ts": 5, "dur": 2}',
    '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 6, "dur": 1,'
    ' "args": {}}',
    '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 6, "dur": 1,'
    ' "args": {"correlation": 1}}',
    '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 6, "dur": 1,'
    ' "args": {"correlation": 1, "grid": [ 2 , 1,1 ], "block": [128, 1, 1], "stream": 7,'
    ' "blocks per SM": 0.5, "warps per SM": 4, "est. achieved occupancy %": 100,'
    ' "registers per thread": 32, "shared memory": 0, "memory bandwidth (GB/s)": 1.25e3}}',
    '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 6, "dur": 1,'
    ' "args": {"grid": [2, 1], "x": 1}}',
    '{"ph": "X", "cat": "gpu_memcpy", "name": "m", "pid": 0, "tid": 7, "ts": 6, "dur": 1,'
    ' "args": {"bytes": 4096, "device": 0, "context": 1}}',
    '{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1,'
    ' "ts": 7, "s": "t", "args": {"Total Allocated": 1024, "Bytes": -512, "Addr": 1,'
    ' "Device Type": 1, "Device Id": 0, "Total Reserved": 2048}}',
    '{"ph": "I", "name": "mark", "pid": 1, "tid": 1, "ts": 7, "args": {}}',
    '{"ph": "s", "cat": "ac2g", "name": "", "id": 9, "pid": 1, "tid": 2, "ts": 5,'
    ' "bp": "e", "args": {"x": [1, {"y": null, "z": true, "w": false}]}}',
    '{"ph": "f", "id": 9, "pid": 1, "tid": 2, "ts": 8}',
    # metadata (thr rows): args "name", else "labels"; "sort_index"; no ts needed
    '{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}',
    '{"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "ts": 3,'
    ' "args": {"name": "thread 7 (caf\\u00e9 \\"q\\")"}}',
    '{"ph": "M", "name": "process_labels", "pid": 2, "tid": 0, "args": {"labels": "GPU 0"}}',
    '{"ph": "M", "name": "process_sort_index", "pid": 2, "args": {"sort_index": -5}}',
    '{"ph": "M", "name": "thread_sort_index", "pid": 2, "tid": 3, "ts": 1.5,'
    ' "args": {"sort_index": 9223372036854775807, "name": 12}}',
    '{"ph": "M", "name": "odd", "pid": 2, "args": {"name": null, "labels": "x"}}',
    '{"ph": "M", "name": "odd", "pid": 2, "args": {"labels": -0, "sort_index": null}}',
    '{"ph": "M", "name": "odd", "pid": 2, "args": {"name": "", "sort_index": 1, "z": [1]}}',
    '{"ph": "M", "name": "odd", "args": {}}',
    '{"ph": "M", "name": "odd", "pid": null, "tid": null, "args": null}',
    '{"ph": "M", "pid": 4, "tid": 4, "ts": null}',
    '{"ph": "M", "name": "odd", "pid": 4, "args": {"name": 1.5}}',
    '{"ph": "M", "name": "odd", "pid": 4, "args": {"name": true}}',
    '{"ph": "M", "name": "odd", "pid": 4, "args": {"labels": ["a"]}}',
    '{"ph": "M", "name": "odd", "pid": 4, "args": {"labels": {"a": 1}}}',
    '{"ph": "M", "name": "odd", "pid": 4, "args": {"name": 9223372036854775808}}',
    '{"ph": "M", "name": "odd", "pid": 4, "args": {"sort_index": "5"}}',
    '{"ph": "M", "name": "odd", "pid": 4, "args": {"sort_index": 2.0}}',
    '{"ph": "M", "name": "odd", "pid": 4, "args": {"name": "a", "name": "b"}}',
    '{"ph": "M", "name": "odd", "pid": "Spans", "tid": 1, "args": {"name": "s"}}',
    '{"ph": "M", "name": "odd", "pid": 1, "ts": "5", "args": {"name": "s"}}',
    '{"ph": "M", "name": 5, "pid": 1, "args": {"name": "s"}}',
    '{"ph": "M", "name": "odd", "pid": 1, "args": "s"}',
    # string and uint64 ids (rows._Ids): hashed or wrapped, their text the label
    '{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",'
    ' "tid": "PyTorch Profiler", "ts": 5, "dur": 9, "args": {"Op count": 0}}',
    '{"ph": "i", "name": "Iteration Start: PyTorch Profiler", "pid": "Traces",'
    ' "tid": "Trace PyTorch Profiler", "ts": 5, "s": "g"}',
    '{"ph": "M", "name": "process_sort_index", "pid": "Spans", "tid": 0, "ts": 5,'
    ' "args": {"sort_index": 536870912}}',
    '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 18446744073709551615,'
    ' "ts": 6, "dur": 1, "args": {"correlation": 2}}',
    '{"ph": "X", "cat": "kernel", "name": "k", "pid": 9223372036854775808, "tid": "",'
    ' "ts": 6, "dur": 1}',
    '{"ph": "s", "cat": "ac2g", "name": "", "id": 9, "pid": "caf\\u00e9 q", "tid": "x\\ny",'
    ' "ts": 5}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": "p", "tid": 1, "ts": 5}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": " 7 ", "tid": 1, "ts": 5}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": "stream 7", "tid": "-3", "ts": 5}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 18446744073709551616, "tid": 1, "ts": 5}',
    # handed back: other phases, other types, not an object
    '{"ph": "C", "name": "c", "pid": 1, "ts": 1, "args": {"v": 3}}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": true, "tid": 1, "ts": 5}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1.0, "tid": 1, "ts": 5}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": "5"}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5, "dur": -1}',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5, "args": [1]}',
    '{"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 5}',
    '{"ph": "XX", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5}',
    '{}', '[1, 2]', '"text"', '12', 'null', 'true',
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5, "args": {"d": '
    + "[" * 300 + "]" * 300 + "}}",
    '{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5, "args": {"d": '
    + "[" * 250 + "]" * 250 + "}}",
]


@pytest.mark.parametrize("layout", ["compact", "pretty", "array"])
def test_odd_events_stage_the_same_three_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    events = [_EV, *ODD_EVENTS, _EV]
    if layout == "compact":
        text = '{"traceEvents":[' + ",".join(events) + '],"traceName":"t"}'
    elif layout == "pretty":
        body = ",\n    ".join(events)
        text = ('{\n  "schemaVersion": 1,\n  "deviceProperties": [{"name": "H100"}],\n'
                f'  "traceEvents": [\n    {body}\n  ],\n  "traceName": "t"\n}}\n')
    else:
        text = "[" + ",".join(events) + "]"
    path = tmp_path / "t.json"
    path.write_text(text, encoding="utf-8")
    status, shredder, slow = _scan(text.encode())
    assert status == 1  # scanned, not given up: the comparison below is of the scanner
    assert shredder.fast >= 20 and len(slow) >= 20
    _three_ways(path, tmp_path, monkeypatch)
    _three_ways(path, tmp_path / "skip", monkeypatch, skip_python=True)


def test_the_scanner_stages_the_ordinary_and_hands_back_the_rest() -> None:
    data = ('{"traceEvents": [' + ",".join([_EV, ODD_EVENTS[-12], _EV]) + "]}").encode()
    status, shredder, slow = _scan(data)
    assert status == 1 and shredder.index == 3 and shredder.fast == 2
    assert slow == [(1, ODD_EVENTS[-12].encode())]  # the element's bytes, as in the file


@pytest.mark.parametrize("chunk", [1, 3, 64, 1 << 16])
def test_chunk_boundaries_do_not_matter(chunk: int) -> None:
    long_name = "n" * 5000
    events = [_EV, _EV.replace("aten::mm", long_name), *ODD_EVENTS[:12]]
    data = ('{"a": [1, {"b": "}]"}], "traceEvents": [' + ",".join(events) + '], "z": 1}').encode()
    whole = _scan(data)
    parts = _scan(data, chunk=chunk)
    assert whole[0] == parts[0] == 1
    assert whole[1].take() == parts[1].take()
    assert whole[2] == parts[2]


_TRAILERS = [
    "", ' , "z": 1', ', "a": [1, 2], "b": {"c": "]}", "d": [[]]}, "e": null',
    ', "deviceProperties": [{"id": 0, "name": "A100"}], "baseTimeNanoseconds": 1700000000000000000',
    ', "x": "\u00e9\u2603 ] , }"', ',"y":{"traceEvents2":[]}',
]


@pytest.mark.parametrize("trailer", _TRAILERS)
@pytest.mark.parametrize("chunk", [1, 7, 1 << 16])
def test_the_scanner_knows_where_trace_events_ends(trailer: str, chunk: int) -> None:
    """``events_end``: the ``]`` closing traceEvents, wherever the reads were cut; the
    trailer parsed from there is what the search of the whole tail finds."""
    from tracewh.ingest.reader import _parse_trailer, _trailer_at

    events = [_EV, ODD_EVENTS[-12], '{"ph": "i", "s": "]", "args": {"a": [1, ["]"]]}}']
    data = ('{"a": [1, {"b": "}]"}], "traceEvents": [' + ",".join(events) + "]"
            + trailer + "}  \n").encode()
    status, shredder, _ = _scan(data, chunk=chunk)
    assert status == 1
    end = shredder.events_end
    assert end is not None and data[end : end + 1] == b"]"
    assert data[end + 1 :].decode().strip()[:1] in (",", "}")
    searched = _parse_trailer(data)
    assert searched[1] is not None
    assert _trailer_at(data, end) == searched
    assert _trailer_at(data[5:], end - 5) == searched  # a tail that starts later
    assert _trailer_at(data, end - 1) is None  # not the ]: the caller searches


def test_a_bare_array_has_no_trace_events_end() -> None:
    status, shredder, _ = _scan(("[" + _EV + "]").encode())
    assert status == 1 and shredder.events_end is None


@pytest.mark.parametrize(
    "text",
    [
        "", "   ", "{}", '{"traceEvents": {}}', '{"traceEvents": [}', '{"traceEvents": [1,]}',
        '{"traceEvents": [01]}', '{"traceEvents": [1.]}', '{"traceEvents": [.5]}',
        '{"traceEvents": [-]}', '{"traceEvents": [+1]}', '{"traceEvents": [tru]}',
        '{"traceEvents": [truex]}', '{"traceEvents": ["a\\x"]}', '{"traceEvents": ["\\ud800"]}',
        '{"traceEvents": ["\\udc00"]}', '{"traceEvents": ["a\tb"]}', '{"traceEvents": [{"a" 1}]}',
        '{"traceEvents": [{"a": 1,}]}', '{"traceEvents": [{1: 1}]}', '{"traceEvents": []',
        '{"traceEvents": []} x', '{"traceEvents": [], "traceEvents": []}', '{"trace\\u0045vents": []}',
        '{"traceEvents": [' + "1" * 1200 + "]}",
        '{"traceEvents": [NaN]}', '\ufeff{"traceEvents": []}', '{"traceEvents":\f[]}',
        '{"traceEvents": [{"ph": "X"}]',
    ],
)
def test_the_scanner_gives_up_on_what_it_is_not_sure_of(text: str) -> None:
    assert _scan(text.encode())[0] == 2


@pytest.mark.parametrize(
    "data",
    [b'{"traceEvents": ["\xff"]}', b'{"traceEvents": ["\xc0\xaf"]}', b'{"traceEvents": ["\xed\xa0\x80"]}',
     b'{"traceEvents": ["\xf4\x90\x80\x80"]}', b'{"traceEvents": ["\xe2\x82"]}'],
)
def test_invalid_utf8_makes_it_give_up(data: bytes) -> None:
    assert _scan(data)[0] == 2


@pytest.mark.parametrize(
    "text",
    ['{"traceEvents": [1,]}', '{"traceEvents": [{"ph": "X", "ts": 1}',
     '{"traceEvents": [{"ph": "X", "ts": 01}]}', '{"a": 1}', "[1, 2", '{"traceEvents": {"a": 1}}',
     '{"traceEvents": [' + _EV + "]} trailing"],
)
def test_errors_are_the_ijson_paths_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text.encode()))
    scanned = _three_ways(path, tmp_path, monkeypatch)
    assert scanned[0][0] == "error"


def test_exact_nanoseconds_from_the_digits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stamps = ["1700000000000000.123", "1700000000000000.1239", "0.001", "9007199254740993.001",
              "1.5E+3", "123456789012345.678"]
    events = [json.loads(_EV) | {"ts": 0} for _ in stamps]
    body = ",".join(json.dumps(e).replace('"ts": 0', f'"ts": {s}') for e, s in zip(events, stamps, strict=True))
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [' + body + "]}", encoding="utf-8")
    _, tables = _three_ways(path, tmp_path, monkeypatch)
    got = sorted(row[7] for row in tables["ev"])  # ts_ns
    assert got == sorted(int(Decimal(s) * 1000) for s in stamps)
