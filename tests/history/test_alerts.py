"""changes / check / workload identity over hand-made nightly rows (sql/ applied by DuckDB),
through a stand-in Source: expected nights and groups come from how the rows were built."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
from collections.abc import Collection, Mapping, Sequence
from datetime import date
from typing import Any

import duckdb
import polars as pl
from fixtures import warehouse

from tracewh.history.alerts import changes
from tracewh.history.check import check
from tracewh.query.runsel import RunRef

START = dt.date(2025, 1, 1)
KERNELS = {"gemm_a": 2.0e6, "gemm_b": 1.5e6, "flash_fwd": 1.0e6, "layer_norm": 0.3e6}


class FakeSource:
    """A Source over one DuckDB connection (all partitions)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, minhash: Mapping[str, list[int]]) -> None:
        self.con = con
        self.minhash = minhash

    def sql(self, query: str, params: Sequence[Any] | Mapping[str, Any] | None = None, *,
            days: Collection[date] | None = None, since: date | None = None) -> pl.DataFrame:  # fmt: skip
        return self.con.sql(query, params=params).pl()

    def resolve_run(self, selector: str = "latest") -> RunRef:
        df = self.con.sql("SELECT run_id, day, job, rank FROM runs ORDER BY start_ns DESC, rank").pl()
        row = df.row(0, named=True) if selector == "latest" else df.filter(
            pl.col("run_id") == selector).row(0, named=True)  # fmt: skip
        return RunRef(row["run_id"], row["day"], row["job"], row["rank"])

    def run_table(self, **_: object) -> pl.DataFrame:
        df = self.con.sql("SELECT * EXCLUDE (metadata_json) FROM runs").pl()
        return df.with_columns(pl.Series("minhash", [self.minhash.get(r) for r in df["run_id"]],
                                         dtype=pl.List(pl.Int64)))  # fmt: skip


