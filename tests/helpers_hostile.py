"""A corpus of hostile trace files, generated (never stored): handwritten oddities,
truncations, bit flips and gzip damage of a small synthetic trace.

Each case is ``Case(name, data, suffix, expect, detail)``: ``expect`` is ``"ok"``
(must ingest; ``detail``, if set, must be a key of the run's anomalies),
``"fail"`` (must be rejected; ``detail``, if set, must appear in the error) or
``"any"`` (either, as long as it is clean).
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tracewh.synth import SynthConfig, write_trace


@dataclass(frozen=True)
class Case:
    name: str
    data: bytes
    suffix: str = ".json"
    expect: str = "any"
    detail: str | None = None


_GOOD = [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 50,
     "args": {"External id": 7}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
     "ts": 110, "dur": 5, "args": {"correlation": 9, "External id": 7}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 120, "dur": 10,
     "args": {"correlation": 9, "External id": 7, "stream": 7, "device": 0, "grid": [1, 1, 1]}},
]


def _doc(*events: object, head: str = '"schemaVersion": 1', tail: str = '"traceName": "t"') -> bytes:
    body = ",\n".join(e if isinstance(e, str) else json.dumps(e) for e in [*_GOOD, *events])
    return f'{{{head},\n"traceEvents": [\n{body}\n],\n{tail}}}'.encode()


def _ev(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {"ph": "X", "cat": "cpu_op", "name": "odd", "pid": 1, "tid": 1,
                               "ts": 200, "dur": 1}
    base.update(kw)
    return {k: v for k, v in base.items() if v is not _DROP}


_DROP = object()
_X = '{"ph": "X", "cat": "cpu_op", "name": %s, "pid": 1, "tid": 1, "ts": %s, "dur": %s}'


def handwritten() -> list[Case]:
    """Every oddity of the issue, one file each."""
    big = 1 << 70
    nested = "[" * 5000 + "]" * 5000
    c = [
        Case("empty", b"", expect="fail", detail="empty"),
        Case("whitespace", b"  \n\t ", expect="fail"),
        Case("empty_object", b"{}", expect="fail", detail="not a Kineto trace"),
        Case("empty_array", b"[]", expect="fail"),
        Case("empty_trace_events", b'{"traceEvents": []}', expect="fail", detail="empty"),
        Case("trace_events_object", b'{"traceEvents": {"a": 1}}', expect="fail",
             detail="traceEvents is not a list (found an object)"),
        Case("trace_events_number", b'{"traceEvents": 5}', expect="fail",
             detail="traceEvents is not a list (found a number)"),
        Case("trace_events_string", b'{"traceEvents": "x"}', expect="fail",
             detail="traceEvents is not a list (found a string)"),
        Case("trace_events_null", b'{"traceEvents": null}', expect="fail",
             detail="traceEvents is not a list (found null)"),
        Case("top_string", b'"hello"', expect="fail"),
        Case("top_number", b"42", expect="fail"),
        Case("top_null", b"null", expect="fail"),
        Case("non_kineto", json.dumps({"schema": "1.0.1", "pid": 1, "nodes": [{"id": 1}]}).encode(),
             expect="fail", detail="not a Kineto trace"),
        Case("cut_after_header", b'{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [',
             expect="fail", detail="truncated JSON"),
        Case("cut_in_header", b'{"schemaVersion": 1, "deviceProp', expect="fail",
             detail="truncated JSON"),
        Case("unterminated_string", b'{"traceEvents": [{"ph": "X", "name": "abc', expect="fail",
             detail="truncated JSON"),
        Case("unterminated_last", _doc()[:-1], expect="any"),
        Case("trailing_garbage", _doc() + b" xyz", expect="any"),
        Case("non_object_events", _doc(1, '"x"', "null", "[1, 2]", "true"), expect="ok",
             detail="non_object_event"),
        Case("missing_ph", _doc(_ev(ph=_DROP)), expect="ok", detail="missing_ph"),
        Case("missing_ts", _doc(_ev(ts=_DROP)), expect="ok", detail="missing_ts"),
        Case("missing_name", _doc(_ev(name=_DROP)), expect="ok", detail="missing_name"),
        Case("missing_dur", _doc(_ev(dur=_DROP)), expect="ok"),
        Case("ts_string", _doc(_ev(ts="12.5")), expect="ok", detail="ts_as_string"),
        Case("ts_garbage_string", _doc(_ev(ts="soon")), expect="ok", detail="ts_as_string"),
        Case("ts_string_nan", _doc(_ev(ts="NaN")), expect="ok"),
        Case("ts_bare_nan", _doc(_X % ('"n"', "NaN", "1")), expect="any"),
        Case("ts_bare_infinity", _doc(_X % ('"n"', "Infinity", "1")), expect="any"),
        Case("ts_bool", _doc(_ev(ts=True)), expect="ok", detail="mistyped_ts"),
        Case("ts_object", _doc(_ev(ts={"a": 1})), expect="ok", detail="mistyped_ts"),
        Case("ts_exponent", _doc(_X % ('"e"', "1.5e3", "2E-1")), expect="ok"),
        Case("negative_dur", _doc(_ev(dur=-5)), expect="ok", detail="negative_dur"),
        Case("ts_beyond_int64", _doc(_ev(ts=big)), expect="ok", detail="ts_out_of_range"),
        Case("dur_beyond_int64", _doc(_ev(dur=big)), expect="ok"),
        Case("correlation_beyond_int64", _doc(_ev(args={"correlation": big})), expect="ok"),
        Case("comms_id_beyond_int64", _doc(_ev(args={"Comms Id": big, "x": -big})), expect="ok"),
        Case("pid_beyond_uint64", _doc(_ev(pid=1 << 65)), expect="ok", detail="id_out_of_range"),
        Case("tid_uint64_queue", _doc(_ev(tid=(1 << 64) - 5)), expect="ok"),
        Case("pid_list", _doc(_ev(pid=[1, 2])), expect="ok", detail="mistyped_id"),
        Case("pid_unicode_digit", _doc(_ev(pid="\u00b2")), expect="ok"),  # "²".isdigit()
        Case("pid_float", _doc(_ev(pid=1.5)), expect="ok", detail="mistyped_id"),
        Case("string_pids", _doc(_ev(pid="Spans", tid=""), _ev(pid="", tid="Traces")), expect="ok"),
        Case("flow_id_huge", _doc({"ph": "s", "cat": "ac2g", "id": 1 << 80, "pid": 1, "tid": 1,
                                   "ts": 1}), expect="ok"),
        Case("args_not_object", _doc(_ev(args=[1, 2, 3])), expect="ok", detail="mistyped_args"),
        Case("counter_values", _doc({"ph": "C", "name": "c", "pid": 1, "ts": 5,
                                     "args": {"a": "x", "b": None, "c": [1], "d": 1e300}}),
             expect="ok"),
        Case("unknown_phases", _doc(_ev(ph="Z"), _ev(ph=7), _ev(ph="")), expect="ok"),
        Case("phase_not_a_string", _doc(_ev(ph=[]), _ev(ph={"x": 1}), _ev(ph=None)), expect="ok",
             detail="other_ph:[]"),
        Case("duplicate_keys", _doc('{"ph": "X", "ph": "X", "name": "a", "name": "b", "ts": 1, '
                                    '"ts": 2, "dur": 3, "pid": 1, "tid": 1}'), expect="ok"),
        Case("deep_args", _doc(f'{{"ph": "X", "name": "d", "ts": 1, "dur": 1, "pid": 1, "tid": 1, '
                               f'"args": {{"deep": {nested}}}}}'), expect="ok",
             detail="deep_nesting"),
        Case("deep_event", _doc(nested), expect="ok",
             detail="deep_nesting"),
        Case("deep_header", _doc(head=f'"deep": {nested}'), expect="ok",
             detail="deep_nesting"),
        Case("deep_trailer", _doc(tail=f'"deep": {nested}'), expect="ok",
             detail="deep_nesting"),
        Case("megabyte_kernel_name", _doc(_ev(cat="kernel", name="k" * (1 << 20))), expect="ok"),
        Case("many_args", _doc(_ev(args={f"k{i}": i for i in range(5000)})), expect="ok"),
        Case("mistyped_kernel_args", _doc(_ev(cat="kernel", args={
            "grid": "N/A", "block": [1, 1], "registers per thread": "x", "correlation": 3})),
             expect="ok", detail="mistyped:grid"),
        Case("invalid_utf8_name", _doc(_X % ('"ab\xff\xfecd"', "1", "1")).replace(
            "ab\xff\xfecd".encode(), b"ab\xff\xfecd"), expect="any"),
        Case("invalid_utf8_key", _doc().replace(b'"aten::mm"', b'"aten::mm", "\xc3\x28": 1'),
             expect="any"),
        Case("raw_control_chars", _doc(_X % ('"a\x01b\x1fc\td"', "1", "1")), expect="any"),
        Case("escaped_control_chars", _doc(_ev(name="a\x00b\x01c")), expect="ok"),
        Case("lone_surrogate", _doc(_X % ('"a\\ud800b"', "1", "1")), expect="any"),
        Case("lone_surrogate_key", _doc('{"ph": "X", "name": "s", "ts": 1, "dur": 1, "pid": 1, '
                                        '"tid": 1, "args": {"\\udfff": 1}}'), expect="any"),
        Case("unquoted_na", _doc(_X % ('"n"', "1", "N/A")), expect="fail",
             detail="corrupt JSON: lexical error: invalid char in json text (near: '"),
        Case("single_quotes", _doc("{'ph': 'X'}"), expect="fail", detail="corrupt JSON: lexical"),
        Case("trailing_comma", _doc('{"ph": "X", "ts": 1,}'), expect="any"),
        Case("bom", b"\xef\xbb\xbf" + _doc(), expect="any"),
        Case("utf16", _doc().decode().encode("utf-16"), expect="fail"),
        Case("base_time_string", _doc(tail='"baseTimeNanoseconds": "soon"'), expect="ok",
             detail="mistyped_base_time"),
        Case("base_time_huge", _doc(tail=f'"baseTimeNanoseconds": {1 << 80}'), expect="ok",
             detail="base_time_out_of_range"),
        Case("base_time_negative", _doc(tail='"baseTimeNanoseconds": -1000000000000000000000'),
             expect="ok", detail="base_time_out_of_range"),
        Case("base_time_overflows_ts", _doc(tail=f'"baseTimeNanoseconds": {(1 << 63) - 10}'),
             expect="ok", detail="base_time_out_of_range"),
        Case("base_time_underflows_ts", _doc(_ev(ts=-(10**9)),
                                             tail=f'"baseTimeNanoseconds": {-(1 << 63) + 10}'),
             expect="ok", detail="base_time_out_of_range"),
        Case("header_ints_beyond_int64", _doc(head=f'"schemaVersion": {big}, "distributedInfo": '
                                                   f'{{"rank": {big}, "world_size": -{big}}}'),
             expect="ok"),
        Case("odd_metadata", _doc(head='"schemaVersion": "x", "deviceProperties": "not json", '
                                       '"distributedInfo": {"rank": "abc", "world_size": []}'),
             expect="ok"),
        Case("device_properties_string", _doc(head='"deviceProperties": "[{\\"name\\": \\"G\\"}]"'),
             expect="ok"),
        # issue 18: strings longer than the reader's cap, events that skew the times, names
        # that are markup or terminal escapes
        Case("long_string_arg", _doc(_ev(args={"s": "x" * (3 << 20)})), expect="ok",
             detail="truncated_strings"),
        Case("long_string_escapes", _doc(_ev(args={"s": 'é\n"\\\U0001f600' * (1 << 18)})),
             expect="ok", detail="truncated_strings"),
        Case("long_key", _doc(_ev(args={"k" * (2 << 20): 1})), expect="ok",
             detail="truncated_strings"),
        Case("long_name_raw_utf8", _doc(_X % ('"' + "é€" * (1 << 19) + '"', "1", "1")),
             expect="ok", detail="truncated_strings"),
        Case("duplicated_kernel", _doc(_GOOD[2]), expect="ok", detail="duplicate_events"),
        # issue 33: a second top-level traceEvents array (class 11), a huge args list (class 10)
        Case("two_trace_events_arrays", _doc(tail='"traceEvents": [' + json.dumps(_GOOD[2]) + "]"),
             expect="fail", detail="top-level traceEvents arrays (a duplicate key)"),
        Case("trace_events_named_in_values", _doc(_ev(name="traceEvents", args={"traceEvents": 1}),
                                                  tail='"traceName": "traceEvents"'), expect="ok"),
        Case("huge_input_dims", _doc(_ev(args={"Input Dims": [[8, 16]] * 40_000, "Input type": ["f"]})),
             expect="ok", detail="truncated_args"),
        Case("kernel_far_before_trace", _doc({**_GOOD[2], "ts": 120 - 2_000_000_000}),
             expect="ok", detail="gpu_outside_cpu_window"),
        Case("correlation_reused", _doc(
            {**_GOOD[1], "ts": 130}, {**_GOOD[2], "ts": 140, "name": "gemm2"}),
             expect="ok", detail="correlation_reuse"),
        Case("markup_and_escape_names", _doc(_ev(name="[/bold] x [link=http://e.x]y[/link]"),
                                             _ev(cat="kernel", name="k\x1b]0;t\x07\x1b[2J")),
             expect="ok"),
        Case("gzip_empty", gzip.compress(b""), suffix=".json.gz", expect="fail"),
        Case("gzip_header_only", gzip.compress(_doc())[:10], suffix=".json.gz", expect="fail"),
        Case("gzip_garbage", b"\x1f\x8b" + bytes(range(256)) * 4, suffix=".json.gz", expect="fail"),
        Case("not_gzip_named_gz", _doc(), suffix=".json.gz", expect="ok"),
        Case("gzip_two_members", gzip.compress(_doc()[:40]) + gzip.compress(_doc()[40:]),
             suffix=".json.gz", expect="any"),
        Case("gzip_trailing_zeros", gzip.compress(_doc(_ev(name="z"))) + b"\0" * 64,
             suffix=".json.gz", expect="any"),
    ]
    return c


def base_trace(folder: Path) -> bytes:
    """A small real-looking trace (plain JSON text, ~50 kB)."""
    path = folder / "base.json"
    if not path.exists():
        write_trace(path, SynthConfig(steps=1, layers=1, seed=41, python=True))
    return path.read_bytes()


def bad_crc(data: bytes) -> Case:
    gz = bytearray(gzip.compress(data))
    gz[-8] ^= 0xFF  # the CRC32 of the trailer
    return Case("gzip_bad_crc", bytes(gz), ".json.gz", "fail")


def bad_size(data: bytes) -> Case:
    gz = bytearray(gzip.compress(data))
    gz[-1] ^= 0x01  # ISIZE
    return Case("gzip_bad_isize", bytes(gz), ".json.gz", "fail")


def truncations(data: bytes, n: int, *, gz: bool, seed: int = 0) -> Iterator[Case]:
    """``n`` cuts of the file (gzip or plain) at spread offsets (plus a few exact ones)."""
    blob = gzip.compress(data) if gz else data
    rng = random.Random(seed)
    offsets = {1, 2, 9, 10, len(blob) - 1, len(blob) - 4, len(blob) - 8}
    while len(offsets) < n:
        offsets.add(rng.randrange(1, len(blob)))
    for off in sorted(offsets)[:n] if n < len(offsets) else sorted(offsets):
        yield Case(f"{'gz' if gz else 'json'}_cut_{off}", blob[:off],
                   ".json.gz" if gz else ".json", "fail" if gz or off < len(blob) - 2 else "any")


def flips(data: bytes, n: int, *, seed: int = 0) -> Iterator[Case]:
    """``n`` single-byte corruptions: in the JSON structure, inside strings, and in gzip data."""
    rng = random.Random(seed)
    structural = [i for i, b in enumerate(data) if b in b'{}[]:,"']
    in_string: list[int] = []
    quoted = False
    for i, b in enumerate(data):
        if b == ord('"'):
            quoted = not quoted
        elif quoted:
            in_string.append(i)
    gz = gzip.compress(data)
    for k in range(n):
        kind = ("struct", "string", "gzip")[k % 3]
        if kind == "gzip":
            pos = rng.randrange(10, len(gz) - 8)
            blob = bytearray(gz)
            blob[pos] ^= 1 << rng.randrange(8)
            yield Case(f"gz_flip_{pos}", bytes(blob), ".json.gz", "any")
            continue
        pos = rng.choice(structural if kind == "struct" else in_string)
        new = rng.choice(b'{}[]:,"x\\\x00\xff' if kind == "struct" else b'"\\\x00\x01\xff\xc3\n')
        blob = bytearray(data)
        blob[pos] = new if new != blob[pos] else ord("#")
        yield Case(f"{kind}_flip_{pos}_{new:02x}", bytes(blob), ".json", "any")


def corpus(folder: Path, *, truncate: int, flip: int) -> list[Case]:
    """The handwritten cases plus generated damage of a small synthetic trace (deduplicated)."""
    data = base_trace(folder)
    cases = [
        *handwritten(),
        bad_crc(data),
        bad_size(data),
        *truncations(data, truncate, gz=True, seed=1),
        *truncations(data, truncate, gz=False, seed=2),
        *flips(data, flip, seed=3),
    ]
    seen: set[int] = set()
    unique = []
    for case in cases:
        key = zlib.crc32(case.data) ^ len(case.data) << 32
        if key not in seen:
            seen.add(key)
            unique.append(case)
    return unique
