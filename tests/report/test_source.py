"""What a report asks for more than once is computed once per session, with the same answers.

``changes`` and ``check`` both need the run set and ``series_values``; ``runs`` needs the run
set too. Inside ``Warehouse.session()`` each is computed once (``Warehouse.memoized``); the
answers equal those of separate calls outside a session. ``check`` reads ``series_values``
over all runs when its window starts on the first visible day: the rows then equal those
of the window (checked here on the SQL itself).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import polars as pl
import pytest

from tracewh.api import Warehouse
from tracewh.synth import Regression, SynthConfig, write_history

START = dt.date(2025, 4, 1)


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Warehouse:
    base = tmp_path_factory.mktemp("shared")
    write_history(base / "src", SynthConfig(steps=2, layers=1, model="m", seed=31), runs=5,
                  start=START, regressions=[Regression("flash_fwd", 0.4, START + dt.timedelta(days=3))])
    wh = Warehouse(base / "wh")
    assert wh.ingest([base / "src"], jobs=1).ok
    return wh


def _sorted(df: pl.DataFrame) -> pl.DataFrame:
    return df.sort(df.columns, nulls_last=True)


def test_series_values_from_the_first_day_are_all_runs(wh: Warehouse) -> None:
    query = "SELECT * FROM series_values(since := $s)"
    whole = wh.sql(query, {"s": None})
    first = wh.sql(query, {"s": START}, since=START)
    later = wh.sql(query, {"s": START + dt.timedelta(days=1)}, since=START + dt.timedelta(days=1))
    assert whole.height > 0 and _sorted(whole).equals(_sorted(first))
    assert later.height < whole.height  # the window does filter


def test_a_session_computes_shared_inputs_once(wh: Warehouse, monkeypatch: pytest.MonkeyPatch) -> None:
    changes = wh.changes(since=None).to_dicts()
    check = wh.check().to_dict()
    runs = wh.runs()
    assert any(r["metric"] == "kernel" for r in changes) and check["checked"]
    calls: list[str] = []
    real_sql, real_table = wh.sql, wh.run_table

    def sql(query: str, *args: Any, **kwargs: Any) -> pl.DataFrame:
        calls.append(query)
        return real_sql(query, *args, **kwargs)

    def run_table(**kwargs: object) -> pl.DataFrame:
        calls.append("run_table")
        return real_table(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(wh, "sql", sql)
    monkeypatch.setattr(wh, "run_table", run_table)
    with wh.session():
        assert wh.runs().equals(runs)
        assert wh.changes(since=None).to_dicts() == changes
        assert wh.check().to_dict() == check
        assert wh.changes(since=None).to_dicts() == changes
    assert sum("series_values(" in q for q in calls) == 1, calls
    assert calls.count("run_table") == 1, calls  # labelled runs: no fingerprint read
    calls.clear()
    assert wh.check().to_dict() == check  # outside a session: computed again
    assert sum("series_values(" in q for q in calls) == 1 and calls.count("run_table") == 1
