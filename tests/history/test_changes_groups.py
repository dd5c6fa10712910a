"""Alert groups (tracewh.history.changes.group_changes): one regression seen in a kernel, in
the totals it feeds and on several ranks is one group, within a tolerance of nights; a
derived change no kernel explains needs a large effect and a corrected p-value."""

from __future__ import annotations

import polars as pl

from tracewh.history.changes import CHANGE_SCHEMA, group_changes

DAY = 86_400 * 10**9


def _change(run: str, metric: str, key: str, *, pct: float = 10.0, noise: float = 1.0,
            p: float = 1e-6) -> dict[str, object]:  # fmt: skip
    row: dict[str, object] = dict.fromkeys(CHANGE_SCHEMA)
    row.update(series="s", metric=metric, key=key, name=key, run_id=run, index=5, runs=20,
               runs_after=10, before=100.0, after=100.0 + pct, delta=pct, change_pct=pct,
               p_value=p, noise_pct=noise, provisional=False, prev_run_id="x")  # fmt: skip
    return row


def _runs(spec: dict[str, tuple[str, int]]) -> pl.DataFrame:
    """run_id -> (workload, night)."""
    return pl.DataFrame(
        [{"run_id": r, "workload": w, "start_ns": n * DAY} for r, (w, n) in spec.items()])


def _groups(out: pl.DataFrame) -> dict[int, list[tuple[str, str]]]:
    return {g: sorted(zip(out.filter(pl.col("group") == g)["metric"].to_list(),
                          out.filter(pl.col("group") == g)["run_id"].to_list(), strict=True))
            for g in out["group"].unique().to_list()}  # fmt: skip


def test_kernel_totals_and_ranks_within_the_tolerance_are_one_group() -> None:
    runs = _runs({"a0": ("A", 10), "a1": ("A", 10), "b1": ("A", 11), "c0": ("A", 8),
                  "z0": ("B", 10), "far": ("A", 30)})  # fmt: skip
    changes = pl.DataFrame([
        _change("a0", "kernel", "gemm"), _change("a1", "kernel", "gemm"),  # rank 0 and 1
        _change("b1", "category", "gemm", pct=2.0),  # a night later, diluted: attached
        _change("c0", "step", "step_ns", pct=1.0),  # two nights earlier: attached
        _change("z0", "kernel", "gemm"),  # another workload: its own group
        _change("far", "kernel", "flash"),  # 20 nights later: its own group
    ], schema=CHANGE_SCHEMA, orient="row")  # fmt: skip
    out = group_changes(changes, runs)
    assert out.height == 6
    groups = _groups(out)
    assert groups[1] == [("kernel", "far")]  # the most recent first
    assert sorted(groups.values()) == sorted([
        [("category", "b1"), ("kernel", "a0"), ("kernel", "a1"), ("step", "c0")],
        [("kernel", "z0")], [("kernel", "far")]])  # fmt: skip
    # in a group the step change leads, then category, then kernels
    g = out.filter(pl.col("run_id") == "a0")["group"][0]
    assert out.filter(pl.col("group") == g)["metric"].to_list() == [
        "step", "category", "kernel", "kernel"]
    assert out.filter(pl.col("group") == g)["group_size"].to_list() == [4] * 4


def test_a_derived_change_no_kernel_explains_needs_a_large_certain_effect() -> None:
    runs = _runs({"k": ("A", 10), "s": ("A", 40), "t": ("A", 60), "u": ("A", 80)})
    changes = pl.DataFrame([
        _change("k", "kernel", "gemm"),
        _change("s", "step", "step_ns", pct=1.5, noise=1.0, p=1e-70),  # 1.5x noise: dropped
        _change("t", "idle", "gpu_idle_fraction", pct=-6.0, noise=1.0, p=1e-9),  # kept
        _change("u", "category", "norm", pct=8.0, noise=1.0, p=0.004),  # fails 0.01 / 4
    ], schema=CHANGE_SCHEMA, orient="row")  # fmt: skip
    out = group_changes(changes, runs, alpha=0.01, derived_tests={"A": 4})
    assert sorted(out["run_id"].to_list()) == ["k", "t"]
    assert out.filter(pl.col("run_id") == "t")["group"].to_list() == [1]
    # with one derived series tested, p = 0.004 passes
    out = group_changes(changes, runs, alpha=0.01, derived_tests={"A": 1})
    assert sorted(out["run_id"].to_list()) == ["k", "t", "u"]


def test_two_regressions_of_one_workload_farther_apart_stay_two() -> None:
    runs = _runs({"a": ("A", 10), "b": ("A", 14), "s": ("A", 12)})
    changes = pl.DataFrame([_change("a", "kernel", "gemm"), _change("b", "kernel", "flash"),
                            _change("s", "step", "step_ns", pct=1.0)],
                           schema=CHANGE_SCHEMA, orient="row")  # fmt: skip
    out = group_changes(changes, runs)
    assert out["group"].n_unique() == 2
    # the step change two nights from each joins one of them, not a third group
    assert out.height == 3
    assert group_changes(changes, runs, tolerance_ns=5 * DAY)["group"].n_unique() == 1
