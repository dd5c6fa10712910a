"""Job instances: the ranks of one distributed job, and each run's workload and usability.

A job instance is the runs of one ``job`` and workload with distinct ranks
(:mod:`tracewh.history.workload`), so unrelated traces that share a folder are never
compared as ranks; a run is unusable as a baseline for the reasons of
:mod:`tracewh.history.health`.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from tracewh.core.errors import UsageError
from tracewh.history.runset import run_set
from tracewh.query.runsel import RunRef, Source

__all__ = ["distinct_ranks", "instance_runs", "with_workload"]


def with_workload(src: Source, runs: pl.DataFrame) -> pl.DataFrame:
    """``runs`` rows with ``workload``, ``workload_by`` and ``unusable`` (NULL when usable).

    ``workload``: the labels that name the run's workload, or ``fp:...`` from its trace's
    fingerprint; ``workload_by``: ``labels`` | ``fingerprint`` | ``none``; ``unusable``: why
    the run stays out of baselines.
    """
    rs = run_set(src, include_unusable=True)
    extra = rs.runs.select("run_id", "workload", "workload_by").join(
        rs.excluded.rename({"reasons": "unusable"}), on="run_id", how="left"
    )
    return runs.join(extra, on="run_id", how="left", maintain_order="left")


def instance_runs(src: Source, ref: RunRef) -> list[str]:
    """The run ids of the job instance of run ``ref``, lowest rank first."""
    rs = run_set(src, include_unusable=True).runs
    inst = rs.filter(pl.col("run_id") == ref.run_id)["instance"].to_list()
    return (
        rs.filter(pl.col("instance").is_in(inst)).sort("rank", nulls_last=True)["run_id"]
        .to_list()
    )  # fmt: skip


def distinct_ranks(refs: Sequence[RunRef]) -> list[str]:
    """The run ids of ``refs``, lowest rank first; they must be distinct ranks of one job."""
    ranks = [r.rank for r in refs if r.rank is not None]
    if len(set(ranks)) < len(ranks) or len({r.run_id for r in refs}) < len(refs):
        raise UsageError("the runs given must be distinct ranks of one job")
    return [r.run_id for r in sorted(refs, key=lambda r: (r.rank is None, r.rank or 0))]
