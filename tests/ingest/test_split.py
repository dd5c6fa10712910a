"""Splitting one trace across processes (IngestOptions.parts) gives the same tables.

Expected results come from the sequential ingest of the same file (parts=1),
an independent code path for the split logic; the sequential path itself is
checked against plain-json counts by the ingest tests.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest
from helpers_ingest import delta_arrow

from tracewh.core.errors import TraceFormatError
from tracewh.ingest.parts import decompressed_size, stage_file
from tracewh.ingest.pipeline import IngestOptions, ingest_file
from tracewh.ingest.shred import stager_for
from tracewh.storage.store import Store
from tracewh.synth import SynthConfig, write_trace

_TABLES = (
    "events", "gpu_ops", "steps", "instants", "counters", "flows", "flow_args", "python",
    "module_spans", "annotation_spans", "graph_nodes", "threads",
)
_VOLATILE = ("ingest_id", "ingested_at", "tracewh_version", "source_path", "job")


def _tables(root: Path) -> dict[str, pl.DataFrame]:
    out: dict[str, pl.DataFrame] = {}
    for name in (*_TABLES, "runs"):
        df = pl.from_arrow(delta_arrow(root / "tables" / name))
        assert isinstance(df, pl.DataFrame)
        df = df.drop([c for c in _VOLATILE if c in df.columns])
        keys = [c for c in df.columns if not isinstance(df.schema[c], pl.List)]
        out[name] = df.sort(keys, nulls_last=True)
    return out


def _ingest(tmp: Path, name: str, trace: Path, parts: int) -> dict[str, pl.DataFrame]:
    store = Store(tmp / name)
    store.create()
    result = ingest_file(store, trace, IngestOptions(parts=parts, min_split_bytes=1))
    assert result.outcome == "ingested", result.error
    return _tables(tmp / name)


def _assert_same(a: dict[str, pl.DataFrame], b: dict[str, pl.DataFrame]) -> None:
    for name in a:
        assert a[name].equals(b[name]), name


@pytest.fixture(scope="module")
def synth_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("synth") / "t.pt.trace.json.gz"
    write_trace(path, SynthConfig(steps=3, python=True, seed=3))
    return path


def test_split_synth_same_tables(tmp_path: Path, synth_trace: Path) -> None:
    (tmp_path / "st").mkdir()
    staged = stage_file(synth_trace, tmp_path / "st", parts=2, min_split_bytes=1, stager=stager_for(True))
    assert len(staged.parts) == 2  # the split really happened
    assert staged.parts[1][1] > 0
    _assert_same(_ingest(tmp_path, "one", synth_trace, 1), _ingest(tmp_path, "two", synth_trace, 2))


def test_split_three_parts_synth(tmp_path: Path, synth_trace: Path) -> None:
    _assert_same(_ingest(tmp_path, "one", synth_trace, 1), _ingest(tmp_path, "three", synth_trace, 3))


def test_split_real_trace_same_tables(tmp_path: Path, shared_traces: Path) -> None:
    trace = shared_traces / "ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    _assert_same(_ingest(tmp_path, "one", trace, 1), _ingest(tmp_path, "two", trace, 2))


def _trace_with_separator_in_string(path: Path) -> None:
    """A trace whose midpoint falls in a name containing ``},{``: the cut is not a boundary."""
    pad = "x" * 4000
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": pad + "},{" + pad, "pid": 1, "tid": 1,
         "ts": 2, "dur": 1},
        {"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": 3, "dur": 1},
    ]
    path.write_bytes(gzip.compress(json.dumps({"traceEvents": events}).encode()))


def test_split_falls_back_when_the_cut_is_inside_a_string(tmp_path: Path) -> None:
    trace = tmp_path / "tricky.json.gz"
    _trace_with_separator_in_string(trace)
    size = decompressed_size(trace)
    assert size is not None and size == len(gzip.decompress(trace.read_bytes()))
    (tmp_path / "st").mkdir()
    staged = stage_file(trace, tmp_path / "st", parts=2, min_split_bytes=1, stager=stager_for(True))
    assert len(staged.parts) == 1  # the split was refused, the file parsed in one part
    assert staged.events == 3
    one = _ingest(tmp_path, "one", trace, 1)
    _assert_same(one, _ingest(tmp_path, "two", trace, 2))
    assert one["events"]["name"].to_list()[1].startswith("x")


def test_split_errors_are_the_sequential_ones(tmp_path: Path, synth_trace: Path) -> None:
    data = gzip.decompress(synth_trace.read_bytes())
    bad = tmp_path / "bad.json"
    cut = data.index(b"},", len(data) * 3 // 4) + 2  # between two events
    bad.write_bytes(data[:cut] + b"@@" + data[cut:])
    store = Store(tmp_path / "wh")
    store.create()
    seq = ingest_file(store, bad, IngestOptions(parts=1))
    par = ingest_file(store, bad, IngestOptions(parts=2, min_split_bytes=1))
    assert seq.outcome == par.outcome == "failed"
    assert seq.error == par.error and "event #" in (seq.error or "")


def test_a_later_part_parses_the_whole_document_again_only_for_a_second_key(
    tmp_path: Path, synth_trace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later part decompresses the bytes before its start (the header's key among them):
    that key alone never makes it parse the whole file again; a second key in its share does."""
    from tracewh.ingest import reader
    from tracewh.ingest.shred import stage_part

    calls: list[Path] = []
    real = reader.duplicate_events_keys

    def counting(path: Path) -> int:
        calls.append(path)
        return real(path)

    monkeypatch.setattr(reader, "duplicate_events_keys", counting)
    data = gzip.decompress(synth_trace.read_bytes())
    start = data.index(b"},", len(data) // 2) + 1
    (tmp_path / "p1").mkdir()
    r = stage_part(synth_trace, tmp_path / "p1", stager=stager_for(True), part=1, start_at=start)
    assert r.events > 0 and r.error is None and calls == []
    doubled = tmp_path / "doubled.json"  # a second top-level key after the events
    end = data.rindex(b"}")
    doubled.write_bytes(data[:end] + b', "traceEvents": []' + data[end:])
    (tmp_path / "p2").mkdir()
    with pytest.raises(TraceFormatError, match="top-level traceEvents arrays"):
        stage_part(doubled, tmp_path / "p2", stager=stager_for(False), part=1, start_at=start)
    assert calls == [doubled]
