"""The ``fingerprints`` table's MinHash signatures, computed outside DuckDB.

A run's signature is, for each of :data:`~tracewh.core.categories.MINHASH_SLOTS` slots ``i``,
the least ``md5_number_lower('<i>:' || token) >> 1`` over its workload's tokens
(``sql/ingest/29_fingerprint_tokens.sql``; the definition in
``sql/ingest/29_out_fingerprints.sql``). That is 128 md5 a token: DuckDB's md5 took ~0.67 us
a call, ~8% of a nightly folder's ingest. The extension's ``minhash`` (``_fastminhash.c``)
computes the same values ~2.5x faster; without it, :mod:`hashlib` does (the values are
bit-identical: ``tests/ingest/test_fingerprint.py`` compares all three).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Any

from tracewh.core.categories import MINHASH_SLOTS
from tracewh.ingest import fast
from tracewh.ingest.chunks import INGEST_SQL
from tracewh.storage.bulk import insert_rows


def signature(tokens: list[str]) -> list[int]:
    """The MinHash signature of ``tokens`` (distinct str); ``[]`` for none."""
    module = fast.native()
    if module is not None and hasattr(module, "minhash"):
        return list(module.minhash(tokens, MINHASH_SLOTS))
    return signature_hashlib(tokens)


def signature_hashlib(tokens: list[str]) -> list[int]:
    """:func:`signature` with :mod:`hashlib`'s md5 (where the extension is not built)."""
    if not tokens:
        return []
    data = [t.encode("utf-8") for t in tokens]
    md5 = hashlib.md5
    out = []
    for i in range(MINHASH_SLOTS):
        prefix = f"{i}:".encode()
        out.append(min(int.from_bytes(md5(prefix + t).digest()[8:], "little") for t in data) >> 1)
    return out


def minhash_table(con: Any) -> None:
    """``t_minhash`` (file_no, tokens, minhash) of the traces of ``t_files`` that have tokens,
    for ``29_out_fingerprints.sql``."""
    query = (INGEST_SQL / "29_fingerprint_tokens.sql").read_text(encoding="utf-8")
    by_file: dict[int, list[str]] = defaultdict(list)
    for file_no, token in con.execute(query).fetchall():
        by_file[int(file_no)].append(str(token))
    con.execute("CREATE OR REPLACE TEMP TABLE t_minhash "
                "(file_no INTEGER, tokens BIGINT, minhash BIGINT[])")
    insert_rows(con, "t_minhash", [("file_no", "INTEGER"), ("tokens", "BIGINT"), ("minhash", "BIGINT[]")],
                [{"file_no": k, "tokens": len(v), "minhash": signature(v)}
                 for k, v in sorted(by_file.items())])


__all__ = ["minhash_table", "signature", "signature_hashlib"]
