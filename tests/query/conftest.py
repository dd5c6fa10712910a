from __future__ import annotations

import datetime as dt

import pytest

from tracewh.api import Warehouse
from tracewh.synth import SynthConfig, write_history


@pytest.fixture(scope="module")
def two_days(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    """A warehouse of two synthetic runs on two days (one per test module: some damage it)."""
    root = tmp_path_factory.mktemp("two-days")
    write_history(root / "traces", SynthConfig(steps=2, layers=1, ranks=1, seed=3), runs=2,
                  start=dt.date(2025, 1, 1))
    wh = Warehouse(root / "wh")
    assert wh.ingest([root / "traces"], jobs=1).ok
    return wh
