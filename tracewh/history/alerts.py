"""Change points over the whole history of every comparable series (`tracewh changes`).

Composes the layers: the runs and their fingerprints (a :class:`~tracewh.query.runsel.Source`),
workload identity (:mod:`tracewh.history.workload`), trace health
(:mod:`tracewh.history.health`), the per-run values of every series (``series_values`` of
``sql/93_changes.sql``), change-point detection and alert groups
(:mod:`tracewh.history.changes`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import polars as pl

from tracewh.core.errors import UsageError
from tracewh.history.changepoint import DEFAULT_ALPHA
from tracewh.history.changes import (
    CHANGE_SCHEMA,
    DERIVED,
    DetectOptions,
    find_changes,
    group_changes,
    metric_unit,
)
from tracewh.history.options import ChangesOptions
from tracewh.history.runseries import unstored_days
from tracewh.history.runset import RunSet, memoized, run_set
from tracewh.history.series import parse_since
from tracewh.history.workload import DEFAULT_KEYS, DEFAULT_THRESHOLD
from tracewh.query.runsel import Catalog, Source, where_frame

__all__ = ["DEFAULT_ALPHA", "DEFAULT_KEYS", "ChangesReport", "RunSet", "changes", "run_set",
           "series_values"]

def series_values(
    src: Source, *, since: dt.date | None, kernel: str | None = None,
    category: str | None = None, module: str | None = None,
) -> pl.DataFrame:
    """``series_values`` (sql/93_changes.sql) of the runs of day >= ``since`` (None: all).

    The one query ``changes`` and ``check`` both run: inside a session, run once for both.
    Without a filter, the runs' stored ``run_series`` rows are read and only the day
    partitions of runs without them are opened (:func:`~tracewh.history.runseries.unstored_days`); with one, every
    run's tables of day >= ``since``.
    """
    if since is not None and since <= memoized(src, ("first_day",), lambda: _first_day(src)):
        # a window from the first run's day on is the whole history: one query (and one
        # memo key) for `changes --since <first day>` and `check`'s since=None
        since = None

    def compute() -> pl.DataFrame:
        plain = kernel is None and category is None and module is None
        return src.sql(
            "SELECT * FROM series_values(since := $s, kernel_pattern := $k, category_name := $c,"
            " module_prefix := $m)",
            {"s": since, "k": kernel, "c": category, "m": module}, since=since,
            days=unstored_days(src, since=since) if plain else None,
        )

    return memoized(src, ("series_values", since, kernel, category, module), compute)


def _first_day(src: Source) -> dt.date:
    """The earliest ``day`` of the visible runs; ``date.min`` when a run has none (a window
    then never stands for the whole history: ``day >= since`` leaves such a run out)."""
    row = src.sql("SELECT min(day) AS first, count(*) FILTER (WHERE day IS NULL) AS undated"
                  " FROM runs", days=set()).row(0)
    first, undated = row
    return dt.date.min if undated or first is None else cast("dt.date", first)


def commit_label(labels_json: str | None) -> str | None:
    """The ``commit`` label of a run (``git_commit``/``sha`` too), if any."""
    try:
        labels = json.loads(labels_json) if labels_json else {}
    except ValueError:
        return None
    if not isinstance(labels, dict):
        return None
    for k in ("commit", "git_commit", "sha", "revision"):
        if labels.get(k):
            return str(labels[k])
    return None


@dataclass(frozen=True)
class ChangesReport:
    """Outcome of :meth:`tracewh.api.Warehouse.changes`.

    Attributes
    ----------
    changes
        One row per change (see :meth:`to_dicts` for the JSON objects).
    series
        How many series were analysed.
    runs
        How many runs they span.
    excluded
        Unusable runs left out (``run_id``, ``day``, ``reasons``).
    params
        The settings used.
    fingerprinted
        Runs ingested before fingerprints whose fingerprint was computed from their tables
        for this question (``tracewh compact`` stores them).
    outside_window
        Runs (of those ``where`` selects) before the ``since`` window, left out.
    """

    changes: pl.DataFrame = field(repr=False)
    series: int
    runs: int
    excluded: pl.DataFrame = field(repr=False)
    params: Mapping[str, Any]
    fingerprinted: int = 0
    outside_window: int = 0

    def window_note(self) -> str | None:
        """What the ``since`` window left out and how to include it (None: nothing)."""
        if not self.outside_window:
            return None
        latest = self.params.get("latest_day")
        rel = f", counted back from the latest run ({latest})" if latest else ""
        return (f"left out: {self.outside_window} run(s) before {self.params.get('since')} "
                f"(the --since window{rel}); --since all includes them")

    def to_dicts(self) -> list[dict[str, Any]]:
        """One JSON-ready object per change: times in ms per step (fractions for idle, bytes
        for memory)."""
        out = []
        for r in self.changes.iter_rows(named=True):
            unit = metric_unit(r["metric"])
            scale = 1e6 if unit == "ns/step" else 1.0
            out.append({
                "metric": r["metric"], "key": r["key"], "name": r["name"],
                "short_name": r["short_name"], "category": r["category"],
                "run_id": r["run_id"], "day": r["day"].isoformat() if r["day"] else None,
                "commit": r["commit"], "prev_run_id": r["prev_run_id"],
                "before": r["before"] / scale, "after": r["after"] / scale,
                "unit": "ms/step" if unit == "ns/step" else unit,
                "change_pct": r["change_pct"], "p_value": r["p_value"],
                "noise_pct": r["noise_pct"], "provisional": r["provisional"],
                "runs_before": r["index"], "runs_after": r["runs_after"],
                "group": r["group"], "group_size": r["group_size"], "group_rank": r["group_rank"],
                "workload": r["workload"], "rank": r["rank"], "job": r["job"],
                "device_name": r["device_name"],
            })  # fmt: skip
        return out


def changes(
    src: Source,
    *,
    since: str | dt.date | None = ChangesOptions.since,
    kernel: str | None = None,
    category: str | None = None,
    module: str | None = None,
    op: str | None = None,
    where: Mapping[str, str] | None = None,
    alpha: float = ChangesOptions.alpha,
    min_change: float = ChangesOptions.min_change,
    min_ms: float = ChangesOptions.min_ms,
    floor_ms: float = ChangesOptions.floor_ms,
    keys: Sequence[str] = ChangesOptions.keys,
    threshold: float = DEFAULT_THRESHOLD,
    include_unusable: bool = ChangesOptions.include_unusable,
    critical_path: bool = ChangesOptions.critical_path,
    today: dt.date | None = None,
) -> ChangesReport:
    """Change points over the whole history of every comparable series.

    Each series is one metric (step time, GPU idle fraction, each category, each kernel
    key and top-level module, per step) over the comparable runs of one workload,
    device, backend, rank and world size, oldest first. Change points come from
    E-divisive means with a t-test corrected for the search, the runs' own step spread
    as the noise floor (:mod:`tracewh.history.changepoint`); changes starting at the
    same job instance form one alert group. Runs unusable for comparison
    (:mod:`tracewh.history.health`) are left out unless ``include_unusable``.

    Parameters
    ----------
    since
        ``90d``, ``12w`` or a date (None: all history).
    kernel, category, module
        Analyse only the ops matching a kernel pattern, of a category, or under a
        module path (at most one).
    op
        Analyse instead the achieved TFLOP/s of the CPU operators matching this
        pattern (one series per operator, Input Dims, dtype and params; roofline
        model, higher is better; ``op_series_values``). Not analysed without it: it
        costs the roofline of every run.
    critical_path
        Analyse instead the critical path's shares by bound (one series per bound: its
        share of the path of each run's first steps; :mod:`tracewh.history.cpseries`).
        Not analysed without it: it costs the critical paths of every run.
    where
        Labels or run fields the runs must have.
    alpha
        Significance of a change (family-wise per split; None: the default, 1%).
    min_change
        Smallest relative change reported (0.02 = 2%).
    min_ms
        Time series whose values stay under this many ms per step are not analysed.
    floor_ms
        Smallest absolute change reported, ms per step.
    keys
        Labels that name a workload (None: ``alerts.DEFAULT_KEYS``).

    Examples
    --------
    >>> changes(Warehouse("wh"), since="90d", category="gemm").to_dicts()  # doctest: +SKIP
    """
    if sum(x is not None for x in (kernel, category, module, op)) + critical_path > 1:
        raise UsageError("give one of --kernel, --category, --module, --op, --critical-path")
    if not 0 < alpha < 1:
        raise UsageError("alpha must be between 0 and 1")
    if min_change < 0 or min_ms < 0 or floor_ms < 0:
        raise UsageError("--min-change, --min-ms and the floor must be >= 0")
    rs = run_set(src, keys=keys, threshold=threshold, include_unusable=True)
    # a relative window (90d) ends at the latest run in the warehouse, not today: a
    # warehouse of older runs is analysed, not reported as empty
    latest = rs.runs["day"].max() if rs.runs.height else None
    ref_day = today or (latest if isinstance(latest, dt.date) else None)
    first = parse_since(since, today=ref_day) if since is not None else None
    runs = where_frame(rs.runs, where or {})
    outside = 0
    if first is not None:
        outside = runs.filter(pl.col("day") < first).height
        runs = runs.filter(pl.col("day") >= first)
    excl = runs.join(rs.excluded, on="run_id", how="inner")
    if include_unusable:
        excl = excl.clear()
    else:
        runs = runs.join(rs.excluded.select("run_id"), on="run_id", how="anti")
    params: dict[str, Any] = {
        "since": first.isoformat() if first else None, "kernel": kernel, "category": category,
        "module": module, "op": op, "where": dict(where or {}), "alpha": alpha, "min_change": min_change,
        "min_ms": min_ms, "floor_ms": floor_ms, "keys": list(keys), "threshold": threshold,
        "include_unusable": include_unusable, "critical_path": critical_path,
        "latest_day": ref_day.isoformat() if ref_day and since is not None else None,
    }  # fmt: skip
    if runs.is_empty():
        return ChangesReport(_decorate(_empty_changes(), runs), 0, 0,
                             excl.select("run_id", "day", "reasons"), params,
                             rs.fingerprinted, outside)  # fmt: skip
    if op is not None:  # the operators' TFLOP/s (sql/94_op_series.sql), only when asked
        values = src.sql(
            "SELECT * FROM op_series_values($runs, op_pattern := $op, min_ms := $min_ms)",
            {"runs": runs["run_id"].to_list(), "op": op, "min_ms": min_ms}, since=first,
        )
    elif critical_path:  # the path's shares by bound (history/cpseries.py), only when asked
        from tracewh.history.cpseries import critical_path_values

        values = critical_path_values(cast(Catalog, src), runs["run_id"].to_list())
    else:
        values = series_values(src, since=first, kernel=kernel, category=category, module=module)
    opts = DetectOptions(alpha=alpha, min_change=min_change, min_value=min_ms * 1e6,
                         floor=floor_ms * 1e6)  # fmt: skip
    found = find_changes(runs, values, options=opts)
    tested = (
        values.filter(pl.col("metric").is_in(list(DERIVED)))
        .join(runs.select("run_id", "series", "workload"), on="run_id")
        .group_by("workload").agg(pl.struct("series", "metric", "key").n_unique().alias("n"))
    )  # fmt: skip
    grouped = group_changes(found, runs, alpha=alpha, derived_tests={
        str(w): int(n) for w, n in tested.iter_rows()})  # fmt: skip
    n_series = values.join(runs.select("run_id", "series"), on="run_id").select(
        "series", "metric", "key").n_unique()  # fmt: skip
    return ChangesReport(_decorate(grouped, runs), n_series, runs.height,
                         excl.select("run_id", "day", "reasons"), params,
                         rs.fingerprinted, outside)  # fmt: skip


def _empty_changes() -> pl.DataFrame:
    return pl.DataFrame(schema={**CHANGE_SCHEMA, "group": pl.Int64, "group_size": pl.Int64,
                                "group_rank": pl.Int64})  # fmt: skip


def _decorate(changes_: pl.DataFrame, runs: pl.DataFrame) -> pl.DataFrame:
    """Add the first run's day, start, commit label, rank, job, workload, device."""
    info = runs.select("run_id", "day", "start_ns", "labels_json", "rank", "job", "workload",
                       "device_name")  # fmt: skip
    out = changes_.join(info, on="run_id", how="left")
    commits = [commit_label(x) for x in out["labels_json"].to_list()]
    return out.with_columns(pl.Series("commit", commits, dtype=pl.String)).drop("labels_json")
