"""Workload identity: which runs are the same workload, comparable, ranks of one job.

**Workload.** A run with any of the label keys (default ``model``, ``branch``) is the
workload those labels name (``model=dit-xl,branch=main``; a missing key is empty). A run
without them is identified by its trace: its fingerprint is a MinHash signature of the set
of its kernels' keys and its CPU operators with their input shapes (``fingerprints``
table), and two runs whose signatures agree on at least ``threshold`` of their slots (an
estimate of the Jaccard similarity of the two sets; default 0.5) are the same workload.
Runs are taken oldest first; a run joins the workload of the most similar earlier run at or
above the threshold (so a model whose kernels drift slowly stays one workload), else starts
a new one, named ``fp:`` + the first 8 characters of its run_id. A run with neither labels
nor a fingerprint (ingested by an older tracewh; re-ingest with ``--force``) is a workload
of its own (``run:`` + run_id).

**Comparable runs** form one *series*: the same workload, device name, backend, rank and
world size (a missing value matches a missing value).

**Job instances.** The ranks of one distributed job are runs of the same ``job`` (by
default their directory) and workload with distinct ranks; taken oldest first, a rank seen
again starts a new instance (the job's next run). Unrelated traces that share a folder are
different workloads, so never ranks of one instance.

Pure functions: Polars frames in, Polars frames out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import polars as pl

from tracewh.history.options import DEFAULT_KEYS as DEFAULT_KEYS

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

#: Least share of equal MinHash slots for two runs to be one workload.
DEFAULT_THRESHOLD = 0.5

_SERIES_COLS = ("workload", "device_name", "backend", "rank", "world_size")


def label_workload(labels_json: str | None, keys: Sequence[str]) -> str | None:
    """The workload a run's labels name (``model=…,branch=…``), or None without any key."""
    try:
        labels = json.loads(labels_json) if labels_json else {}
    except ValueError:
        labels = {}
    if not isinstance(labels, dict) or not any(k in labels for k in keys):
        return None
    return ",".join(f"{k}={labels.get(k, '')}" for k in keys)


def label_workloads(runs: pl.DataFrame, keys: Sequence[str]) -> dict[str, str | None]:
    """Each run's :func:`label_workload`, by run_id (``run_id`` and ``labels_json`` columns):
    parsed once for the callers below (at 3,000 runs each parse of every run's labels took
    ~0.05 s)."""
    return {rid: label_workload(lab, keys) for rid, lab in
            zip(runs["run_id"].to_list(), runs["labels_json"].to_list(), strict=True)}


