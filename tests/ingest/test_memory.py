"""DuckDB memory limits that grow when an ingest step runs out of memory (tracewh.ingest.memory)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from tracewh.ingest.memory import max_limit, parse_size, retry_on_oom, set_limit
from tracewh.ingest.pipeline import IngestOptions, ingest_file
from tracewh.storage.store import Store
from tracewh.synth import SynthConfig, write_trace


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [("128MB", 128 << 20), ("96 MiB", 96 << 20), ("1.5GB", 3 << 29), ("512KB", 512 << 10),
     ("2gib", 2 << 30)],
)
def test_parse_size(text: str, nbytes: int) -> None:
    assert parse_size(text) == nbytes


@pytest.mark.parametrize("text", ["", "MB", "12 parsecs", "-1MB", "1e3MB"])
def test_parse_size_refuses_what_is_not_a_size(text: str) -> None:
    with pytest.raises(ValueError, match="not a memory size"):
        parse_size(text)


def _limit(con: duckdb.DuckDBPyConnection) -> str:
    return str(con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])


def test_retry_doubles_the_limit_until_the_step_runs() -> None:
    con = duckdb.connect()
    set_limit(con, 64 << 20)
    calls = []

    def step() -> str:
        calls.append(_limit(con))
        if len(calls) < 3:
            raise duckdb.OutOfMemoryException("Out of Memory Error: failed to pin block")
        return "done"

    result, limit = retry_on_oom(con, step, 64 << 20)
    assert result == "done" and limit == 256 << 20
    assert len(calls) == 3 and len(set(calls)) == 3  # each try ran under a larger limit
    assert _limit(con) == calls[-1]


def test_retry_gives_up_at_the_cap() -> None:
    con = duckdb.connect()
    tries = []

    def step() -> None:
        tries.append(1)
        raise duckdb.OutOfMemoryException("Out of Memory Error")

    with pytest.raises(duckdb.OutOfMemoryException):
        retry_on_oom(con, step, max_limit() // 4)
    assert len(tries) == 3  # cap/4, cap/2, cap


def test_other_errors_are_not_retried() -> None:
    con = duckdb.connect()
    tries = []

    def step() -> None:
        tries.append(1)
        raise duckdb.BinderException("no such column")

    with pytest.raises(duckdb.BinderException):
        retry_on_oom(con, step, 64 << 20)
    assert tries == [1]


def _tables(root: Path) -> dict[str, pl.DataFrame]:
    out = {}
    for name in ("events", "gpu_ops", "flows", "instants", "steps"):
        files = sorted((root / "tables" / name).rglob("*.parquet"))
        df = pl.concat([pl.read_parquet(f) for f in files]) if files else pl.DataFrame()
        df = df.drop("ingest_id", strict=False)
        out[name] = df.sort("event_index" if "event_index" in df.columns else df.columns)
    return out


def test_an_ingest_under_too_small_limits_still_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Limits far too small for staging, linkage and outputs: the steps run again, larger."""
    import tracewh.ingest.derive as derive
    import tracewh.ingest.link as link

    raised: list[tuple[int, int]] = []

    def spy(con: Any, step: Any, limit: int) -> Any:
        result, final = retry_on_oom(con, step, limit)
        raised.append((limit, final))
        return result, final

    monkeypatch.setattr(link, "retry_on_oom", spy)  # the link step
    monkeypatch.setattr(derive, "retry_on_oom", spy)  # the output steps
    trace = tmp_path / "t.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=3, layers=2, seed=7))
    normal = Store(tmp_path / "normal")
    normal.create()
    assert ingest_file(normal, trace, IngestOptions()).outcome == "ingested"
    small = Store(tmp_path / "small")
    small.create()
    tight = IngestOptions(memory_limit="1MB", output_memory_limit="1MB", stage_memory_limit="4MB")
    result = ingest_file(small, trace, tight)
    assert result.outcome == "ingested", result.error
    assert any(final > start for start, final in raised)  # some step really ran out and rose
    a, b = _tables(tmp_path / "normal"), _tables(tmp_path / "small")
    for name in a:
        assert a[name].equals(b[name]), name
    leftovers = [p for p in (tmp_path / "small" / "tables").rglob("*.parquet")]
    referenced = sum(len(f) for f in [small.snapshot_files()[t] for t in small.snapshot_files()])
    assert len(leftovers) == referenced  # no partial file of a failed try left behind
