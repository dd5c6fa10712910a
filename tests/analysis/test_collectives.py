"""Collectives at ingest and matched across ranks: a 4-rank job with one rank late by known delays.

Expected figures come from the construction (``helpers_collectives.expected``), not from the
code under test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from helpers_collectives import KINDS, LATE_RANK, WORLD, constructed, expected, make_job
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app
from tracewh.core.errors import UsageError
from tracewh.ingest.pipeline import IngestOptions, ingest_file
from tracewh.storage.store import Store


@pytest.fixture(scope="module")
def job(shared_traces: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("job")
    make_job(shared_traces, root / "job1")
    wh = root / "wh"
    report = Warehouse(wh).ingest([root / "job1"], jobs=1)
    assert not report.failed
    return wh, root / "job1"


def _cli(*args: str) -> Any:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout.splitlines()[0])


def test_every_collective_matched_with_known_skew_busbw_wait(job: tuple[Path, Path], shared_traces: Path) -> None:
    wh, _ = job
    rows, _ = expected(shared_traces)
    got = _cli("collectives", "-w", str(wh), "--format", "json", "--top", "0")
    assert len(got) == len(rows) == 21
    by_seq = {g["seq"]: g for g in got}
    for want in rows:
        g = by_seq[want["seq"]]
        assert g["ranks"] == list(range(WORLD)), g
        assert g["collective"] == want["collective"]
        assert g["msg_bytes"] == want["msg_bytes"]
        assert g["last_rank"] == LATE_RANK
        assert abs(g["skew_ns"] - want["skew_ns"]) <= 1_000
        assert g["comm_ns"] == want["comm_ns"]
        assert g["busbw_gbps"] == pytest.approx(want["busbw_gbps"], rel=0.01)
        assert g["wait_ns"] == pytest.approx(want["wait_ns"], rel=0.01)
        assert g["last_start_ns"] - g["first_start_ns"] == g["skew_ns"]
        assert g["link"] == "nvlink3" and g["pct_of_link_peak"] == pytest.approx(
            100 * want["busbw_gbps"] / 300.0, rel=0.01)
    waits = [g["wait_ns"] for g in got]
    assert waits == sorted(waits, reverse=True)


def test_by_rank_waits(job: tuple[Path, Path], shared_traces: Path) -> None:
    wh, _ = job
    _, waits = expected(shared_traces)
    got = _cli("collectives", "-w", str(wh), "--by", "rank", "--format", "json")
    assert {g["rank"] for g in got} == set(range(WORLD))
    for g in got:
        assert g["collectives"] == 21
        assert g["late"] == (21 if g["rank"] == LATE_RANK else 0)
        assert g["wait_ns"] == pytest.approx(waits[g["rank"]], rel=0.01, abs=1)


def test_runs_given_explicitly_and_link_override(job: tuple[Path, Path]) -> None:
    wh, _ = job
    w = Warehouse(wh)
    ids = w.job_runs(["latest"])
    assert len(ids) == WORLD
    two = w.collectives(ids[:2])
    assert two["n_ranks"].to_list() == [2] * 21
    assert (two["skew_ns"] < 1_000).all()  # ranks 0 and 1 differ by 250 ns
    peak = w.collectives(ids, link="pcie4")
    assert peak["link_peak_gbps"].unique().to_list() == [31.5]
    user = w.collectives(ids, link_peak_gbps=100.0)
    assert (user["pct_of_link_peak"] - user["busbw_gbps"]).abs().max() < 1e-9
    with pytest.raises(UsageError):
        w.collectives(ids, link="warp-drive")
    with pytest.raises(UsageError):
        w.collectives([ids[0], ids[0]])


def test_table_rows_python_and_c_paths_agree(job: tuple[Path, Path], tmp_path: Path) -> None:
    wh, folder = job
    trace = folder / f"rank-{LATE_RANK}.pt.trace.json.gz"
    frames = []
    for native in (False, True):
        store = Store(tmp_path / f"wh-{native}")
        store.create()
        assert ingest_file(store, trace, IngestOptions(native=native)).outcome == "ingested"
        frames.append(Warehouse(store.root).sql(
            "SELECT * EXCLUDE (run_id, ingest_id) FROM collectives ORDER BY event_index"))
    batch = Warehouse(wh).sql(
        "SELECT c.* EXCLUDE (run_id, ingest_id) FROM collectives c JOIN runs r USING (run_id, ingest_id) "
        "WHERE r.rank = $r ORDER BY event_index", {"r": LATE_RANK})
    assert frames[0].height == 21
    assert frames[0].equals(frames[1])
    assert frames[0].equals(batch)
    row = frames[0].sort("ts_ns").row(0, named=True)
    assert row["pg_name"] == "0" and row["pg_ranks"] == "[0, 1, 2, 3]" and row["pg_size"] == 4
    assert row["seq_source"] == "ordinal" and row["seq"] == 0 and row["dtype_bytes"] == 4
    assert row["msg_bytes"] == row["in_nelems"] * 4


def test_classification_and_missing_args() -> None:
    import duckdb

    from tracewh.core.sqlfiles import SQL_DIR

    con = duckdb.connect()
    con.execute((SQL_DIR / "05_names.sql").read_text("utf-8"))
    cases = {
        ("allreduce", "x"): "all_reduce", ("_allgather_base", "x"): "all_gather",
        ("reduce_scatter_tensor_coalesced", "x"): "reduce_scatter", ("alltoall_base", "x"): "all_to_all",
        ("broadcast", "x"): "broadcast", ("reduce", "x"): "reduce", ("send", "x"): "send",
        ("recv", "x"): "recv", ("barrier", "x"): "barrier",
        (None, "ncclDevKernel_AllGather_RING_LL(ncclDevComm*)"): "all_gather",
        (None, "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"): "send_recv",
        (None, "void cross_device_reduce_1stage<__half, 8>(...)"): "all_reduce",
        (None, "mscclKernel_Sum_half_LL128"): "other",
    }
    for (coll, name), want in cases.items():
        assert con.execute("SELECT tw_collective(?, ?)", [coll, name]).fetchone() == (want,)
    for name in ("ncclDevKernel_AllGather_RING_LL", "mscclKernel_Sum_half_LL128",
                 "rccl_AllReduce", "void cross_device_reduce_2stage<float, 8>"):
        assert con.execute("SELECT tw_category(?, 'kernel')", [name]).fetchone() == ("communication",)
    assert con.execute("SELECT tw_dtype_bytes('BFloat16'), tw_dtype_bytes('Float8_e4m3fn'), "
                       "tw_dtype_bytes('Long'), tw_dtype_bytes('Mystery')").fetchone() == (2, 1, 8, None)


def test_old_warehouse_without_the_table_reads_empty(tmp_path: Path, shared_traces: Path) -> None:
    w = Warehouse(tmp_path / "wh")
    w.ingest([shared_traces / "critical_path__cuda_event_sync__event_sync_trace.json.gz"], jobs=1)
    assert w.collectives(["latest"]).is_empty()
    assert w.collectives(["latest"], by="rank").is_empty()
    assert isinstance(w.collectives(["latest"]), pl.DataFrame)


def test_stragglers_arrival_view_and_alert(job: tuple[Path, Path], shared_traces: Path) -> None:
    wh, _ = job
    rows, _ = expected(shared_traces)
    st = Warehouse(wh).ranks(view="stragglers")
    late = st.filter(pl.col("late_straggler"))
    assert set(late["rank"].to_list()) == {LATE_RANK}
    assert late["late"].sum() == late["collectives"].sum() == len(rows)
    # the others waited, in the collectives rank 2 was late to, the total of the constructed waits
    assert late["caused_wait_ns"].sum() == pytest.approx(sum(r["wait_ns"] for r in rows), rel=0.01)
    early = st.filter(pl.col("rank") != LATE_RANK)
    assert early["late"].sum() == 0 and not early["late_straggler"].any()
    res = CliRunner().invoke(app, ["ranks", "-w", str(wh), "--view", "stragglers"])
    assert res.exit_code == 0, res.output
    assert f"alert: rank {LATE_RANK} arrived last at most collectives of 3 step(s) (4, 5, 6): 21 of 21" in res.output


def test_busbw_factors_of_all_gather_reduce_scatter_all_to_all(shared_traces: Path, tmp_path: Path) -> None:
    """nccl-tests' bus bandwidth: algbw x (n-1)/n for these three (all-reduce: 2(n-1)/n), where
    algbw divides the all-gather's output bytes (n x its input) and the others' input bytes."""
    make_job(shared_traces, tmp_path / "job", relabel=KINDS)
    wh = Warehouse(tmp_path / "wh")
    assert not wh.ingest([tmp_path / "job"], jobs=1).failed
    rows = wh.sql("SELECT * FROM collective_matches((SELECT list(run_id) FROM runs))").to_dicts()
    got = {g["seq"]: g for g in rows}
    cli = {g["seq"]: g for g in _cli("collectives", "-w", str(wh.root), "--format", "json", "--top", "0")}
    assert {k: (g["collective"], g["busbw_gbps"]) for k, g in cli.items()} == {
        k: (g["collective"], g["busbw_gbps"]) for k, g in got.items()}
    n = WORLD
    seen = set()
    for c in constructed(shared_traces):
        _, kind, mul, _ = KINDS[c.seq % len(KINDS)]
        g = got[c.seq]
        assert g["collective"] == kind and g["group_size"] == n and g["comm_ns"] == c.dur_ns, g
        bw_bytes = c.msg_bytes * mul  # all-gather: the output, n inputs; else the input
        assert g["bw_bytes"] == bw_bytes, g
        assert g["algbw_gbps"] == pytest.approx(bw_bytes / c.dur_ns, rel=1e-9)
        assert g["busbw_factor"] == pytest.approx((n - 1) / n, rel=1e-12)
        assert g["busbw_gbps"] == pytest.approx(bw_bytes / c.dur_ns * (n - 1) / n, rel=1e-9)
        seen.add(kind)
    assert seen == {"all_gather", "reduce_scatter", "all_to_all"}


def test_wait_of_an_8_rank_job_at_epoch_timestamps(tmp_path: Path) -> None:
    """``wait_ns`` of a collective is n_ranks x its last start - the sum of starts: with starts in
    ns since 1970 (~1.6e18), n_ranks x start passes int64 from 6 ranks on (issue 35: the report of
    a 20-rank fleet job failed with "Overflow in multiplication of INT64")."""
    from tracewh.synth import SynthConfig, write_traces

    write_traces(tmp_path / "tr", SynthConfig(ranks=8, steps=2, layers=1, seed=3))
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([tmp_path / "tr"], jobs=1).ok
    ops = wh.sql("SELECT pg_name, pg_ranks, seq, ts_ns FROM collective_ops((SELECT list(run_id) FROM runs))")
    assert ops["ts_ns"].min() > 10**18
    want = ops.group_by("pg_name", "pg_ranks", "seq").agg(
        ((pl.col("ts_ns").max() - pl.col("ts_ns")).sum()).alias("wait"), pl.len().alias("n"))
    got = wh.sql("SELECT pg AS pg_name, pg_ranks, seq, wait_ns, n_ranks FROM "
                 "collective_matches((SELECT list(run_id) FROM runs))")
    both = want.join(got, on=["pg_name", "pg_ranks", "seq"], how="full", nulls_equal=True)
    assert both.height == got.height == want.height > 0
    assert (both["n_ranks"] == 8).all() and (both["n"] == 8).all()
    assert both["wait_ns"].to_list() == both["wait"].to_list()
    assert wh.sql("SELECT * FROM collective_rank_waits((SELECT list(run_id) FROM runs))").height == 8
