"""The report's memory section: the chart's data, its text and tables, and the empty case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from memory_reference import reference

from tracewh.api import Warehouse
from tracewh.report import render
from tracewh.report.memory_section import collect_memory, memory_chart, memory_section
from tracewh.synth import SynthConfig, write_trace

LEAK = 32_000_000


@pytest.fixture(scope="module")
def leaky(tmp_path_factory: pytest.TempPathFactory) -> tuple[Warehouse, str, Path]:
    base = tmp_path_factory.mktemp("repmem")
    path = base / "leak.pt.trace.json"
    write_trace(path, SynthConfig(steps=4, layers=1, seed=9, leak_bytes=LEAK))
    wh = Warehouse(base / "wh")
    (result,) = wh.ingest([path]).results
    return wh, str(result.run_id), path


def _layers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key in ("layer", "vconcat"):
        for part in spec.get(key, []):
            out += _layers(part) if ("layer" in part or "vconcat" in part) else [part]
    return out


def _data(spec: dict[str, Any], layer: dict[str, Any]) -> list[dict[str, Any]]:
    data = layer["data"]
    values: list[dict[str, Any]] = data["values"] if "values" in data else spec["datasets"][data["name"]]
    return values


def test_chart_draws_allocated_reserved_steps_and_the_peak(leaky: tuple[Warehouse, str, Path]) -> None:
    wh, run_id, path = leaky
    data = collect_memory(wh, run_id)
    assert data is not None
    spec = render.spec(memory_chart(data))
    (dev,) = reference(path).devices.values()
    marks = {(lay["mark"]["type"] if isinstance(lay["mark"], dict) else lay["mark"]): lay for lay in _layers(spec)}
    assert {"rect", "line", "point", "text"} <= set(marks)
    lines = _data(spec, marks["line"])
    allocated = [v["value"] for v in lines if v["series"] == "allocated"]
    reserved = [v["value"] for v in lines if v["series"] == "reserved"]
    assert max(allocated) == pytest.approx(dev.peak.allocated / 1e9)  # the peak is never smoothed away
    assert max(reserved) == pytest.approx(max(e.reserved or 0 for e in dev.events) / 1e9)
    (peak,) = _data(spec, marks["point"])
    assert peak["value"] == pytest.approx(dev.peak.allocated / 1e9)
    assert [b["step"] for b in _data(spec, marks["rect"])] == sorted(reference(path).steps)
    png = render.png(spec, key="memory")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


def test_section_text_and_tables(leaky: tuple[Warehouse, str, Path]) -> None:
    wh, run_id, _ = leaky
    sec = memory_section(collect_memory(wh, run_id))
    assert sec.chart is not None and sec.key == "memory"
    assert "cuda:0 peaks at" in sec.text and "Leak suspect on cuda:0" in sec.text and "32.00 MB per step" in sec.text
    assert "2.00 GB of it was allocated before the trace" in sec.text
    titles = [t.title for t in sec.tables]
    assert titles == ["Memory per device", "Who holds the peak (live allocations by module and CPU operator)",
                      "Per step"]
    holders = sec.tables[1].frame
    assert "aten::clone" in holders["operator"].to_list()
    assert sec.tables[2].frame.height == 4


def test_no_memory_events_say_so(tmp_path: Path) -> None:
    write_trace(tmp_path / "t.json", SynthConfig(steps=1, layers=1, memory=False))
    wh = Warehouse(tmp_path / "wh")
    (result,) = wh.ingest([tmp_path / "t.json"]).results
    sec = memory_section(collect_memory(wh, str(result.run_id)))
    assert sec.chart is None and "no [memory] events" in sec.empty
    assert memory_section(None).chart is None
    assert collect_memory(object(), "x") is None
