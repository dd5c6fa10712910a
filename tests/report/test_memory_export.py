"""Memory counter tracks in the Perfetto export: values, placement, windows and the round trip."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from memory_reference import reference
from polars.testing import assert_frame_equal

from tracewh.api import Warehouse
from tracewh.report.export import ExportFilter, export_trace
from tracewh.synth import SynthConfig, write_trace

MI300 = "tracelens__mi300__bert-small-uncased.json.gz"


def _events(path: Path) -> list[dict[str, Any]]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    doc: dict[str, Any] = json.loads(raw, parse_float=Decimal)
    return [e for e in doc["traceEvents"] if e.get("cat") == "tracewh_memory"]


def _ns(v: Decimal) -> int:
    return int(v * 1000)


@pytest.fixture(scope="module")
def mi300(shared_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Warehouse, str, Path]:
    wh = Warehouse(tmp_path_factory.mktemp("memexp") / "wh")
    (result,) = wh.ingest([shared_traces / MI300]).results
    return wh, str(result.run_id), shared_traces / MI300


def test_every_memory_event_becomes_a_counter_point(mi300: tuple[Warehouse, str, Path], tmp_path: Path) -> None:
    wh, run_id, path = mi300
    out = tmp_path / "run.json.gz"
    export_trace(wh, run_id, out)
    got: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    pids: dict[str, set[Any]] = defaultdict(set)
    for e in _events(out):
        assert e["ph"] == "C" and set(e["args"]) == {"allocated_bytes", "reserved_bytes"}
        got[e["name"]].append((_ns(e["ts"]), e["args"]["allocated_bytes"], e["args"]["reserved_bytes"]))
        pids[e["name"]].add(e["pid"])
    ref = reference(path)
    assert set(got) == {f"{name} memory" for name in ref.devices}
    for name, dev in ref.devices.items():
        assert got[f"{name} memory"] == [(m.ts, m.allocated, m.reserved) for m in dev.events]
    # the GPU's tracks sit in the process of its kernels, the CPU's in the allocating process
    gpu_pids = set(wh.sql("SELECT DISTINCT pid FROM gpu_ops WHERE run_id = ?", [run_id])["pid"].to_list())
    assert pids["hip:0 memory"] <= gpu_pids
    assert pids["cpu memory"] == {m.pid for m in ref.devices["cpu"].events}


def test_round_trip_keeps_the_memory_analysis_and_exports_counters_once(
    mi300: tuple[Warehouse, str, Path], tmp_path: Path
) -> None:
    wh, run_id, _ = mi300
    first = tmp_path / "a.json.gz"
    export_trace(wh, run_id, first)
    again = Warehouse(tmp_path / "wh2")
    (result,) = again.ingest([first]).results
    rid = str(result.run_id)
    for view in ("summary", "peak", "allocations", "steps"):
        positions = ("peak_offset_ns", "offset_ns", "event_index")  # file positions and start move
        a = wh.memory(run_id, view=view).drop(positions, strict=False)
        b = again.memory(rid, view=view).drop(positions, strict=False)
        assert_frame_equal(a, b, check_row_order=True)
    second = tmp_path / "b.json.gz"
    export_trace(again, rid, second)
    assert len(_events(second)) == len(_events(first))


def test_window_opens_with_the_level_held(tmp_path: Path) -> None:
    path = tmp_path / "leak.json"
    write_trace(path, SynthConfig(steps=4, layers=1, seed=4, leak_bytes=10_000_000))
    wh = Warehouse(tmp_path / "wh")
    (result,) = wh.ingest([path]).results
    out = tmp_path / "w.json"
    export_trace(wh, str(result.run_id), out, where=ExportFilter(steps=(2, 2)))
    points = [(_ns(e["ts"]), e["args"]["allocated_bytes"]) for e in _events(out)]
    ref = reference(path)
    (dev,) = ref.devices.values()
    s, e = ref.steps[2]  # the window also covers the step's GPU ops; no memory event there
    inside = [(m.ts, m.allocated) for m in dev.events if s <= m.ts < e]
    assert points[0] == (s, dev.level_before(s))  # opens with two earlier leaks held
    assert dev.level_before(s) == 2_000_000_000 + 2 * 10_000_000
    assert points[1:] == inside and inside
    none = tmp_path / "k.json"
    export_trace(wh, str(result.run_id), none, where=ExportFilter(cats=frozenset({"kernel"})))
    assert _events(none) == []
    kept = tmp_path / "m.json"
    export_trace(wh, str(result.run_id), kept, where=ExportFilter(cats=frozenset({"kernel", "memory"})))
    assert len(_events(kept)) == len(dev.events)