def _nights(n: int, *, ranks: int = 1, shifts: Mapping[str, tuple[int, float]] | None = None,
            noise: float = 0.01, seed: int = 0, labels: Mapping[str, str] | None = None,
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:  # fmt: skip
    """Runs, gpu_ops and steps of ``n`` nights x ``ranks``: each kernel once per step (2 steps),
    multiplicative noise per night and kernel, ``shifts[kernel] = (night, +x)`` from that night."""
    rng = random.Random(seed)
    runs, ops, steps = [], [], []
    for night in range(n):
        day = START + dt.timedelta(days=night)
        for rank in range(ranks):
            rid = f"n{night:03d}r{rank}"
            t0 = (night * 86400 + 7200) * 10**9
            runs.append({"run_id": rid, "day": day, "start_ns": t0, "end_ns": t0 + 10**8,
                         "rank": rank, "world_size": ranks, "device_name": "GPU", "backend": "cuda",
                         "job": f"/traces/{day}", "labels_json": json.dumps({**(labels or {}),
                         "commit": f"c{night}"})})  # fmt: skip
            ts = t0
            for step in range(2):
                steps.append({"run_id": rid, "day": day, "step": step, "ts_ns": ts, "dur_ns": 10**7})
                for k, base in KERNELS.items():
                    f = math.exp(rng.gauss(0, noise))
                    if shifts and k in shifts and night >= shifts[k][0]:
                        f *= 1 + shifts[k][1]
                    ops.append({"run_id": rid, "day": day, "cat": "kernel", "op_kind": "kernel",
                                "name": k, "short_name": k, "category": "gemm" if "gemm" in k else "other",
                                "device": 0, "stream": 7, "ts_ns": ts, "dur_ns": int(base * f),
                                "step": step})  # fmt: skip
                    ts += int(base * 1.5)
    return runs, ops, steps


def _source(runs: list[dict[str, Any]], ops: list[dict[str, Any]], steps: list[dict[str, Any]],
            minhash: Mapping[str, list[int]] | None = None) -> FakeSource:  # fmt: skip
    for r in runs:
        r.setdefault("ingest_id", "i")
    for o in ops + steps:
        o["ingest_id"] = "i"
    return FakeSource(warehouse(runs=runs, gpu_ops=ops, steps=steps), minhash or {})


def test_noise_only_history_raises_nothing() -> None:
    src = _source(*_nights(40, labels={"model": "m"}, seed=1))
    rep = changes(src, since=None, min_ms=0.0)
    assert rep.changes.is_empty(), rep.to_dicts()
    assert rep.runs == 40 and rep.series > 4
    chk = check(src, "latest")
    assert not chk.regressed and chk.checked[0].baseline_runs == 39


def test_injected_shift_found_on_its_night_and_only_it() -> None:
    src = _source(*_nights(40, shifts={"flash_fwd": (25, 0.2)}, labels={"model": "m"}, seed=2))
    rep = changes(src, since=None, min_ms=0.0)
    got = {(d["metric"], d["key"], d["day"]) for d in rep.to_dicts()}
    night = (START + dt.timedelta(days=25)).isoformat()
    assert ("kernel", "flash_fwd", night) in got
    assert {g[2] for g in got} == {night}  # only that night (the step time may move with it)
    # its category, the step time and the idle gaps around it (ops are laid out back to back
    # at fixed starts) move with it; nothing else does
    assert {g[1] for g in got} <= {"flash_fwd", "other", "step_ns", "gpu_idle_fraction"}
    chk = check(src, "latest")
    (f,) = [f for f in chk.regressions if f.metric == "flash_fwd"]
    assert f.since_day == START + dt.timedelta(days=25) and f.since_commit == "c25"
    assert abs(f.change_fraction - 0.2) < 0.02  # type: ignore[operator]


def test_multi_kernel_shift_on_two_ranks_is_one_group() -> None:
    shifts = {"gemm_a": (30, 0.15), "gemm_b": (30, 0.25), "layer_norm": (30, -0.3)}
    src = _source(*_nights(36, ranks=2, shifts=shifts, labels={"model": "m"}, seed=3))
    rows = changes(src, since=None, min_ms=0.0).to_dicts()
    kernels = {(d["key"], d["rank"]) for d in rows if d["metric"] == "kernel"}
    assert kernels == {(k, r) for k in shifts for r in (0, 1)}
    assert {d["group"] for d in rows} == {1}
    assert {d["run_id"][:4] for d in rows} == {"n030"}
    impacts = [abs(d["after"] - d["before"]) for d in rows if d["metric"] == "kernel"]
    assert impacts == sorted(impacts, reverse=True)  # largest contributors first
    chk = check(src, "latest")
    assert len(chk.checked) == 2 and {f.group for f in chk.regressions} == {1}


def test_four_unrelated_models_in_one_folder_are_neither_comparable_nor_ranks() -> None:
    runs, ops, steps = [], [], []
    for i in range(4):
        r, o, s = _nights(1, seed=10 + i)
        for row in r + o + s:
            row["run_id"] = f"model{i}"
        r[0].update(job="/traces/hf", start_ns=r[0]["start_ns"] + i * 10**9, rank=None,
                    world_size=None, labels_json="{}")  # fmt: skip
        runs += r
        ops += o
        steps += s
    rng = random.Random(0)
    minhash = {f"model{i}": [rng.getrandbits(62) for _ in range(128)] for i in range(4)}
    src = _source(runs, ops, steps, minhash)
    table = src.run_table()
    from tracewh.history.workload import assign_workloads

    wl = assign_workloads(table)
    assert wl["workload"].n_unique() == 4 and wl["instance"].n_unique() == 4
    chk = check(src, "latest")
    assert not chk.regressed and chk.to_dict()["status"] == "insufficient_baseline"
    assert [c.baseline_runs for c in chk.checked] == [0]
    # the same model twice (equal signatures) is one workload, and comparable
    minhash["model3"] = minhash["model2"]
    wl2 = assign_workloads(src.run_table())
    assert wl2["workload"].n_unique() == 3


FOUR = (
    "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    "critical_path__cuda_event_sync__event_sync_trace.json.gz",
    "critical_path__cuda_event_sync_multi_stream__event_sync_trace.json.gz",
    "execution_trace__benchmark_simple_add_trace.json.gz",
)


def test_four_real_traces_in_one_folder(shared_traces: Any, tmp_path: Any) -> None:
    """Four different real traces (same GPU model, all rank 0) ingested from one folder: four
    workloads, no comparable predecessor (check exits 0 saying so), no multi-rank job."""
    from typer.testing import CliRunner

    from tracewh.api import Warehouse
    from tracewh.cli import app

    folder = tmp_path / "hf"
    folder.mkdir()
    for name in FOUR:
        (folder / name).symlink_to(shared_traces / name)
    wh = Warehouse(tmp_path / "wh")
    # links out of a scanned folder are not followed (issue 33): the files are given by name
    assert wh.ingest([folder / name for name in FOUR]).ok
    runs = wh.runs()
    assert runs["job"].n_unique() == 1 and runs["device_name"].n_unique() == 1
    assert runs["workload"].n_unique() == 4 and set(runs["workload_by"]) == {"fingerprint"}
    res = CliRunner().invoke(app, ["check", "-w", str(tmp_path / "wh")])
    assert res.exit_code == 0, res.output
    assert "too few comparable earlier runs" in res.output
    assert wh.rank_runs(str(folder)) == [wh.resolve_run("latest").run_id]
    imb = wh.ranks(str(folder))
    assert set(imb["ranks"].to_list()) == {1}
    assert changes(wh, since=None).changes.is_empty()


def test_unusable_runs_stay_out_of_the_series_and_the_baselines() -> None:
    """Three nights with duplicated events (twice the kernel time) and one capture-only trace
    in a quiet history: left out by default (and said), a change when they are kept."""
    runs, ops, steps = _nights(40, labels={"model": "m"}, seed=4)
    bad = {"n030r0": {"duplicate_events": 9}, "n031r0": {"duplicate_events": 9},
           "n032r0": {"duplicate_events": 9}, "n039r0": {"capture_only": 1}}  # fmt: skip
    for r in runs:
        if r["run_id"] in bad:
            r["anomalies_json"] = json.dumps(bad[r["run_id"]])
    for o in ops:
        if o["run_id"] in bad:
            o["dur_ns"] *= 2
    src = _source(runs, ops, steps)
    rep = changes(src, since=None, min_ms=0.0)
    assert rep.changes.is_empty(), rep.to_dicts()
    assert sorted(rep.excluded["run_id"].to_list()) == sorted(bad)
    assert set(rep.excluded["reasons"]) == {"duplicated_events", "capture"}
    kept = changes(src, since=None, min_ms=0.0, include_unusable=True)
    assert kept.excluded.is_empty()
    assert {d["run_id"] for d in kept.to_dicts()} >= {"n030r0"}
    chk = check(src, "n038r0")
    assert not chk.regressed and chk.checked[0].baseline_runs == 38 - 3
    assert sorted(chk.excluded["run_id"].to_list()) == sorted(set(bad) - {"n039r0"})
    assert check(src, "latest").insufficient[0].unusable == "capture"


def test_module_series_and_filters() -> None:
    """Top-level modules (Root/child) are series of their own; --module keeps the ops under a
    path and cuts one level below it; --kernel keeps matching kernels and no run-level metric."""
    runs, ops, steps = _nights(36, shifts={"flash_fwd": (20, 0.25)}, labels={"model": "m"}, seed=5)
    block = {"gemm_a": "Net_0/Encoder_0/Linear_0", "gemm_b": "Net_0/Encoder_0/Linear_1",
             "flash_fwd": "Net_0/Decoder_0/Attention_0", "layer_norm": "Net_0/Decoder_0/Norm_0"}  # fmt: skip
    for o in ops:
        o["module_path"] = block[o["name"]]
    src = _source(runs, ops, steps)
    rows = changes(src, since=None, min_ms=0.0).to_dicts()
    mods = {(d["key"], d["day"]) for d in rows if d["metric"] == "module"}
    night = (START + dt.timedelta(days=20)).isoformat()
    assert mods == {("Net_0/Decoder_0", night)}
    under = changes(src, since=None, min_ms=0.0, module="Net_0/Decoder_0").to_dicts()
    assert {(d["metric"], d["key"]) for d in under} >= {("module", "Net_0/Decoder_0/Attention_0"),
                                                        ("kernel", "flash_fwd")}  # fmt: skip
    assert not {d["metric"] for d in under} & {"step", "idle"}
    assert all(d["key"] != "gemm_a" for d in under)
    only = changes(src, since=None, min_ms=0.0, kernel="flash").to_dicts()
    # the matching ops' kernel, category and module series
    assert {(d["metric"], d["key"]) for d in only} == {
        ("kernel", "flash_fwd"), ("category", "other"), ("module", "Net_0/Decoder_0")}


def test_an_8pct_straggler_rank_is_flagged_in_every_step(tmp_path: Any) -> None:
    """`synth --ranks 4 --straggler 2:8%`: rank 2's compute kernels are 8% slower and the other
    ranks wait for it in NCCL, so summed GPU time is level; compute time per step is not."""
    from tracewh.api import Warehouse
    from tracewh.synth import Straggler, SynthConfig, write_traces

    write_traces(tmp_path / "tr", SynthConfig(ranks=4, steps=4, layers=1, seed=3,
                                              straggler=Straggler(2, 0.08)))  # fmt: skip
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([tmp_path / "tr"], jobs=2).ok
    st = wh.ranks(view="stragglers")
    assert st["rank"].n_unique() == 4 and st["step"].n_unique() == 4
    flagged = st.filter(pl.col("straggler"))
    assert set(flagged["rank"]) == {2} and flagged.height == 4
    ratios = st.filter(pl.col("rank") == 2)["ratio"].to_list()
    assert all(1.05 < r < 1.11 for r in ratios)


def test_a_window_from_the_first_day_is_the_whole_history(tmp_path: Any, monkeypatch: Any) -> None:
    """series_values(since=<the first run's day or earlier>) is since=None's query: in a
    session one query serves both (a report's `changes --since <window>` and `check`)."""
    from tracewh.api import Warehouse
    from tracewh.history.alerts import series_values
    from tracewh.synth import SynthConfig, write_history

    write_history(tmp_path / "t", SynthConfig(steps=2, layers=1, ranks=1, seed=11), runs=3,
                  start=dt.date(2025, 1, 1))
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([tmp_path / "t"], jobs=1).ok
    queries: list[str] = []
    with wh.session():
        real = wh.sql

        def counted(query: str, *args: Any, **kwargs: Any) -> Any:
            if "series_values(" in query:
                queries.append(query)
            return real(query, *args, **kwargs)

        monkeypatch.setattr(wh, "sql", counted)
        whole = series_values(wh, since=None)
        for first in (dt.date(2025, 1, 1), dt.date(2024, 6, 1)):
            assert series_values(wh, since=first) is whole  # the memo of since=None
        assert len(queries) == 1
        later = series_values(wh, since=dt.date(2025, 1, 2))  # a real window: its own query
        assert len(queries) == 2
    key = ["run_id", "metric", "key"]
    assert set(later["run_id"]) < set(whole["run_id"]) and later.height < whole.height
    assert whole.sort(key).equals(series_values(wh, since=dt.date(2025, 1, 1)).sort(key))
