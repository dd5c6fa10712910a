"""Many runs: diffs, history series and regression checks (over ``sql/9*.sql``).

Every value is normalised **per step**: a run total divided by the run's number of
``ProfilerStep#N`` (1 for a trace without steps), so runs with different step counts compare
fairly. Definitions live in ``sql/90_history.sql`` (per-run metrics, comparable runs,
history), ``sql/91_diff.sql`` (two runs) and ``sql/92_check.sql`` (the check); this module
resolves selectors, restricts the tables to the partitions a question needs, and shapes the
results.

**Comparable runs** (the baseline of a check): earlier runs with the same rank, device name
and backend and, when the run carries any of the labels ``keys`` (default ``model`` and
``branch``), the same values of those labels; a run with none of those labels compares with
earlier runs of the same job. Nightly runs of one model get a new job (directory) each night,
so the labels are what ties them.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from tracewh.errors import UsageError
from tracewh.runsel import Source, where_clause

#: Grouping levels of a diff.
LEVELS = ("kernel", "short_name", "category")
#: Labels that tie comparable runs together by default.
DEFAULT_KEYS: tuple[str, ...] = ("model", "branch")

_SINCE_RE = re.compile(r"^\s*(\d+)\s*([dw])\s*$", re.IGNORECASE)
_PCT_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(%?)\s*$")


def parse_since(text: str | dt.date, *, today: dt.date | None = None) -> dt.date:
    """Parse ``90d``, ``12w`` (days/weeks before ``today``) or a date ``YYYY-MM-DD``.

    Parameters
    ----------
    text
        What the user typed (or already a date; a datetime stands for its day).
    today
        The reference day of relative forms (default: today, UTC).

    Returns
    -------
    datetime.date
        The first day to include.

    Raises
    ------
    UsageError
        On anything else.

    Examples
    --------
    >>> parse_since("2w", today=dt.date(2025, 3, 15))
    datetime.date(2025, 3, 1)
    """
    if isinstance(text, dt.datetime):
        return text.date()  # its day: the partitions and the SQL compare days
    if isinstance(text, dt.date):
        return text
    m = _SINCE_RE.match(text)
    if m:
        ref = today or dt.datetime.now(dt.UTC).date()
        days = int(m.group(1)) * (7 if m.group(2).lower() == "w" else 1)
        return ref - dt.timedelta(days=days)
    try:
        return dt.date.fromisoformat(text.strip())
    except ValueError as exc:
        raise UsageError(
            f"invalid --since {text!r}: expected a number of days or weeks (90d, 12w) "
            "or a date YYYY-MM-DD"
        ) from exc


def parse_threshold(text: str | float) -> float:
    """Parse a relative threshold: ``"10%"`` or ``"10"`` (percent) into ``0.10``.

    A float is taken as a fraction already. Must be positive.

    Raises
    ------
    UsageError
        If the text is not a positive percentage.
    """
    if isinstance(text, float | int):
        value = float(text)
    else:
        m = _PCT_RE.match(text)
        if m is None:
            raise UsageError(f"invalid threshold {text!r}: expected a percentage such as 10%")
        value = float(m.group(1)) / 100.0
    if not value > 0:
        raise UsageError(f"threshold must be positive, got {text!r}")
    return value


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise UsageError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")


def diff(
    wh: Source, a: str, b: str, *, level: str = "kernel", tolerance: float = 0.05
) -> pl.DataFrame:
    """Per-group comparison of runs ``a`` and ``b`` (``run_diff``), by absolute impact.

    See :meth:`tracewh.api.Warehouse.diff`.
    """
    _check_level(level)
    if tolerance < 0:
        raise UsageError("tolerance must be >= 0")
    ra, rb = wh.resolve_run(a), wh.resolve_run(b)
    return wh.sql(
        "SELECT * FROM run_diff($a, $b, level := $level, tolerance := $tol)",
        {"a": ra.run_id, "b": rb.run_id, "level": level, "tol": tolerance},
        days={ra.day, rb.day},
    )


def compare(wh: Source, a: str, b: str) -> pl.DataFrame:
    """Run-level metrics of runs ``a`` and ``b`` side by side (``run_compare``)."""
    ra, rb = wh.resolve_run(a), wh.resolve_run(b)
    return wh.sql(
        "SELECT * FROM run_compare($a, $b)", {"a": ra.run_id, "b": rb.run_id},
        days={ra.day, rb.day},
    )


def history(
    wh: Source,
    *,
    kernel: str | None = None,
    category: str | None = None,
    since: str | dt.date | None = None,
    where: Mapping[str, str] | None = None,
    today: dt.date | None = None,
) -> pl.DataFrame:
    """Time series per run of the matched GPU ops, step time and idle fraction.

    See :meth:`tracewh.api.Warehouse.history`.
    """
    first = parse_since(since, today=today) if since is not None else None
    clauses, params = where_clause(where or {})
    # a run's child rows lie in its own day partition: the partitions before `first` hold
    # no row of a run metric_history keeps, so the connection leaves them out
    return wh.sql(
        "SELECT h.* FROM metric_history(kernel_pattern := $k, category_name := $c, since := $s) h "
        f"WHERE h.run_id IN (SELECT run_id FROM runs WHERE {clauses}) "
        "ORDER BY h.start_ns, h.rank, h.run_id",
        {**params, "k": kernel, "c": category, "s": first},
        since=first,
    )


@dataclass(frozen=True)
class Finding:
    """One metric of one checked run that moved (or could not be checked).

    Times are nanoseconds per step; ``change_fraction`` is relative to the baseline
    (``0.3`` = 30% slower).
    """

    run_id: str
    rank: int | None
    metric_kind: str  # step | category | kernel
    metric: str  # step_ns, a category, or a GPU op name
    status: str  # regression | improvement | new | gone
    value_ns: float
    baseline_ns: float | None
    mad_ns: float | None
    change_ns: float | None
    change_fraction: float | None
    baseline_runs: int
    since_run_id: str | None
    since_day: dt.date | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (dates as ISO text)."""
        out = dict(self.__dict__)
        out["since_day"] = self.since_day.isoformat() if self.since_day else None
        return out


