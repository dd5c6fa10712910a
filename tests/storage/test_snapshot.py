"""tracewh.storage.snapshot: each table's log read once, on first use, runs first."""

from __future__ import annotations

import datetime as dt

import pytest

from tracewh.storage.snapshot import LiveSnapshot, select_files

FILES = {
    "runs": [("runs/a.parquet", None)],
    "gpu_ops": [("gpu_ops/day=2020-01-01/a.parquet", "2020-01-01"),
                ("gpu_ops/day=2020-01-02/b.parquet", "2020-01-02")],
    "run_series": [("run_series/a.parquet", None)],
    "ingest_log": [("ingest_log/a.parquet", None)],
}  # fmt: skip
CHILD = {"runs": False, "gpu_ops": True, "run_series": True, "ingest_log": False}


def _snapshot(reads: list[str]) -> LiveSnapshot:
    def read(name: str) -> list[tuple[str, str | None]]:
        reads.append(name)
        return FILES[name]

    return LiveSnapshot(read, ["gpu_ops", "run_series", "runs", "ingest_log"], skip=["ingest_log"])


def test_runs_at_once_the_others_on_first_use_and_once() -> None:
    reads: list[str] = []
    live = _snapshot(reads)
    assert reads == ["runs"] and list(live) == ["runs", "gpu_ops", "run_series", "ingest_log"]
    assert live["gpu_ops"] == FILES["gpu_ops"] and live["gpu_ops"] == FILES["gpu_ops"]
    assert live["ingest_log"] == [] and live.get("nope") is None
    assert reads == ["runs", "gpu_ops"] and live.read() == ["runs", "gpu_ops"]


def test_no_day_asked_no_partitioned_log_read() -> None:
    reads: list[str] = []
    files = select_files(_snapshot(reads), CHILD, days=set())
    # run_series has no partitions: read whole; gpu_ops: no day wanted, its log never read
    assert files == {"runs": ["runs/a.parquet"], "gpu_ops": [],
                     "run_series": ["run_series/a.parquet"], "ingest_log": []}  # fmt: skip
    assert reads == ["runs", "run_series"]
    got = select_files(_snapshot([]), CHILD, days={dt.date(2020, 1, 2)}, names=["gpu_ops"])
    assert got == {"gpu_ops": ["gpu_ops/day=2020-01-02/b.parquet"]}


def test_an_unknown_table_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        _snapshot([])["events"]


def test_days_taken_by_index_equal_the_scan_of_every_entry() -> None:
    """A LiveSnapshot picks a query's days by its day index (not by going over every entry):
    the same files, in the log's order, as a plain mapping's scan; and it checks just those."""
    days = [f"2020-01-{d:02d}" for d in (3, 1, 2, 1, 3, 2)]  # interleaved: order must be kept
    files = {
        "runs": [("runs/a.parquet", None)],
        "gpu_ops": [(f"gpu_ops/day={d}/f{i}.parquet", d) for i, d in enumerate(days)],
        "run_series": [("run_series/b.parquet", None), ("run_series/a.parquet", None)],
    }
    child = {"runs": False, "gpu_ops": True, "run_series": True}
    checked: list[tuple[str, list[str]]] = []
    live = LiveSnapshot(lambda name: files[name], list(files),
                        check=lambda name, paths: checked.append((name, list(paths))))
    for kw in ({"days": {dt.date(2020, 1, 1)}}, {"days": {dt.date(2020, 1, 3), dt.date(2020, 1, 2)}},
               {"since": dt.date(2020, 1, 2)}, {"days": {dt.date(2020, 1, 1)}, "since": dt.date(2020, 1, 2)},
               {"days": set()}, {}):
        got = select_files(live, child, **kw)  # type: ignore[arg-type]
        assert got == select_files(files, child, **kw), kw  # type: ignore[arg-type]
    one = select_files(live, child, days={dt.date(2020, 1, 2)})
    assert one["gpu_ops"] == ["gpu_ops/day=2020-01-02/f2.parquet", "gpu_ops/day=2020-01-02/f5.parquet"]
    assert ("gpu_ops", ["gpu_ops/day=2020-01-01/f1.parquet", "gpu_ops/day=2020-01-01/f3.parquet"]) in checked
    assert all(len(p) <= 6 for _, p in checked)
