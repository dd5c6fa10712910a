"""The runs of a question with their workload identity and health (:func:`run_set`).

What ``changes``, ``check``, ``runs`` and the job instances start from: every visible run
(a :class:`~tracewh.query.runsel.Source`'s ``runs`` table), its workload, series and job
instance (:mod:`tracewh.history.workload`) and why it is unusable as a baseline
(:mod:`tracewh.history.health`). Kept apart from :mod:`tracewh.history.alerts` so that a
command that only lists runs imports neither the change-point code nor numpy for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import polars as pl

from tracewh.history.health import unusable_runs
from tracewh.history.workload import (
    DEFAULT_KEYS,
    DEFAULT_THRESHOLD,
    assign_workloads,
    label_workloads,
    unfingerprinted,
)
from tracewh.query.runsel import Source

__all__ = ["RunSet", "memoized", "run_set"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class RunSet:
    """The runs of a question: each with its workload, series, instance and health."""

    runs: pl.DataFrame  # runs columns + workload, workload_by, similarity, series, instance
    excluded: pl.DataFrame  # run_id, reasons: unusable runs left out
    fingerprinted: int = 0  # runs whose fingerprint was computed from their tables here


def run_set(
    src: Source,
    *,
    keys: Sequence[str] = DEFAULT_KEYS,
    threshold: float = DEFAULT_THRESHOLD,
    include_unusable: bool = False,
) -> RunSet:
    """Every visible run with its workload identity; unusable runs apart (unless included).

    A run ingested before the ``fingerprints`` table whose labels do not name its workload
    gets its fingerprint computed from its stored tables (``run_fingerprints_in``, the
    ingest's definition), so old warehouses compare as new ones do; ``tracewh compact``
    stores these (``RunSet.fingerprinted`` counts the runs computed here). Inside a
    ``Warehouse.session()`` it is computed once per argument set (see ``memoized``).
    """
    return memoized(src, ("run_set", tuple(keys), threshold, include_unusable),
                     lambda: _run_set(src, keys=keys, threshold=threshold,
                                      include_unusable=include_unusable))  # fmt: skip


def memoized(src: Source, key: tuple[Any, ...], compute: Callable[[], _T]) -> _T:
    """``compute()``, once per ``key`` inside a session where ``src`` has ``memoized``."""
    memo = getattr(src, "memoized", None)
    return compute() if memo is None else cast("_T", memo(key, compute))


def _run_set(
    src: Source, *, keys: Sequence[str], threshold: float, include_unusable: bool
) -> RunSet:
    # fingerprints only where labels do not name the workload: a labelled fleet's runs
    # never open the fingerprints table (one small file per run)
    table = src.run_table(minhash_days=set())
    labelled = label_workloads(table, keys)  # each run's labels parsed once
    need = {d for d, rid in zip(table["day"].to_list(), table["run_id"].to_list(),
                                strict=True) if labelled[rid] is None}  # fmt: skip
    if need:  # a run without a day: every partition
        table = src.run_table(minhash_days=None if None in need else need)
    table, computed = _with_fingerprints(src, table, keys, labelled)
    wl = assign_workloads(table, keys=keys, threshold=threshold, labelled=labelled)
    runs = table.drop("minhash", strict=False).join(wl, on="run_id", how="left")
    bad = unusable_runs(runs)
    if not include_unusable and not bad.is_empty():
        runs = runs.join(bad.select("run_id"), on="run_id", how="anti")
    return RunSet(runs.sort(["start_ns", "rank", "run_id"], nulls_last=True), bad, computed)


def _with_fingerprints(
    src: Source, table: pl.DataFrame, keys: Sequence[str], labelled: Mapping[str, str | None]
) -> tuple[pl.DataFrame, int]:
    """``table`` with the missing ``minhash`` of runs that need one computed from their tables
    (``labelled``: each run's label workload, :func:`label_workloads`)."""
    ids = unfingerprinted(table, keys, labelled)
    if not ids:
        return table, 0
    days = set(table.filter(pl.col("run_id").is_in(ids))["day"].to_list())
    found = src.sql("SELECT run_id, minhash AS computed FROM run_fingerprints_in($ids)",
                    {"ids": ids}, days=days)  # fmt: skip
    if "minhash" not in table.columns:
        table = table.with_columns(pl.lit(None, dtype=pl.List(pl.Int64)).alias("minhash"))
    out = table.join(found, on="run_id", how="left", maintain_order="left").with_columns(
        pl.coalesce(pl.col("minhash"), pl.col("computed").cast(pl.List(pl.Int64))).alias("minhash")
    )
    return out.drop("computed"), found.height


