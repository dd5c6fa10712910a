"""Export back to Chrome/Perfetto JSON: exact timestamps, structure, and the ingest round trip."""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.core.errors import UsageError
from tracewh.report.export import ExportFilter, ExportResult, export_trace, parse_steps, us

#: Epoch-based timestamps with nanosecond digits, 5 ProfilerSteps, flows (ac2g, fwdbwd).
NS_TRACE = "ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"


@pytest.mark.parametrize("ns", [0, 1, 999, 1000, 1001, -1, -1500, 1712195495505775402, 2**63 - 1])
def test_us_is_exact(ns: int) -> None:
    text = us(ns)
    assert len(text.split(".")[1]) == 3
    assert int(Decimal(text) * 1000) == ns  # independent decimal check


def test_parse_steps() -> None:
    assert parse_steps("3-4") == (3, 4)
    assert parse_steps("7") == (7, 7)
    for bad in ("a-b", "5-3", ""):
        with pytest.raises(UsageError):
            parse_steps(bad)


@pytest.fixture(scope="module")
def ns_wh(shared_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    wh = Warehouse(tmp_path_factory.mktemp("export") / "wh")
    wh.ingest([shared_traces / NS_TRACE])
    return wh


@pytest.fixture(scope="module")
def exported(ns_wh: Warehouse, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ExportResult]:
    out = tmp_path_factory.mktemp("exported") / "run.json.gz"
    return out, export_trace(ns_wh, "latest", out)


def _doc(path: Path) -> dict[str, Any]:
    """The exported trace with numbers as Decimal (what the file holds, not a float)."""
    doc: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    return doc


def test_round_trip_same_ranking_and_gaps(
    ns_wh: Warehouse, exported: tuple[Path, ExportResult], tmp_path: Path
) -> None:
    out, result = exported
    assert result.flows > 0
    doc = _doc(out)
    events = doc["traceEvents"]
    assert "baseTimeNanoseconds" not in doc
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names  # thread names came back from `threads`
    assert {e["cat"] for e in events if e["ph"] in "sf"} >= {"ac2g"}

    back = Warehouse(tmp_path / "wh2")
    report = back.ingest([out])
    assert report.results[0].outcome == "ingested", report.results
    src = ns_wh.resolve_run("latest").run_id
    for method in ("kernels", "gaps", "steps"):
        assert_frame_equal(getattr(ns_wh, method)(src), getattr(back, method)("latest"))
    original = ns_wh.sql("SELECT n_flows, n_gpu_ops, n_steps FROM runs")
    assert_frame_equal(original, back.sql("SELECT n_flows, n_gpu_ops, n_steps FROM runs"))


def test_export_keeps_exact_nanoseconds(ns_wh: Warehouse, exported: tuple[Path, ExportResult]) -> None:
    doc = _doc(exported[0])
    got = sorted(int(e["ts"] * 1000) for e in doc["traceEvents"] if e.get("cat") == "kernel")
    want = sorted(ns_wh.sql("SELECT ts_ns FROM gpu_ops WHERE op_kind = 'kernel'")["ts_ns"].to_list())
    assert got == want


def test_events_nest_per_track(exported: tuple[Path, ExportResult]) -> None:
    doc = _doc(exported[0])
    tracks: dict[tuple[object, object], list[tuple[Decimal, Decimal]]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and "ts" in e:
            tracks.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e.get("dur", 0)))
    for spans in tracks.values():
        stack: list[Decimal] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1], "partial overlap on one track"
            stack.append(end)


def test_export_filters(ns_wh: Warehouse, tmp_path: Path) -> None:
    out = tmp_path / "f.json"
    export_trace(ns_wh, "latest", out, where=ExportFilter(steps=(103, 103), cats=frozenset({"kernel"})))
    events = json.loads(out.read_text())["traceEvents"]
    kernels = [e for e in events if e["ph"] == "X"]
    assert kernels and {e["cat"] for e in kernels} == {"kernel"}
    expected = ns_wh.sql("SELECT count(*) FROM gpu_ops WHERE step = 103 AND op_kind = 'kernel'").item()
    assert len(kernels) >= expected
    with pytest.raises(UsageError):
        export_trace(ns_wh, "latest", out, where=ExportFilter(steps=(900, 901)))


def test_export_cli(ns_wh: Warehouse, tmp_path: Path) -> None:
    out = tmp_path / "c.json.gz"
    result = CliRunner().invoke(app, ["export", "latest", "-w", str(ns_wh.root), "--out", str(out),
                                      "--streams", "7", "--steps", "101-102"])
    assert result.exit_code == 0, result.output
    assert json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]
    bad = CliRunner().invoke(app, ["export", "latest", "-w", str(ns_wh.root), "--out", str(tmp_path / "x.txt")])
    assert bad.exit_code == 2
