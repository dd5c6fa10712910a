"""The regression check of a run (`tracewh check`), from change points.

For the checked run and the other ranks of its job instance, each series (step time, GPU
idle fraction, each category, kernel key and module, per step) is taken over the run's
comparable, usable runs up to and including it, and its change points are found over that
whole history (:mod:`tracewh.history.changepoint`). The series' last segment holds the run.
Going back from the latest change point, the first one that is **still in force** decides:
the last segment's level differs from the level of the segment before that change point in
the change's direction, by more than ``threshold`` (relative) and ``k_mad`` times the noise
the test measured and ``floor_ms`` per step. Its status is ``regression`` (slower, a lower
TFLOP/s of an operator checked with ``op``, or a
higher idle fraction), ``improvement``, ``new`` (a group that did not run before) or
``gone``; the baseline is the segment before the change (at most its ``baseline`` last runs
when given), and "since" is the change's first run (its day and ``commit`` label). A change
that was later undone (the series came back) is not in force. Kernels, categories and
modules count when their baseline or level reaches ``min_ms`` per step; the step time and
idle fraction always count. A run with fewer than ``min_runs`` comparable usable earlier
runs is not checked (said in the report; the exit code stays 0), nor is a run that is itself
unusable for comparison.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import polars as pl

from tracewh.core.errors import UsageError
from tracewh.history.alerts import commit_label, run_set, series_values
from tracewh.history.changepoint import ChangePoint, detect
from tracewh.history.changes import (
    HIGHER_IS_BETTER,
    MEMORY_FLOOR_BYTES,
    SHARE_FLOOR,
    TIME_METRICS,
    ZERO_FILLED,
    metric_unit,
)
from tracewh.history.cpseries import HIGHER_IS_BETTER_KEYS as CP_BETTER
from tracewh.history.options import CheckOptions
from tracewh.query.runsel import Catalog, RunSelector, Source

_KIND = {"step": "step", "idle": "idle", "category": "category", "kernel": "kernel",
         "module": "module", "memory": "memory", "op_tflops": "op_tflops",
         "critical_path": "critical_path"}  # fmt: skip


@dataclass(frozen=True)
class Finding:
    """One metric of one checked run that moved.

    Times are nanoseconds per step (the idle fraction: 0..1; memory, the peak allocated
    per step: bytes; ``to_dict`` says which in ``unit``); ``change_fraction`` is
    relative to the baseline (``0.3`` = 30% slower). ``metric`` is ``step_ns``, the idle
    fraction's name, a category, a module or a kernel key; ``name`` the kernel's raw name.
    """

    run_id: str
    rank: int | None
    metric_kind: str  # step | idle | category | module | kernel | memory
    metric: str
    name: str | None
    short_name: str | None
    status: str  # regression | improvement | new | gone
    value_ns: float
    level_ns: float
    baseline_ns: float | None
    mad_ns: float | None
    change_ns: float | None
    change_fraction: float | None
    p_value: float
    provisional: bool
    baseline_runs: int
    since_run_id: str | None
    since_day: dt.date | None
    since_commit: str | None
    group: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (dates as ISO text)."""
        out = dict(self.__dict__)
        out["since_day"] = self.since_day.isoformat() if self.since_day else None
        out["unit"] = metric_unit(self.metric_kind)
        return out


@dataclass(frozen=True)
class CheckedRun:
    """A run the check looked at: how many comparable earlier runs it had, and why not."""

    run_id: str
    rank: int | None
    day: dt.date | None
    baseline_runs: int
    tied_by: str | None  # labels | fingerprint | none
    workload: str | None = None
    unusable: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        out = dict(self.__dict__)
        out["day"] = self.day.isoformat() if self.day else None
        return out


