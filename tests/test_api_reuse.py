"""Per-run analyses reuse one catalog connection across calls: same answers as a fresh one."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from tracewh.api import Warehouse
from tracewh.errors import QueryError, TracewhError
from tracewh.synth import SynthConfig, write_trace


def _trace(folder: Path, day: int, seed: int) -> Path:
    path = folder / f"n{day}.pt.trace.json.gz"
    write_trace(path, SynthConfig(steps=1, layers=1, seed=seed, night=dt.date(2025, 1, day)))
    return path


def test_reused_connection_follows_new_runs_and_days(tmp_path: Path) -> None:
    a, b = _trace(tmp_path, 1, 11), _trace(tmp_path, 2, 12)
    root = tmp_path / "wh"
    wh = Warehouse(root)
    assert wh.ingest([a]).ok
    first = wh.kernels()
    assert wh._idle is not None  # kept for the next call
    assert wh.ingest([b]).ok  # a new run, on another day partition
    ref_a, ref_b = (Warehouse(root).resolve_run(f"file_name={p.name}") for p in (a, b))
    assert ref_a.day != ref_b.day
    for ref in (ref_b, ref_a, ref_b):  # back and forth between the two days' files
        got = wh.kernels(ref)
        fresh = Warehouse(root).kernels(ref)
        assert got.equals(fresh), ref
    assert wh.kernels(ref_a).equals(first)
    assert wh.kernels("latest").equals(Warehouse(root).kernels(ref_b))


def test_a_failed_call_leaves_the_next_one_working(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([_trace(tmp_path, 3, 13)]).ok
    expected = wh.launches()
    with pytest.raises(TracewhError):
        wh.kernels("no-such-run")
    with pytest.raises(QueryError):
        wh.macro("kernel_summary_no_such_macro")
    assert wh.launches().equals(expected)


def test_user_sql_never_runs_on_the_kept_connection(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([_trace(tmp_path, 4, 14)]).ok
    wh.kernels()
    kept = wh._idle
    wh.sql("SELECT count(*) FROM gpu_ops")
    assert wh._idle is kept  # sql() used (and closed) a connection of its own
    with wh.session():
        inside = wh.kernels()
    assert inside.equals(wh.kernels())
