"""tracewh.ingest.derive: the outputs of one staged trace.

``empty_outputs`` lets a run skip the ``COPY`` of a table it has no rows of; a table it
names must really have none (its output query, run anyway, returns no rows), else the
skip would lose rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tracewh.ingest.derive import empty_outputs
from tracewh.ingest.link import INGEST_SQL, OUT_TABLES, connect_staging, plan_runs, set_files
from tracewh.ingest.options import IngestOptions
from tracewh.ingest.parts import stage_file
from tracewh.ingest.shred import stager_for
from tracewh.synth import SynthConfig, write_trace

#: shared traces with few kinds of events (most outputs empty) and with many
SHARED = (
    "trace_compare__base__base.json.gz",  # 33 events
    "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "tracelens__vllm_decode_full__capture_rank_0.pt.trace.json.gz",  # graph captures
    "nccl_parser_config__nccl_data.json.gz",  # collectives
    "tracelens__mi300__bert-small-uncased.json.gz",
)


def _outputs(trace: Path, tmp: Path) -> tuple[frozenset[str], dict[str, int]]:
    """The tables ``empty_outputs`` names for ``trace``, and every output query's row count."""
    options = IngestOptions()
    tmp.mkdir(parents=True)
    staged = stage_file(trace, tmp, stager=stager_for(True))
    con = connect_staging(tmp, staged, options)
    try:
        set_files(con, [(0, "r", "i", None, 0, None, None, 0)])
        plan = plan_runs(con, {0: staged.metadata}, {0: staged.anomalies}, options)[0]
        set_files(con, [(0, "r", "i", plan.day, plan.base_ns, *plan.window, 0)])
        empty = empty_outputs(con)
        counts = {}
        for table, sql_file in OUT_TABLES:
            if table in ("gpu_ops", "fingerprints"):  # slices, minhash: never skipped
                assert table not in empty
                continue
            query = (INGEST_SQL / sql_file).read_text(encoding="utf-8")
            counts[table] = con.execute(f"SELECT count(*) FROM ({query})").fetchall()[0][0]
    finally:
        con.close()
    return empty, counts


def _check(empty: frozenset[str], counts: dict[str, int]) -> None:
    assert empty <= set(counts)
    for table in empty:
        assert counts[table] == 0, table


def test_a_skipped_output_has_no_rows_synthetic(tmp_path: Path) -> None:
    trace = tmp_path / "t.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=2, layers=1, seed=3))
    empty, counts = _outputs(trace, tmp_path / "st")
    _check(empty, counts)
    assert "events" not in empty and counts["events"] > 0
    assert {"counters", "graph_nodes"} <= empty  # the synthetic trace has neither


@pytest.mark.parametrize("name", SHARED)
def test_a_skipped_output_has_no_rows_real(tmp_path: Path, shared_traces: Path, name: str) -> None:
    empty, counts = _outputs(shared_traces / name, tmp_path / "st")
    _check(empty, counts)
    # what is not skipped is every table with rows, and the skip does find the empty ones
    assert {t for t, n in counts.items() if n == 0} - empty <= {"collectives", "steps", "flow_args"}
