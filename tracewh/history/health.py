"""Trace health: runs whose numbers must not enter a baseline or a change-point series.

A run is **unusable for comparison** when its trace cannot stand for a normal run of its
workload:

* ``capture``: a CUDA/HIP-graph capture trace (``runs.kind`` = ``capture``: the kernels were
  recorded, not run);
* ``far_timestamps``: timestamps out of range (``anomalies_json`` keys ending in
  ``_out_of_range`` for times: ``base_time_out_of_range``, ``end_out_of_range``, ``ts_*``,
  or ``far_timestamps``);
* ``truncated``: the profiling window was cut short (``truncated_window``/``truncated``);
* ``duplicated_events``: events written twice (``duplicate_events``/``duplicated_events``);
* ``correlation_reuse``: GPU ops linked to the wrong launch (a correlation id reused).

``gpu_outside_cpu_window`` (GPU ops far outside the CPU window) counts as far-out
timestamps. The keys that gate baselines for skewed times are
:data:`tracewh.schema.arrow.BASELINE_ANOMALIES` (``duplicate_events``, ``correlation_reuse``,
``gpu_outside_cpu_window``, counted at ingest): every one of them is in :data:`UNUSABLE`.

The anomaly keys are those the ingest records in ``runs.anomalies_json``; :data:`UNUSABLE`
maps each to its reason. Pure: a Polars frame in, a frame out.
"""

from __future__ import annotations

import json

import polars as pl

from tracewh.core.categories import BASELINE_ANOMALIES

#: The reason a baseline-gating key (:data:`~tracewh.schema.arrow.BASELINE_ANOMALIES`) is reported
#: as, where it is not the key itself.
_REASON_OF = {"duplicate_events": "duplicated_events", "gpu_outside_cpu_window": "far_timestamps"}

#: ``anomalies_json`` key -> reason the run is unusable for comparison.
UNUSABLE: dict[str, str] = {
    "base_time_out_of_range": "far_timestamps",
    "end_out_of_range": "far_timestamps",
    "ts_out_of_range": "far_timestamps",
    "far_timestamps": "far_timestamps",
    "far_out_timestamps": "far_timestamps",
    "truncated": "truncated",
    "truncated_window": "truncated",
    "duplicated_events": "duplicated_events",
    "capture_only": "capture",
    **{key: _REASON_OF.get(key, key) for key in BASELINE_ANOMALIES},
}


def _reasons(anomalies_json: str | None, kind: str | None) -> str | None:
    found: set[str] = set()
    if kind == "capture":
        found.add("capture")
    try:
        anomalies = json.loads(anomalies_json) if anomalies_json else {}
    except ValueError:
        anomalies = {}
    if isinstance(anomalies, dict):
        found |= {UNUSABLE[k] for k, n in anomalies.items() if k in UNUSABLE and n}
    return ",".join(sorted(found)) or None


def unusable_runs(runs: pl.DataFrame) -> pl.DataFrame:
    """The runs unusable for comparison and why.

    Parameters
    ----------
    runs
        Rows of ``runs`` with ``run_id`` and ``anomalies_json`` (and ``kind`` where the
        warehouse has it).

    Returns
    -------
    polars.DataFrame
        ``run_id``, ``reasons`` (comma-separated, sorted), only for unusable runs.
    """
    kinds = runs["kind"].to_list() if "kind" in runs.columns else [None] * runs.height
    reasons = [
        _reasons(a, k) for a, k in zip(runs["anomalies_json"].to_list(), kinds, strict=True)
    ]
    out = pl.DataFrame(
        {"run_id": runs["run_id"], "reasons": pl.Series(reasons, dtype=pl.String)}
    )
    return out.filter(pl.col("reasons").is_not_null())