def assign_workloads(
    runs: pl.DataFrame,
    *,
    keys: Sequence[str] = DEFAULT_KEYS,
    threshold: float = DEFAULT_THRESHOLD,
    labelled: Mapping[str, str | None] | None = None,
) -> pl.DataFrame:
    """Each run's workload, series and job instance.

    Parameters
    ----------
    runs
        One row per run with ``run_id``, ``start_ns``, ``labels_json``, ``job``,
        ``device_name``, ``backend``, ``rank``, ``world_size`` and ``minhash`` (a list of
        int64, null or empty without a fingerprint).
    keys
        Label keys that name a workload.
    threshold
        Least share of equal MinHash slots of two runs of one workload.
    labelled
        :func:`label_workloads` of ``runs`` where the caller has it (else parsed here).

    Returns
    -------
    polars.DataFrame
        ``run_id``, ``workload``, ``workload_by`` (``labels`` | ``fingerprint`` | ``none``),
        ``similarity`` (to the run it joined; NULL for the first of a workload or by
        labels), ``series`` (workload, device, backend, rank and world size as one text)
        and ``instance`` (the job instance: job, workload and a counter).
    """
    if runs.is_empty():
        return pl.DataFrame(schema={"run_id": pl.String, "workload": pl.String,
                                    "workload_by": pl.String, "similarity": pl.Float64,
                                    "series": pl.String, "instance": pl.String})  # fmt: skip
    df = runs.sort(["start_ns", "rank", "run_id"], nulls_last=True)
    ids = df["run_id"].to_list()
    if labelled is None:
        labelled = label_workloads(df, keys)
    labels = [labelled[rid] for rid in ids]
    sigs = df["minhash"].to_list() if "minhash" in df.columns else [None] * len(ids)
    workload: list[str] = []
    by: list[str] = []
    sim_out: list[float | None] = []
    # each distinct signature once, with the first row that had it: a run's most similar
    # earlier run is the first row of the most similar earlier signature (the earliest row
    # of greatest similarity), and a signature seen before is that row at similarity 1;
    # nightly runs of one workload repeat their signature, so this compares distinct
    # signatures, not every pair of runs (quadratic in the runs)
    first_row: dict[tuple[int, ...], int] = {}
    width = max((len(s) for s in sigs if s), default=0)
    # numpy only once a second distinct signature is compared (listing runs without
    # one imports none of it)
    mat: NDArray[np.int64] | None = None
    n_distinct = 0
    distinct_row: list[int] = []
    for i, (rid, lab, sig) in enumerate(zip(ids, labels, sigs, strict=True)):
        if lab is not None:
            workload.append(lab)
            by.append("labels")
            sim_out.append(None)
            continue
        if not sig or len(sig) != width:
            workload.append(f"run:{rid}")
            by.append("none")
            sim_out.append(None)
            continue
        key = tuple(sig)
        best, best_sim = first_row.get(key), 1.0
        if best is None:
            best_sim = -1.0
            if n_distinct:
                import numpy as np

                if mat is None:
                    mat = np.zeros((len(ids), width), dtype=np.int64)
                    mat[:n_distinct] = np.asarray([sigs[r] for r in distinct_row], dtype=np.int64)
                mat[n_distinct] = sig
                sims = (mat[:n_distinct] == mat[n_distinct]).mean(axis=1)
                j = int(np.argmax(sims))
                best, best_sim = distinct_row[j], float(sims[j])
            first_row[key] = i
            distinct_row.append(i)
            n_distinct += 1
        if best is not None and best_sim >= threshold:
            workload.append(workload[best])
            sim_out.append(best_sim)
        else:
            workload.append(f"fp:{rid[:8]}")
            sim_out.append(None)
        by.append("fingerprint")
    out = df.select("run_id", "job", "rank", "device_name", "backend", "world_size").with_columns(
        pl.Series("workload", workload, dtype=pl.String),
        pl.Series("workload_by", by, dtype=pl.String),
        pl.Series("similarity", sim_out, dtype=pl.Float64),
    )
    series = pl.concat_str(
        [pl.col(c).cast(pl.String).fill_null("") for c in _SERIES_COLS], separator="|"
    )
    out = out.with_columns(series.alias("series"))
    return out.with_columns(pl.Series("instance", _instances(out), dtype=pl.String)).select(
        "run_id", "workload", "workload_by", "similarity", "series", "instance"
    )


def unfingerprinted(runs: pl.DataFrame, keys: Sequence[str] = DEFAULT_KEYS,
                    labelled: Mapping[str, str | None] | None = None) -> list[str]:
    """The runs whose identity needs a fingerprint they lack (ingested before fingerprints).

    Parameters
    ----------
    runs
        Rows with ``run_id``, ``labels_json`` and ``minhash`` (null without a fingerprint).
    keys
        Label keys that name a workload: a run with any of them needs no fingerprint.

    Returns
    -------
    list[str]
        Their run ids, in the order of ``runs``.
    """
    sigs = runs["minhash"].to_list() if "minhash" in runs.columns else [None] * runs.height
    if labelled is None:
        labelled = label_workloads(runs, keys)
    return [str(rid) for rid, sig in zip(runs["run_id"].to_list(), sigs, strict=True)
            if sig is None and labelled[rid] is None]


def _instances(df: pl.DataFrame) -> list[str]:
    """Job instance of each row (rows oldest first): a repeated rank starts a new one."""
    seen: dict[tuple[str, str], tuple[int, set[object]]] = {}
    out = []
    for job, wl, rank in zip(df["job"].to_list(), df["workload"].to_list(),
                             df["rank"].to_list(), strict=True):  # fmt: skip
        key = (str(job), wl)
        count, ranks = seen.get(key, (0, set()))
        if rank in ranks or (rank is None and ranks):
            count, ranks = count + 1, set()
        ranks.add(rank)
        seen[key] = (count, ranks)
        out.append(f"{job}|{wl}|{count}")
    return out