@dataclass(frozen=True)
class CheckedRun:
    """A run the check looked at: its baseline size and what tied it to its baseline."""

    run_id: str
    rank: int | None
    day: dt.date | None
    baseline_runs: int
    tied_by: str | None

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
        The run asked for (its sibling ranks of the same job and day are checked too).
    checked
        Every run checked, with how many comparable earlier runs formed its baseline.
    regressions, improvements, changes
        Metrics beyond the bound upwards, downwards, and GPU ops that appeared or vanished
        (``new`` / ``gone``, at least ``min_ms`` per step).
    metrics
        Every significant metric of every checked run (the ``run_check`` rows).
    params
        The settings used.
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

    @property
    def regressed(self) -> bool:
        """Whether anything regressed."""
        return bool(self.regressions)

    @property
    def insufficient(self) -> tuple[CheckedRun, ...]:
        """Checked runs with fewer comparable earlier runs than ``min_runs`` (not checked)."""
        need = int(self.params["min_runs"])
        return tuple(c for c in self.checked if c.baseline_runs < need)

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
            "metrics_checked": self.metrics.filter(pl.col("status") != "insufficient").height,
            "checked": [c.to_dict() for c in self.checked],
            "insufficient": [c.run_id for c in self.insufficient],
            "regressions": [f.to_dict() for f in self.regressions],
            "improvements": [f.to_dict() for f in self.improvements],
            "changes": [f.to_dict() for f in self.changes],
            "params": dict(self.params),
        }


_SIBLINGS_SQL = """
WITH t AS (SELECT * FROM runs WHERE run_id = $id),
c AS (
    SELECT r.run_id, row_number() OVER (
        PARTITION BY r.rank ORDER BY (r.run_id = t.run_id) DESC, r.start_ns DESC, r.run_id
    ) AS rn
    FROM runs r, t
    WHERE r.job IS NOT DISTINCT FROM t.job AND r.day = t.day AND r.start_ns <= t.start_ns
      AND (r.rank IS DISTINCT FROM t.rank OR r.run_id = t.run_id)
      AND ($all_ranks OR r.run_id = t.run_id)
)
SELECT b.target_run_id, b.run_id, b.age, b.day, b.tied_by, r.rank
FROM run_baselines((SELECT list(run_id) FROM c WHERE rn = 1), keys := $keys, n := $n) b
JOIN runs r ON r.run_id = b.target_run_id
ORDER BY r.rank NULLS FIRST, b.target_run_id, b.age
"""


