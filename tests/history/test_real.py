"""`Warehouse.diff` on the real trace_diff control/test pair, against plain json."""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from tracewh.api import Warehouse
from tracewh.schema.arrow import GPU_OP_CATEGORIES

CONTROL = "trace_diff__control__control.json.gz"
TEST = "trace_diff__test__test.json.gz"


def _per_step(path: Path) -> tuple[dict[str, tuple[int, float]], int]:
    """name -> (calls, ns per step) of GPU ops with a duration, and the number of steps."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    agg: dict[str, list[Decimal]] = defaultdict(lambda: [Decimal(0), Decimal(0)])
    steps = set()
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        if e.get("cat") in GPU_OP_CATEGORIES and e.get("dur") is not None:
            agg[e["name"]][0] += 1
            agg[e["name"]][1] += Decimal(e["dur"]) * 1000
        m = re.fullmatch(r"ProfilerStep#(\d+)", str(e.get("name")))
        if m:
            steps.add(int(m.group(1)))
    n = max(len(steps), 1)
    return {k: (int(c), float(t / n)) for k, (c, t) in agg.items()}, len(steps)


@pytest.fixture(scope="module")
def pair(shared_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Warehouse, str, str]:
    wh = Warehouse(tmp_path_factory.mktemp("diff") / "wh")
    report = wh.ingest([shared_traces / CONTROL, shared_traces / TEST], jobs=2)
    assert report.ok, report.to_dict()
    ids = dict(wh.sql("SELECT file_name, run_id FROM runs").rows())
    return wh, ids[CONTROL], ids[TEST]


@pytest.mark.slow
def test_diff_control_vs_test_matches_plain_json(
    pair: tuple[Warehouse, str, str], shared_traces: Path
) -> None:
    wh, a, b = pair
    raw_a, steps_a = _per_step(shared_traces / CONTROL)
    raw_b, steps_b = _per_step(shared_traces / TEST)
    # kernels are grouped by kernel key (hand-checked in test_sql_kernel_key.py): sum the
    # plain-json figures of the raw names under each key
    key = dict(wh.sql("SELECT name, kernel_key FROM kernel_keys").rows())

    def by_key(raw: dict[str, tuple[int, float]]) -> dict[str, tuple[int, float]]:
        out: dict[str, tuple[int, float]] = {}
        for name, (c, t) in raw.items():
            c0, t0 = out.get(key[name], (0, 0.0))
            out[key[name]] = (c0 + c, t0 + t)
        return out

    want_a, want_b = by_key(raw_a), by_key(raw_b)
    got = wh.diff(a, b)
    assert got.height == len(set(want_a) | set(want_b))
    assert got.height < len(set(raw_a) | set(raw_b))  # some kernels differ only by build details
    for row in got.iter_rows(named=True):
        assert key[row["name"]] == row["kernel_key"]
        ca, ta = want_a.get(row["kernel_key"], (0, 0.0))
        cb, tb = want_b.get(row["kernel_key"], (0, 0.0))
        assert (row["calls_a"], row["calls_b"]) == (ca, cb), row["name"]
        assert row["time_per_step_a_ns"] == pytest.approx(ta)
        assert row["time_per_step_b_ns"] == pytest.approx(tb)
        assert row["delta_per_step_ns"] == pytest.approx(tb - ta)
        want_status = "added" if not ca else "removed" if not cb else None
        if want_status:
            assert row["status"] == want_status
    impacts = [abs(x) for x in got["delta_per_step_ns"].to_list()]
    assert impacts == sorted(impacts, reverse=True)
    side = {r["metric"]: r for r in wh.compare(a, b).iter_rows(named=True)}
    assert (side["n_steps"]["value_a"], side["n_steps"]["value_b"]) == (steps_a, steps_b)
    total_a = sum(t for _, t in raw_a.values())
    assert side["gpu_op_per_step_ns"]["value_a"] == pytest.approx(total_a)


@pytest.mark.slow
def test_diff_by_category_sums_the_kernel_rows(pair: tuple[Warehouse, str, str]) -> None:
    wh, a, b = pair
    kern = wh.diff(a, b)
    cat = wh.diff(a, b, level="category")
    by_cat: dict[str, float] = defaultdict(float)
    for r in kern.iter_rows(named=True):
        by_cat[r["category"]] += r["delta_per_step_ns"]
    got = dict(zip(cat["name"], cat["delta_per_step_ns"], strict=True))
    assert got == pytest.approx(dict(by_cat))
