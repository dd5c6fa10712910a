"""``commit.copy_runs``: one output file per run from one ``COPY``, each moved to its day."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import duckdb

from tracewh.ingest.commit import copy_runs
from tracewh.storage.store import Store

QUERY = """
SELECT 'run-' || (i % 3) AS run_id, 'ing' || (i % 3) AS ingest_id, DATE '2025-01-01' AS day,
       i AS event_index, '{"k": ' || i || '}' AS args_json
FROM range(30) r(i)
"""


class Sink:
    def __init__(self) -> None:
        self.adds: list[tuple[str, str, Any]] = []

    def add_file(self, ingest_id: str, table: str, add: Any) -> None:
        self.adds.append((ingest_id, table, add))


def _copy(tmp_path: Path, alone: tuple[str, ...] = ()) -> tuple[Store, Sink, dict[str, int], Path]:
    store = Store(tmp_path / "wh")
    store.create()
    runs = {f"ing{k}": (date(2025, 1, 1 + k), f"run-{k}") for k in range(3)}
    work = tmp_path / "work"
    work.mkdir()
    sink = Sink()
    con = duckdb.connect()
    try:
        counts = copy_runs(store, con, "flow_args", QUERY, {}, runs, work, sink, alone=alone)
    finally:
        con.close()
    return store, sink, counts, work


def _check(store: Store, sink: Sink, counts: dict[str, int]) -> None:
    assert counts == {"ing0": 10, "ing1": 10, "ing2": 10}
    root = Path(store.table_uri("flow_args"))
    assert sorted(i for i, _, _ in sink.adds) == ["ing0", "ing1", "ing2"]
    for ingest_id, table, add in sink.adds:
        k = int(ingest_id[-1])
        assert table == "flow_args"
        assert add.path.startswith(f"day=2025-01-0{1 + k}/part-")
        path = root / add.path
        assert add.size == path.stat().st_size
        rows = duckdb.sql(f"SELECT run_id, ingest_id, event_index FROM read_parquet('{path}') "
                          "ORDER BY event_index").fetchall()
        assert rows == [(f"run-{k}", ingest_id, i) for i in range(k, 30, 3)]


def test_one_file_per_run_without_a_folder_per_run(tmp_path: Path) -> None:
    """The partitioned ``COPY`` writes its files side by side (no ``ingest_id=...`` folder
    per run to make and remove), each run's found by its partition key."""
    store, sink, counts, work = _copy(tmp_path)
    _check(store, sink, counts)
    assert [p for p in (work / "flow_args").iterdir()] == []  # every file moved out
    assert not [p for p in work.rglob("*") if p.is_dir() and p.name.startswith("ingest_id=")]


def test_runs_alone_and_partitioned_together(tmp_path: Path) -> None:
    store, sink, counts, _ = _copy(tmp_path, alone=("ing1",))
    _check(store, sink, counts)