def check(
    wh: Source,
    run: str = "latest",
    *,
    baseline: int = 7,
    threshold: float = 0.10,
    min_ms: float = 0.1,
    k_mad: float = 3.0,
    floor_ms: float = 0.01,
    min_runs: int = 3,
    keys: Sequence[str] = DEFAULT_KEYS,
    all_ranks: bool = True,
) -> CheckReport:
    """Check a run (and its sibling ranks) against its comparable baseline.

    See :meth:`tracewh.api.Warehouse.check`.
    """
    if baseline < 1:
        raise UsageError("--baseline must be at least 1")
    if min_runs < 1:
        raise UsageError("min_runs must be at least 1")
    min_runs = min(min_runs, baseline)
    if threshold <= 0 or k_mad < 0 or min_ms < 0 or floor_ms < 0:
        raise UsageError("threshold must be > 0 and k_mad, min_ms, floor_ms >= 0")
    ref = wh.resolve_run(run)
    keys_list = list(keys)
    window = wh.sql(
        _SIBLINGS_SQL,
        {"id": ref.run_id, "all_ranks": all_ranks, "keys": keys_list, "n": baseline},
        days=set(),
    )
    ids = window.filter(pl.col("age") == 0)["run_id"].to_list()
    params: dict[str, Any] = {
        "baseline": baseline, "threshold": threshold, "k_mad": k_mad, "min_ms": min_ms,
        "floor_ms": floor_ms, "min_runs": min_runs, "keys": keys_list, "all_ranks": all_ranks,
    }  # fmt: skip
    metrics = wh.sql(
        "SELECT * FROM run_check($ids, keys := $keys, n := $n, threshold := $th, k_mad := $k,"
        " min_ns := $min_ns, floor_ns := $floor_ns, min_runs := $min_runs)",
        {
            "ids": ids, "keys": keys_list, "n": baseline, "th": threshold, "k": k_mad,
            "min_ns": min_ms * 1e6, "floor_ns": floor_ms * 1e6, "min_runs": min_runs,
        },
        days=set(window["day"].to_list()),
    )
    checked = [
        CheckedRun(
            r["target_run_id"], r["rank"], r["day"], int(r["baseline_runs"]), r["tied_by"]
        )
        for r in window.group_by("target_run_id", maintain_order=True)
        .agg(
            pl.col("rank").first(),
            pl.col("day").filter(pl.col("age") == 0).first(),
            (pl.col("age") >= 1).sum().alias("baseline_runs"),
            pl.col("tied_by").first(),
        )
        .iter_rows(named=True)
    ]
    rank_of = {c.run_id: c.rank for c in checked}
    findings = [
        Finding(
            run_id=r["target_run_id"], rank=rank_of.get(r["target_run_id"]),
            metric_kind=r["metric_kind"], metric=r["metric"], status=r["status"],
            value_ns=r["value_ns"], baseline_ns=r["baseline_ns"], mad_ns=r["mad_ns"],
            change_ns=r["change_ns"], change_fraction=r["change_fraction"],
            baseline_runs=r["baseline_runs"], since_run_id=r["since_run_id"],
            since_day=r["since_day"],
        )
        for r in metrics.filter(
            pl.col("status").is_in(["regression", "improvement", "new", "gone"])
        ).iter_rows(named=True)
    ]
    return CheckReport(
        run_id=ref.run_id,
        day=ref.day,
        job=ref.job,
        checked=tuple(checked),
        regressions=tuple(f for f in findings if f.status == "regression"),
        improvements=tuple(f for f in findings if f.status == "improvement"),
        changes=tuple(f for f in findings if f.status in ("new", "gone")),
        params=params,
        metrics=metrics,
    )
