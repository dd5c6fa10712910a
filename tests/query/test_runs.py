"""`latest` resolves as run_matches does (the fast path of tracewh.query.runs.resolve).

Every run matches `latest`; resolve reads the first six runs in run_matches' order and the
count of all of them without planning run_matches' term filters. Expected values come from
run_matches itself (sql/02_runs.sql, the one definition of the order), on 7 runs.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from tracewh.api import Warehouse
from tracewh.synth import SynthConfig
from tracewh.synth.writer import write_history


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    base = tmp_path_factory.mktemp("latest")
    write_history(base / "t", SynthConfig(steps=1, layers=1, seed=3), runs=7, start=dt.date(2025, 1, 1))
    warehouse = Warehouse(base / "wh")
    nights = sorted(p for p in Path(base / "t").iterdir() if p.is_dir())
    assert warehouse.ingest(nights[:4]).ok and warehouse.ingest(nights[4:]).ok  # two ingests
    return warehouse


@pytest.mark.parametrize("selector", ["latest", "LATEST", ["latest", "latest"]])
def test_latest_is_run_matches_first(wh: Warehouse, selector: str | list[str]) -> None:
    expected = wh.sql("SELECT run_id, matched FROM run_matches('latest') ORDER BY pos")
    ids = expected["run_id"].to_list()
    ref = wh.resolve_run(selector)
    assert ref.run_id == ids[0]
    assert ref.matched == expected["matched"][0] == 7
    assert list(ref.others) == ids[1:6]
    assert ref.run_id == wh.resolve_run(ids[0]).run_id  # by prefix: the same run