@dataclass(frozen=True)
class CheckReport:
    """Outcome of :meth:`tracewh.api.Warehouse.check`.

    Attributes
    ----------
    run_id, day, job
        The run asked for (the other ranks of its job instance are checked too).
    checked
        Every run considered, with its comparable earlier runs.
    regressions, improvements, changes
        Changes in force upwards, downwards, and GPU ops that appeared or vanished.
    metrics
        Every significant metric of every checked run and its status (``ok`` included).
    excluded
        Comparable runs left out of the baselines as unusable (``run_id``, ``reasons``).
    params
        The settings used.
    fingerprinted
        Runs ingested before fingerprints whose fingerprint was computed from their tables
        for this check (``tracewh compact`` stores them).
    """

    run_id: str
    day: dt.date | None
    job: str | None
    checked: tuple[CheckedRun, ...]
    regressions: tuple[Finding, ...]
    improvements: tuple[Finding, ...]
    changes: tuple[Finding, ...]
    params: Mapping[str, Any]
    metrics: pl.DataFrame = field(compare=False, repr=False)
    excluded: pl.DataFrame = field(compare=False, repr=False, default_factory=pl.DataFrame)
    fingerprinted: int = 0

    @property
    def regressed(self) -> bool:
        """Whether anything regressed."""
        return bool(self.regressions)

    @property
    def insufficient(self) -> tuple[CheckedRun, ...]:
        """Runs not checked: too few comparable usable earlier runs, or unusable themselves."""
        need = int(self.params["min_runs"])
        return tuple(c for c in self.checked if c.baseline_runs < need or c.unusable)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: status, runs, regressions, improvements, changes, params."""
        if self.regressions:
            status = "regression"
        elif len(self.insufficient) == len(self.checked):
            status = "insufficient_baseline"
        else:
            status = "ok"
        return {
            "status": status,
            "run_id": self.run_id,
            "day": self.day.isoformat() if self.day else None,
            "job": self.job,
            "metrics_checked": self.metrics.height,
            "checked": [c.to_dict() for c in self.checked],
            "insufficient": [c.run_id for c in self.insufficient],
            "excluded_runs": self.excluded.to_dicts(),
            "regressions": [f.to_dict() for f in self.regressions],
            "improvements": [f.to_dict() for f in self.improvements],
            "changes": [f.to_dict() for f in self.changes],
            "fingerprinted_from_tables": self.fingerprinted,
            "params": dict(self.params),
        }


@dataclass(frozen=True)
class _Verdict:
    status: str
    level: float
    baseline: float | None
    mad: float | None
    since: int | None  # index of the change's first run
    p_value: float
    provisional: bool


def _segments(n: int, cps: Sequence[ChangePoint]) -> list[tuple[int, int]]:
    edges = [0, *[c.index for c in cps], n]
    return list(itertools.pairwise(edges))


def verdict(
    x: np.ndarray[Any, np.dtype[np.float64]],
    cps: Sequence[ChangePoint],
    *,
    threshold: float,
    k_mad: float,
    floor: float,
    baseline: int | None,
    higher_is_better: bool = False,
) -> _Verdict:
    """The status of the last value of ``x`` given the series' change points (see module).

    ``higher_is_better`` (a throughput such as an operator's TFLOP/s): a drop is the
    regression and a rise the improvement.
    """
    segs = _segments(x.size, cps)
    s_k, e_k = segs[-1]
    level = float(x[s_k:e_k].mean())
    for j in range(len(cps) - 1, -1, -1):
        b0, b1 = segs[j]
        base_vals = x[b0:b1] if baseline is None else x[max(b0, b1 - baseline):b1]
        base = float(base_vals.mean())
        cp = cps[j]
        direction = np.sign(cp.after - cp.before)
        delta = level - base
        noise = cp.noise * abs(base) if cp.relative else cp.noise
        bound = max(threshold * abs(base), k_mad * noise, floor)
        if np.sign(delta) != direction or abs(delta) <= bound:
            continue
        mad = float(np.median(np.abs(base_vals - np.median(base_vals))))
        worse = delta < 0 if higher_is_better else delta > 0
        status = ("new" if base == 0 else "gone" if level == 0
                  else "regression" if worse else "improvement")  # fmt: skip
        return _Verdict(status, level, base, mad, segs[j + 1][0], cp.p_value, cp.provisional)
    before = x[s_k:e_k - 1]
    base_ok = float(before.mean()) if before.size else None
    return _Verdict("ok", level, base_ok, None, None, 1.0, False)


def check(
    src: Source,
    run: RunSelector = "latest",
    *,
    baseline: int | None = CheckOptions.baseline,
    threshold: float = CheckOptions.threshold,
    min_ms: float = CheckOptions.min_ms,
    k_mad: float = CheckOptions.k_mad,
    floor_ms: float = CheckOptions.floor_ms,
    min_runs: int = CheckOptions.min_runs,
    alpha: float = CheckOptions.alpha,
    keys: Sequence[str] = CheckOptions.keys,
    all_ranks: bool = CheckOptions.all_ranks,
    include_unusable: bool = CheckOptions.include_unusable,
    op: str | None = CheckOptions.op,
    critical_path: bool = CheckOptions.critical_path,
) -> CheckReport:
    """Check a run, and the other ranks of its job instance, for regressions in force.

    Each series (step time, GPU idle fraction, each category, kernel key and module at
    least ``min_ms`` per step) over the run's comparable usable runs up to it gets its
    change points (:func:`tracewh.history.alerts.changes`); the run regressed when a change point at or before
    it is still in force: its segment's level is above the level of the segment before
    the change by more than ``threshold`` (relative), ``k_mad`` times the measured noise
    and ``floor_ms`` per step. The baseline is that earlier segment (its last
    ``baseline`` runs when given); "since" names the change's first run. Runs with
    fewer than ``min_runs`` comparable earlier runs are not checked (listed in
    ``CheckReport.insufficient``). With ``op``, the achieved TFLOP/s of the CPU
    operators matching that pattern are checked too (a drop is a regression; see
    :func:`tracewh.history.alerts.changes`). With ``critical_path``, the critical path's
    shares by bound too (a rising share of anything but GPU compute is a regression;
    :mod:`tracewh.history.cpseries`).

    Examples
    --------
    >>> report = check(Warehouse("wh"), "latest", threshold=0.1)  # doctest: +SKIP
    >>> [f.metric for f in report.regressions]                   # doctest: +SKIP
    """
    if baseline is not None and baseline < 1:
        raise UsageError("--baseline must be at least 1")
    if min_runs < 1:
        raise UsageError("min_runs must be at least 1")
    if threshold <= 0 or k_mad < 0 or min_ms < 0 or floor_ms < 0:
        raise UsageError("threshold must be > 0 and k_mad, min_ms, floor_ms >= 0")
    ref = src.resolve_run(run)
    everything = run_set(src, keys=keys, include_unusable=True)
    allruns = everything.runs
    bad = dict(everything.excluded.iter_rows())
    me = allruns.filter(pl.col("run_id") == ref.run_id).row(0, named=True)
    targets = (
        allruns.filter(pl.col("instance") == me["instance"]) if all_ranks
        else allruns.filter(pl.col("run_id") == ref.run_id)
    )
    params: dict[str, Any] = {
        "baseline": baseline, "threshold": threshold, "k_mad": k_mad, "min_ms": min_ms,
        "floor_ms": floor_ms, "min_runs": min_runs, "alpha": alpha, "keys": list(keys),
        "all_ranks": all_ranks, "include_unusable": include_unusable, "op": op,
        "critical_path": critical_path,
    }  # fmt: skip
    checked: list[CheckedRun] = []
    histories: dict[str, pl.DataFrame] = {}
    excluded: list[dict[str, Any]] = []
    for t in targets.iter_rows(named=True):
        hist = allruns.filter((pl.col("series") == t["series"]) & (pl.col("start_ns") <= t["start_ns"]))
        if not include_unusable:
            dropped = hist.filter(pl.col("run_id").is_in(list(bad)) & (pl.col("run_id") != t["run_id"]))
            excluded += [{"run_id": r, "reasons": bad[r]} for r in dropped["run_id"].to_list()]
            hist = hist.filter(~pl.col("run_id").is_in(list(bad)) | (pl.col("run_id") == t["run_id"]))
        checked.append(CheckedRun(
            t["run_id"], t["rank"], t["day"], hist.height - 1, t["workload_by"], t["workload"],
            None if include_unusable else bad.get(t["run_id"]),
        ))  # fmt: skip
        histories[t["run_id"]] = hist
    todo = [c for c in checked if c.baseline_runs >= min_runs and not c.unusable]
    rows: list[dict[str, Any]] = []
    findings: list[Finding] = []
    if todo:
        days = {d for c in todo for d in histories[c.run_id]["day"].to_list()}
        # from the first visible day on it is every run's: the query `changes` runs (once
        # for both in a session: a report asks for both)
        first = min(days)
        values = series_values(src, since=None if first <= allruns["day"].min() else first)
        if op is not None:
            ids = sorted({r for c in todo for r in histories[c.run_id]["run_id"].to_list()})
            ops = src.sql(
                "SELECT * FROM op_series_values($runs, op_pattern := $op, min_ms := $min_ms)",
                {"runs": ids, "op": op, "min_ms": min_ms}, since=min(days),
            )  # fmt: skip
            values = pl.concat([values, ops.select(values.columns).cast(values.schema)])
        if critical_path:  # the path's shares by bound, computed now (history/cpseries.py)
            from tracewh.history.cpseries import critical_path_values

            ids = sorted({r for c in todo for r in histories[c.run_id]["run_id"].to_list()})
            cps = critical_path_values(cast(Catalog, src), ids)
            values = pl.concat([values, cps.select(values.columns).cast(values.schema)])
        for c in todo:
            f, r = _check_run(c, histories[c.run_id], values, params)
            findings += f
            rows += r
    findings = _grouped(findings, allruns)
    metrics = pl.DataFrame(rows, schema=_METRIC_SCHEMA, orient="row")
    return CheckReport(
        run_id=ref.run_id, day=ref.day, job=ref.job, checked=tuple(checked),
        regressions=tuple(f for f in findings if f.status == "regression"),
        improvements=tuple(f for f in findings if f.status == "improvement"),
        changes=tuple(f for f in findings if f.status in ("new", "gone")),
        params=params, metrics=metrics,
        excluded=pl.DataFrame(excluded, schema={"run_id": pl.String, "reasons": pl.String}).unique(),
        fingerprinted=everything.fingerprinted,
    )  # fmt: skip


_METRIC_SCHEMA = {
    "target_run_id": pl.String, "metric_kind": pl.String, "metric": pl.String,
    "value_ns": pl.Float64, "level_ns": pl.Float64, "baseline_ns": pl.Float64,
    "status": pl.String, "since_run_id": pl.String, "p_value": pl.Float64,
    "baseline_runs": pl.Int64,
}  # fmt: skip


def _check_run(
    c: CheckedRun, hist: pl.DataFrame, values: pl.DataFrame, p: Mapping[str, Any]
) -> tuple[list[Finding], list[dict[str, Any]]]:
    ids = hist["run_id"].to_list()
    pos = {r: i for i, r in enumerate(ids)}
    labels = dict(zip(ids, hist["labels_json"].to_list(), strict=True))
    days = dict(zip(ids, hist["day"].to_list(), strict=True))
    v = values.filter(pl.col("run_id").is_in(ids))
    findings: list[Finding] = []
    rows: list[dict[str, Any]] = []
    min_ns = float(p["min_ms"]) * 1e6
    for (metric, key), grp in v.group_by(["metric", "key"]):
        metric, key = str(metric), str(key)
        x = np.zeros(len(ids)) if metric in ZERO_FILLED else np.full(len(ids), np.nan)
        wv = np.zeros(len(ids))
        name = short = None
        for r, value, sd, steps, nm, sh in grp.select(
            "run_id", "value", "step_sd", "n_steps", "name", "short_name").iter_rows():  # fmt: skip
            x[pos[r]] = np.nan if value is None else value
            if sd is not None and steps:
                wv[pos[r]] = sd * sd / steps
            if r == c.run_id or name is None:
                name, short = nm, sh
        keep = np.flatnonzero(np.isfinite(x))
        if keep.size == 0 or keep[-1] != len(ids) - 1:
            continue  # the checked run has no value of this metric (e.g. no GPU idle time)
        xs = x[keep]
        cps = detect(xs, within_var=wv[keep], alpha=float(p["alpha"]))
        is_time = metric in TIME_METRICS
        vd = verdict(xs, cps, threshold=float(p["threshold"]), k_mad=float(p["k_mad"]),
                     floor=float(p["floor_ms"]) * 1e6 if is_time
                     else MEMORY_FLOOR_BYTES if metric == "memory"
                     else SHARE_FLOOR if metric == "critical_path" else 0.0,
                     baseline=p["baseline"], higher_is_better=metric in HIGHER_IS_BETTER
                     or (metric == "critical_path" and key in CP_BETTER))  # fmt: skip
        if metric in ZERO_FILLED and max(vd.level, vd.baseline or 0.0, float(xs[-1])) < min_ns:
            continue
        since = ids[int(keep[vd.since])] if vd.since is not None else None
        rows.append({"target_run_id": c.run_id, "metric_kind": _KIND[metric], "metric": key,
                     "value_ns": float(xs[-1]), "level_ns": vd.level, "baseline_ns": vd.baseline,
                     "status": vd.status, "since_run_id": since, "p_value": vd.p_value,
                     "baseline_runs": c.baseline_runs})  # fmt: skip
        if vd.status == "ok":
            continue
        change = vd.level - vd.baseline if vd.baseline is not None else None
        findings.append(Finding(
            run_id=c.run_id, rank=c.rank, metric_kind=_KIND[metric], metric=key, name=name,
            short_name=short, status=vd.status, value_ns=float(xs[-1]), level_ns=vd.level,
            baseline_ns=vd.baseline, mad_ns=vd.mad, change_ns=change,
            change_fraction=change / vd.baseline if change is not None and vd.baseline else None,
            p_value=vd.p_value, provisional=vd.provisional, baseline_runs=c.baseline_runs,
            since_run_id=since, since_day=days.get(since) if since else None,
            since_commit=commit_label(labels.get(since)) if since else None,
        ))  # fmt: skip
    return findings, rows


def _grouped(findings: list[Finding], runs: pl.DataFrame) -> list[Finding]:
    """Number the findings' groups (one per job instance of the change's first run) and
    order them: group, then step/idle/category/module/kernel, then absolute change."""
    inst = dict(zip(runs["run_id"].to_list(), runs["instance"].to_list(), strict=True))
    start = dict(zip(runs["run_id"].to_list(), runs["start_ns"].to_list(), strict=True))
    keys = sorted({inst.get(f.since_run_id or "", "") for f in findings},
                  key=lambda k: -max((start.get(f.since_run_id or "", 0) or 0) for f in findings
                                     if inst.get(f.since_run_id or "", "") == k))  # fmt: skip
    num = {k: i + 1 for i, k in enumerate(keys)}
    order = {"step": 0, "idle": 1, "category": 2, "module": 3, "kernel": 4, "memory": 5,
             "op_tflops": 6, "critical_path": 7}  # fmt: skip
    out = [Finding(**{**f.__dict__, "group": num[inst.get(f.since_run_id or "", "")]})
           for f in findings]  # fmt: skip
    return sorted(out, key=lambda f: (f.group, order.get(f.metric_kind, 9),
                                      -abs(f.change_ns or 0.0), f.metric))  # fmt: skip

