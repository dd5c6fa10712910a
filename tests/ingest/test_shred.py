"""The chunk router (tracewh.ingest.shred): the statements of 02_shred.sql and what it stages."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from tracewh.core.sqlfiles import SQL_DIR
from tracewh.ingest import fast
from tracewh.ingest.shred import STAGING_TABLES, shred_statements, stage_part, stager_for
from tracewh.schema.arrow import GPU_OP_CATEGORIES
from tracewh.synth import SynthConfig, write_trace


def test_every_staging_table_is_written_once() -> None:
    statements = shred_statements((SQL_DIR / "ingest" / "02_shred.sql").read_text("utf-8"))
    written = [table for table, _ in statements if table is not None]
    assert sorted(written) == sorted(STAGING_TABLES)
    assert all(sql.startswith("COPY") for table, sql in statements if table is not None)


def test_a_copy_without_its_table_comment_is_refused() -> None:
    with pytest.raises(ValueError, match="without its staging table"):
        shred_statements("-- header\nCOPY (SELECT 1) TO $out (FORMAT parquet);\n")
    with pytest.raises(ValueError, match="'nope'"):
        shred_statements("-- nope\nCOPY (SELECT 1) TO $out (FORMAT parquet);\n")


@pytest.mark.parametrize("native", [False, True], ids=["pure", "compiled"])
def test_staged_files_have_the_staging_columns(tmp_path: Path, native: bool) -> None:
    """Each table's chunk files carry exactly the columns and types of 00_stage_tables.sql.

    ``native``: the compiled path (tracewh.ingest.fast) stages the ordinary events, the
    metadata events included (the scanner); without it, the pure path stages all.
    """
    if native and fast.native() is None:
        pytest.skip("the C extension tracewh.ingest._fastshred is not built")
    trace = tmp_path / "t.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=3, layers=2, python=True, seed=5))
    part = tmp_path / "part"
    part.mkdir()
    # a chunk per batch of 512 events (pure) or per batch of 8192 (compiled)
    result = stage_part(trace, part, chunk_events=1, stager=stager_for(native))
    con = duckdb.connect()
    con.execute((SQL_DIR / "ingest" / "00_stage_tables.sql").read_text("utf-8"))
    for table in STAGING_TABLES:
        files = sorted((part / table).glob("*.parquet"))
        assert files  # its rows' files, or an empty schema.parquet: its columns either way
        expected = con.execute(f"DESCRIBE {table}").fetchall()
        for f in files:
            got = con.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(f)]).fetchall()
            assert [(r[0], r[1]) for r in got] == [(r[0], r[1]) for r in expected], (table, f.name)
    if native:
        assert len(list((part / "ev").glob("fast-*.parquet"))) >= 1
        assert list((part / "thr").glob("fast-*.parquet"))  # metadata: the scanner's
        assert not list((part / "thr").glob("chunk-*.parquet"))
    else:
        assert len(list((part / "ev").glob("chunk-*.parquet"))) > 1
    assert not list(part.glob("chunk-*.json"))  # chunk files are removed once routed

    # every event is staged once, in the table its phase routes it to (counted with json)
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    by_ph = Counter(e.get("ph") for e in events)
    python = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") == "python_function")
    assert result.events == len(events)

    def rows(table: str) -> int:
        glob = str(part / table / "*.parquet")
        return int(con.execute("SELECT count(*) FROM read_parquet(?)", [glob]).fetchall()[0][0])

    gpu_ops = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") in GPU_OP_CATEGORIES)
    assert python > 0
    assert gpu_ops > 0
    assert rows("ev") == by_ph["X"] - python - gpu_ops
    assert rows("gev") == gpu_ops
    assert rows("py") == python
    assert rows("flow") == by_ph["s"] + by_ph["t"] + by_ph["f"]
    assert rows("thr") == by_ph["M"]
    assert rows("inst") == len(events) - sum(by_ph[k] for k in ("X", "s", "t", "f", "M", "C"))


def test_without_the_compiled_extension_the_pure_path_stages_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the C extension was not built (no compiler), staging still works, in Python."""
    import sys

    monkeypatch.setitem(sys.modules, "tracewh.ingest._fastshred", None)  # import -> ImportError
    assert fast.native() is None
    trace = tmp_path / "t.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=2, layers=2, python=True, seed=8))
    part = tmp_path / "part"
    part.mkdir()
    result = stage_part(trace, part, stager=stager_for(True))
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    assert result.events == len(events)
    assert not list(part.rglob("fast-*.parquet"))  # nothing from the compiled path
    con = duckdb.connect()
    globs = [str(part / "ev" / "*.parquet"), str(part / "gev" / "*.parquet")]
    staged = con.execute("SELECT count(*) FROM read_parquet(?)", [globs]).fetchall()[0][0]
    xs = sum(1 for e in events if e.get("ph") == "X" and e.get("cat") != "python_function")
    assert staged == xs
