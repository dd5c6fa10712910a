"""The string capper in front of the parser: valid JSON out, long strings cut to a prefix."""

from __future__ import annotations

import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracewh.ingest.strings import StringCapper

_TEXT = st.text(
    alphabet=st.sampled_from(['a', 'b', '"', '\\', '/', '\n', '\t', '\x00', '\x1b', 'é', '€',
                              '\U0001f600', '\u2028', 'u', '0', 'd', '8']),
    max_size=90,
)
_VALUE = st.recursive(
    st.one_of(_TEXT, st.integers(), st.none(), st.booleans()),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_TEXT, inner, max_size=4)),
    max_leaves=12,
)


def _strings(value: object) -> list[str]:
    """Every string of a JSON value (keys and values), in document order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    return []


def _feed(data: bytes, cap: int, rng: random.Random) -> tuple[bytes, StringCapper]:
    capper = StringCapper(cap)
    out, i = [], 0
    while i < len(data):
        n = rng.choice([1, 2, 3, 5, 7, 11, 16, 64, 200])
        out.append(capper.feed(data[i : i + n]))
        i += n
    return b"".join(out), capper


@settings(max_examples=400, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(value=_VALUE, cap=st.integers(16, 40), ascii_only=st.booleans(), seed=st.integers(0, 9))
def test_capped_stream_is_valid_json_with_prefixes(
    value: object, cap: int, ascii_only: bool, seed: int
) -> None:
    # "é" as UTF-8 or as \u00e9, the emoji as 4 UTF-8 bytes or a surrogate pair of escapes
    data = json.dumps(value, ensure_ascii=ascii_only).encode()
    out, capper = _feed(data, cap, random.Random(seed))
    back = json.loads(out)  # still valid JSON: no escape, surrogate pair or character split
    before, after = _strings(value), _strings(back)
    assert len(before) == len(after)
    changed = 0
    for orig, got in zip(before, after, strict=True):
        text = json.dumps(orig, ensure_ascii=ascii_only).encode()[1:-1]
        kept = json.dumps(got, ensure_ascii=ascii_only).encode()[1:-1]
        if got == orig:
            assert len(text) <= cap + 12
            continue
        changed += 1
        assert orig.startswith(got)
        assert cap <= len(kept) <= cap + 12, (len(kept), cap)
    assert changed == len(capper.cuts)
    assert capper.dropped == len(data) - len(out)


def test_a_200_megabyte_string_costs_linear_time_and_little_memory() -> None:
    """Chunks of 64 kB, as the reader feeds them: the output holds about 1 MB of the string."""
    capper = StringCapper()
    chunk = b"x" * (1 << 16)
    total = len(capper.feed(b'{"args": {"s": "'))
    for _ in range(200 * 16):  # 200 MiB
        total += len(capper.feed(chunk))
    total += len(capper.feed(b'"}}'))
    assert total == len(b'{"args": {"s": "') + (1 << 20) + 3
    assert len(capper.cuts) == 1


def test_short_strings_and_escapes_pass_unchanged() -> None:
    doc = json.dumps({"traceEvents": [{"name": 'a"b\\c\u00e9\U0001f600', "args": {"k": "\n"}}]})
    capper = StringCapper()
    assert b"".join(capper.feed(doc.encode()[i : i + 3]) for i in range(0, len(doc), 3)) == doc.encode()
    assert capper.cuts == []
