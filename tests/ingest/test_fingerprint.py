"""The fingerprints' MinHash outside DuckDB (tracewh.ingest.fingerprint, _fastminhash.c).

Every signature must equal DuckDB's own definition of it (``sql/ingest/29_out_fingerprints.sql``:
``min(md5_number_lower(CAST(i AS VARCHAR) || ':' || token)) >> 1``), bit for bit: fingerprints
of runs ingested years apart are compared.
"""

from __future__ import annotations

import random

import duckdb
import pytest

from tracewh.core.categories import MINHASH_SLOTS
from tracewh.ingest import fast, fingerprint

module = fast.native()


def _duckdb(tokens: list[str]) -> list[int]:
    con = duckdb.connect()
    con.execute("CREATE TABLE tok (token VARCHAR)")
    con.executemany("INSERT INTO tok VALUES (?)", [[t] for t in tokens])
    rows = con.execute(
        "SELECT i, CAST(min(md5_number_lower(CAST(i AS VARCHAR) || ':' || token)) >> 1 AS BIGINT) "
        f"FROM tok, range({MINHASH_SLOTS}) r(i) GROUP BY i ORDER BY i").fetchall()
    return [m for _, m in rows]


def _tokens(seed: int) -> list[str]:
    rng = random.Random(seed)
    alphabet = "abcdefgh<>:, _()[]*/éλ🙂\\\"'"
    # lengths around every MD5 block boundary (55, 56, 63, 64, 119, 120 bytes with the prefix)
    out = {"", "k:", "o:aten::mm:[[1, 2], [2, 3]]"}
    for n in [*range(0, 140), 500, 5000]:
        out.add("".join(rng.choice(alphabet) for _ in range(n)))
    return sorted(out)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_signature_is_duckdbs_md5_minhash(seed: int) -> None:
    tokens = _tokens(seed)
    want = _duckdb(tokens)
    assert len(want) == MINHASH_SLOTS
    assert fingerprint.signature_hashlib(tokens) == want
    if module is not None:
        assert module.minhash(tokens, MINHASH_SLOTS) == want
    assert fingerprint.signature(tokens) == want


def test_one_token_and_none() -> None:
    assert fingerprint.signature(["k:gemm"]) == _duckdb(["k:gemm"])
    assert fingerprint.signature([]) == fingerprint.signature_hashlib([]) == []


@pytest.mark.skipif(module is None, reason="the extension is not built")
def test_the_extension_refuses_what_is_not_text() -> None:
    assert module is not None
    with pytest.raises(TypeError):
        module.minhash([b"bytes"], 4)
    with pytest.raises(ValueError):
        module.minhash(["a"], -1)
    assert module.minhash(["a"], 0) == []


@pytest.mark.skipif(module is None, reason="the extension is not built")
@pytest.mark.parametrize("slots", [1, 7, 9, 11, 100, 1005])
def test_the_extension_hashes_any_slot_count(slots: int) -> None:
    """The extension hashes 8 slots at once, in batches whose prefixes ``<i>:`` have one
    length: short batches and longer prefixes give each slot its own least md5."""
    import hashlib

    tokens = ["", "a", "abcdefg", "k:" + "x" * 60, "o:aten::mm:" + "é" * 40]
    want = [min(int.from_bytes(hashlib.md5(f"{i}:{t}".encode()).digest()[8:], "little")
                for t in tokens) >> 1 for i in range(slots)]
    assert module is not None
    assert module.minhash(tokens, slots) == want
