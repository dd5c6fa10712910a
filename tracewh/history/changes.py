"""Change points of every series of a warehouse, and their alert groups.

A *series* is one metric and key (the step time, the GPU idle fraction, a category, a
kernel key, a module) over the comparable runs of one workload, device, backend, rank and
world size (:mod:`tracewh.history.workload`), oldest first. A kernel, category or module
that did not run in a run of its series counts 0 there. Each series is handed to
:func:`tracewh.history.changepoint.detect` with each run's within-run variance (its step
spread squared over its step count) as the noise floor.

Reported: a change point whose relative change is at least ``min_change`` and whose
absolute change is at least ``floor`` (in the series' unit); time series whose largest
value stays under ``min_value`` are not analysed.

**Alert groups.** One cause (a framework upgrade that slows five GEMMs on every rank) is
one alert, wherever each series happened to place it. *Primary* changes (kernels, modules,
memory, operators) of one workload whose first runs lie within ``tolerance_ns`` (3 days by
default) of each other, on any rank, form one group (single linkage in time). A change of
a *derived* series (step time, GPU idle fraction, a category: totals that sum up the
kernels) joins the group of its workload whose primaries lie nearest, if within the
tolerance: it is the same regression seen diluted. A derived change that no primary
explains is kept only if it is large and certain on its own: at least
``derived_min_effect`` times the noise of its series (the step-to-step and night-to-night
noise the test used) and significant after a Bonferroni correction over the derived series
tested in its workload (``p_value <= alpha / n``); kept, such changes group among
themselves by the same rule. With thousands of runs a diluted change becomes
"significant" (p down to 1e-70) at a fraction of its series' noise, its location drifting
by nights from rank to rank; the effect-size rule is what keeps it from being an alert of
its own. Groups are numbered from the most recent (a group's time: its earliest primary
change, else its earliest change); within a group, changes are ordered by their absolute
change per step, largest first (step and idle metrics, which sum up the others, lead).

Pure: Polars frames in, Polars frames out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl
from numpy.typing import NDArray

from tracewh.history.changepoint import DEFAULT_ALPHA, detect

#: Metrics whose value is a time per step in ns (the others: a fraction, or bytes).
TIME_METRICS = frozenset({"step", "category", "kernel", "module"})
#: Metrics whose value is in bytes: the peak allocated memory per step (sql/65_memory.sql).
BYTE_METRICS = frozenset({"memory"})
#: Smallest change of a byte metric reported or checked: below a MiB a peak moves by
#: allocator rounding (the caching allocator hands out 2 MiB segments), not by a change.
MEMORY_FLOOR_BYTES = 1 << 20
#: Smallest change of a critical-path share reported or checked (0..1: 2 percentage points,
#: the agreement of two critical-path implementations on one trace; tracewh.history.cpseries).
SHARE_FLOOR = 0.02
#: Metrics that count 0 in a run of the series where they have no value.
ZERO_FILLED = frozenset({"category", "kernel", "module"})
#: Metrics where higher is better (a throughput: achieved TFLOP/s of an operator,
#: sql/94_op_series.sql): for them a drop is the regression.
HIGHER_IS_BETTER = frozenset({"op_tflops"})
#: Metrics that sum up others (a kernel's change shows in them, diluted): grouped with the
#: primary change they accompany, alone only when large and certain (see the docstring).
DERIVED = frozenset({"step", "idle", "category"})
#: Changes of one workload this close in time are one alert (ns: 3 days).
DEFAULT_TOLERANCE_NS = 3 * 86_400 * 10**9
#: A derived change no primary explains must be at least this many noise deviations.
DEFAULT_DERIVED_MIN_EFFECT = 3.0
_METRIC_ORDER = {"step": 0, "idle": 1, "category": 2, "module": 3, "kernel": 4, "memory": 5,
                 "op_tflops": 6, "critical_path": 7}  # fmt: skip


def metric_unit(metric: str) -> str:
    """The unit of a metric's values: ``ns/step``, ``fraction`` (idle), ``bytes`` (memory)
    or ``TFLOP/s`` (op_tflops)."""
    if metric in BYTE_METRICS:
        return "bytes"
    if metric in HIGHER_IS_BETTER:
        return "TFLOP/s"
    return "ns/step" if metric in TIME_METRICS else "fraction"


@dataclass(frozen=True)
class DetectOptions:
    """Settings of :func:`find_changes` (see the module docstring)."""

    alpha: float = DEFAULT_ALPHA
    min_change: float = 0.0
    min_value: float = 0.0
    floor: float = 0.0
    min_size: int = 3
    tail_size: int = 1


CHANGE_SCHEMA: dict[str, pl.DataType] = {
    "series": pl.String(), "metric": pl.String(), "key": pl.String(), "name": pl.String(),
    "short_name": pl.String(), "category": pl.String(), "run_id": pl.String(),
    "index": pl.Int64(), "runs": pl.Int64(), "runs_after": pl.Int64(), "before": pl.Float64(),
    "after": pl.Float64(), "delta": pl.Float64(), "change_pct": pl.Float64(),
    "p_value": pl.Float64(), "noise_pct": pl.Float64(), "provisional": pl.Boolean(),
    "prev_run_id": pl.String(),
}  # fmt: skip


def find_changes(
    runs: pl.DataFrame, values: pl.DataFrame, *, options: DetectOptions | None = None
) -> pl.DataFrame:
    """Change points of every (series, metric, key).

    Parameters
    ----------
    runs
        The runs analysed: ``run_id``, ``series``, ``start_ns`` (one row each).
    values
        ``series_values`` rows: ``run_id``, ``metric``, ``key``, ``name``, ``short_name``,
        ``category``, ``value``, ``step_sd``, ``n_steps``.
    options
        Detection settings.

    Returns
    -------
    polars.DataFrame
        One row per change (:data:`CHANGE_SCHEMA`): ``run_id`` is the first run after the
        change, ``prev_run_id`` the last run before it, ``index`` its position in a series
        of ``runs`` runs, ``before``/``after`` the means of the segments either side,
        ``delta`` their difference, ``change_pct`` ``100 * (after / before - 1)`` (NULL for
        a zero ``before``), ``noise_pct`` the relative noise the test used.
    """
    opt = options or DetectOptions()
    order = runs.select("run_id", "series", "start_ns").sort(["series", "start_ns", "run_id"])
    order = order.with_columns(pl.int_range(pl.len()).over("series").alias("_pos"))
    # each column read once for all groups; a group is the positions of its rows in them, in
    # run order (no per-group frame, no sorted copy of the values: 870,000 rows at 30,000 runs)
    sd, steps = pl.col("step_sd").cast(pl.Float64), pl.col("n_steps").cast(pl.Float64)
    v = values.join(order.select("run_id", "series", "_pos"), on="run_id", how="inner").select(
        "series", "metric", "key", "_pos", pl.col("value").cast(pl.Float64),
        # the value's within-run variance where the run's steps say it, else 0
        pl.when(sd.is_not_null() & steps.is_not_null() & (steps != 0))
        .then(sd * sd / steps).otherwise(0.0).alias("_wvar"),
        "name", "short_name", "category",
    )
    rows: list[dict[str, object]] = []
    run_lists = {
        s: ids for s, ids in order.group_by("series", maintain_order=True)
        .agg(pl.col("run_id")).iter_rows()
    }  # fmt: skip
    cols = _Columns(
        pos=v["_pos"].to_numpy(), value=v["value"].to_numpy(), wvar=v["_wvar"].to_numpy(),
        name=v["name"], short=v["short_name"], category=v["category"],
        named=v["name"].is_not_null().to_numpy(),
    )
    groups = (v.select("series", "metric", "key", "_pos").with_row_index("_i")
              .group_by(["series", "metric", "key"])
              .agg(pl.col("_i").sort_by("_pos")))
    for series, metric, key, at in groups.iter_rows():
        ids: list[str] = run_lists[str(series)]
        rows.extend(_one(str(series), str(metric), str(key), ids, cols, np.asarray(at), opt))
    out = pl.DataFrame(rows, schema=CHANGE_SCHEMA, orient="row")
    return out.sort(["series", "metric", "key", "index"])


@dataclass(frozen=True)
class _Columns:
    """The ``series_values`` columns :func:`_one` reads, of every group (sliced per group)."""

    pos: NDArray[np.int64]  # each row's run's position in its series
    value: NDArray[np.float64]  # NaN: NULL
    wvar: NDArray[np.float64]  # the value's within-run variance (step_sd^2 / n_steps), else 0
    name: pl.Series  # read only where a change is found (a Python list of every row's
    short: pl.Series  # names would hold millions of strings at 30,000 runs)
    category: pl.Series
    named: NDArray[np.bool_]  # each row's name is not NULL


def _one(
    series: str, metric: str, key: str, ids: list[str], cols: _Columns, rows: NDArray[np.int64],
    opt: DetectOptions,
) -> list[dict[str, object]]:
    n = len(ids)
    filled = metric in ZERO_FILLED
    vals = np.zeros(n) if filled else np.full(n, np.nan)
    wvar = np.zeros(n)
    # each row at its run's position in the series, columns at once (a series of thousands
    # of runs: no Python loop over its rows); NULL values are NaN
    at = cols.pos[rows]
    vals[at] = cols.value[rows]
    wvar[at] = cols.wvar[rows]
    keep = np.isfinite(vals)
    if keep.sum() < 2:
        return []
    idx = np.flatnonzero(keep)
    x = vals[idx]
    if metric in TIME_METRICS and float(np.max(x)) < opt.min_value:
        return []
    found = detect(x, within_var=wvar[idx], alpha=opt.alpha, min_size=opt.min_size,
                   tail_size=opt.tail_size, min_change=opt.min_change)  # fmt: skip
    out: list[dict[str, object]] = []
    for c in found:
        delta = c.after - c.before
        if metric in TIME_METRICS and abs(delta) < opt.floor:
            continue
        if metric in BYTE_METRICS and abs(delta) < MEMORY_FLOOR_BYTES:
            continue
        if metric == "critical_path" and abs(delta) < SHARE_FLOOR:
            continue
        first = int(idx[c.index])
        name, short, cat = _newest_name(cols, rows, keep, key)
        out.append({
            "series": series, "metric": metric, "key": key, "name": name, "short_name": short,
            "category": cat, "run_id": ids[first], "index": c.index, "runs": len(x),
            "runs_after": c.runs_after, "before": c.before, "after": c.after, "delta": delta,
            "change_pct": 100.0 * (c.after / c.before - 1.0) if c.before else None,
            "p_value": c.p_value,
            "noise_pct": 100.0 * (math.expm1(c.noise) if c.relative else
                                  (c.noise / abs(c.before) if c.before else math.nan)),
            "provisional": c.provisional, "prev_run_id": ids[int(idx[c.index - 1])],
        })  # fmt: skip
    return out


def _newest_name(
    cols: _Columns, rows: NDArray[np.int64], keep: NDArray[np.bool_], key: str
) -> tuple[str | None, str | None, str | None]:
    """The name, short name and category the key had in the newest run of the series that
    has a value and a name (``(key, None, None)`` without one); ``rows`` are in run order."""
    named = cols.named[rows] & keep[cols.pos[rows]]
    hits = np.flatnonzero(named)
    if not hits.size:
        return key, None, None
    i = int(rows[hits[-1]])
    return cols.name[i], cols.short[i], cols.category[i]


def group_changes(
    changes: pl.DataFrame,
    runs: pl.DataFrame,
    *,
    tolerance_ns: int = DEFAULT_TOLERANCE_NS,
    derived_min_effect: float = DEFAULT_DERIVED_MIN_EFFECT,
    alpha: float = DEFAULT_ALPHA,
    derived_tests: dict[str, int] | None = None,
) -> pl.DataFrame:
    """Number the alert groups of ``changes`` (see the module docstring).

    Parameters
    ----------
    changes
        :func:`find_changes` rows.
    runs
        ``run_id``, ``workload``, ``start_ns`` of the runs.
    tolerance_ns
        Changes of one workload at most this far apart (first runs' starts) are one group.
    derived_min_effect
        Least ``|change| / noise`` of a derived change no primary change explains.
    alpha
        Significance before the correction over the derived series.
    derived_tests
        Derived series analysed per workload (the Bonferroni ``n``; absent: 1).

    Returns
    -------
    polars.DataFrame
        ``changes`` (less the unexplained derived changes below the bar) with ``group``
        (1 = the most recent group), ``group_size`` and ``group_rank`` (1 = the largest
        contributor), in group then rank order.
    """
    if changes.is_empty():
        return changes.with_columns(
            pl.lit(None, pl.Int64).alias("group"), pl.lit(None, pl.Int64).alias("group_size"),
            pl.lit(None, pl.Int64).alias("group_rank"),
        )  # fmt: skip
    c = changes.join(runs.select("run_id", "workload", "start_ns"), on="run_id", how="left")
    c = c.with_row_index("_i").with_columns(pl.col("workload").fill_null(""))
    gid = _assign_groups(c, tolerance_ns, derived_min_effect, alpha, derived_tests or {})
    c = c.with_columns(pl.Series("_g", [gid.get(i) for i in c["_i"].to_list()], dtype=pl.Int64))
    c = c.filter(pl.col("_g").is_not_null())
    if c.is_empty():
        return group_changes(changes.clear(), runs)
    starts = c.group_by("_g").agg(
        pl.col("start_ns").filter(~pl.col("metric").is_in(list(DERIVED))).min().alias("_p"),
        pl.col("start_ns").min().alias("_a"),
    ).with_columns(pl.coalesce("_p", "_a").alias("g_start"))
    firsts = (
        starts.sort(["g_start", "_g"], descending=[True, False])
        .with_row_index("group", offset=1)
        .with_columns(pl.col("group").cast(pl.Int64))
    )
    c = c.join(firsts.select("_g", "group"), on="_g", how="left")
    c = c.with_columns(
        pl.col("metric").replace_strict(_METRIC_ORDER, default=9).alias("_m"),
        pl.when(pl.col("metric") == "idle").then(None).otherwise(pl.col("delta").abs())
        .alias("_impact"),
    )
    c = c.sort(["group", "_m", "_impact", "key"], descending=[False, False, True, False],
               nulls_last=True)  # fmt: skip
    c = c.with_columns(
        pl.len().over("group").cast(pl.Int64).alias("group_size"),
        pl.int_range(1, pl.len() + 1).over("group").cast(pl.Int64).alias("group_rank"),
    )
    return c.drop("_m", "_impact", "_g", "_i", "workload", "start_ns")


def _clusters(items: list[tuple[int, int]], tolerance: int) -> list[list[tuple[int, int]]]:
    """(start, index) pairs in single-linkage clusters: a gap over ``tolerance`` splits."""
    out: list[list[tuple[int, int]]] = []
    for item in sorted(items):
        if out and item[0] - out[-1][-1][0] <= tolerance:
            out[-1].append(item)
        else:
            out.append([item])
    return out


def _assign_groups(
    c: pl.DataFrame, tolerance: int, min_effect: float, alpha: float, tests: dict[str, int]
) -> dict[int, int]:
    """Row index -> group id: primaries clustered per workload, derived attached or kept alone."""
    gid: dict[int, int] = {}
    next_id = 0
    rows = c.select("_i", "workload", "metric", "start_ns", "change_pct", "noise_pct",
                    "p_value").iter_rows()  # fmt: skip
    primary: dict[str, list[tuple[int, int]]] = {}
    derived: dict[str, list[tuple[int, int, float | None, float | None, float | None]]] = {}
    for i, wl, metric, start, pct, noise, p in rows:
        t = int(start) if start is not None else 0
        if metric in DERIVED:
            derived.setdefault(wl, []).append((t, i, pct, noise, p))
        else:
            primary.setdefault(wl, []).append((t, i))
    spans: dict[str, list[tuple[int, int, int]]] = {}  # workload -> (first, last, group id)
    for wl, items in primary.items():
        for cluster in _clusters(items, tolerance):
            next_id += 1
            spans.setdefault(wl, []).append((cluster[0][0], cluster[-1][0], next_id))
            gid.update({i: next_id for _, i in cluster})
    alone: dict[str, list[tuple[int, int]]] = {}
    for wl, ditems in derived.items():
        n = max(1, tests.get(wl, 1))
        for t, i, pct, noise, p in ditems:
            near = min(
                ((max(lo - t, t - hi, 0), g) for lo, hi, g in spans.get(wl, [])), default=None
            )
            if near is not None and near[0] <= tolerance:
                gid[i] = near[1]
                continue
            big = pct is None or noise is None or noise <= 0 or abs(pct) >= min_effect * noise
            sure = p is None or p <= alpha / n
            if big and sure:
                alone.setdefault(wl, []).append((t, i))
    for items in alone.values():
        for cluster in _clusters(items, tolerance):
            next_id += 1
            gid.update({i: next_id for _, i in cluster})
    return gid
