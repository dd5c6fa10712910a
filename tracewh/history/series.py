"""Many runs: diffs and history series (over ``sql/90_history.sql`` and ``sql/91_diff.sql``).

Every value is normalised **per step**: a run total divided by the run's number of
``ProfilerStep#N`` (1 for a trace without steps), so runs with different step counts compare
fairly. Definitions live in ``sql/90_history.sql`` (per-run metrics, history) and
``sql/91_diff.sql`` (two runs); this module resolves selectors, restricts the tables to the
partitions a question needs, and shapes the results. Which runs are comparable is
:mod:`tracewh.history.workload`; the regression check and change points are
:mod:`tracewh.history.check` and :mod:`tracewh.history.alerts`. It takes a :class:`~tracewh.query.runsel.Source`
(the API passes itself) and never imports the API.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import Mapping

import polars as pl

from tracewh.core.errors import UsageError
from tracewh.history.runseries import unstored_days
from tracewh.query.macros import DIFF_LEVELS
from tracewh.query.runsel import RunSelector, Source, parse_since, where_clause

__all__ = ["LEVELS", "compare", "diff", "history", "parse_since", "parse_threshold", "window_start"]

#: Grouping levels of a diff (``op``: CPU operator and input shapes, across hardware).
LEVELS = DIFF_LEVELS

_PCT_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(%?)\s*$")


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
    wh: Source, a: RunSelector, b: RunSelector, *, level: str = "kernel", tolerance: float = 0.05
) -> pl.DataFrame:
    """Compare runs ``a`` and ``b`` (selectors) per kernel, short name, category or op.

    Per group: calls, calls and time per step and mean duration in A and in B, the
    delta per step, the ratio B/A and a status (added, removed, slower, faster,
    unchanged within ``tolerance``), by absolute impact (``run_diff`` of
    ``sql/91_diff.sql``). Compare by ``op`` (CPU operator and input shapes),
    ``short_name`` or ``category`` when kernel names differ (e.g. an NVIDIA run against
    an AMD run).

    Examples
    --------
    >>> diff(Warehouse("wh"), "night=2025-01-01", "latest", level="category")  # doctest: +SKIP
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


def compare(wh: Source, a: RunSelector, b: RunSelector) -> pl.DataFrame:
    """Run-level metrics of runs ``a`` and ``b`` side by side (``run_compare``)."""
    ra, rb = wh.resolve_run(a), wh.resolve_run(b)
    return wh.sql(
        "SELECT * FROM run_compare($a, $b)", {"a": ra.run_id, "b": rb.run_id},
        days={ra.day, rb.day},
    )


def window_start(src: Source, since: str | dt.date | None, *, today: dt.date | None = None) -> dt.date | None:
    """The first day of a ``--since`` window; relative forms (``90d``) count back from
    ``today`` when given, else from the day of the latest run in the warehouse (so that a
    warehouse of older runs is not an empty window). None: no window."""
    if since is None:
        return None
    if today is None and isinstance(since, str) and re.match(r"^\s*\d+\s*[dw]\s*$", since, re.IGNORECASE):
        latest = src.sql("SELECT max(day) AS d FROM runs")["d"]
        today = latest[0] if latest.len() and isinstance(latest[0], dt.date) else None
    return parse_since(since, today=today)


def history(
    wh: Source,
    *,
    kernel: str | None = None,
    category: str | None = None,
    since: str | dt.date | None = None,
    where: Mapping[str, str] | None = None,
    today: dt.date | None = None,
    kernel_key: str | None = None,
) -> pl.DataFrame:
    """Time series, one row per run (oldest first), of step time, idle fraction and ops.

    Parameters
    ----------
    kernel
        Pattern on GPU op names or short names (case-insensitive; glob with ``*?[``,
        else substring).
    category
        A kernel category (``gemm``, ``attention``, ...). Neither: every GPU op.
    since
        ``90d``, ``12w`` (before today, UTC) or a date: runs of that day or later.
    where
        Labels or run fields the runs must have (``{"model": "dit-xl-2"}``).
    kernel_key
        A kernel key (``kernel_keys`` view; the ``key`` of a kernel change): every op
        name under it, so a kernel renamed by recompiles stays one series.

    Returns
    -------
    polars.DataFrame
        ``metric_history`` rows: day, start_ns, run_id, job, rank, labels_json,
        n_steps, step_ns, gpu_idle_fraction, kernels, calls, calls_per_step,
        time_per_step_ns, mean_ns.
    """
    # one snapshot (the Delta logs of every table read once) for the window, the runs
    # without stored series and the series: opening one was most of a history at 3,000 runs
    session = getattr(wh, "session", None)  # a Catalog's; a bare Source reads as it goes
    with session() if session is not None else contextlib.nullcontext():
        return _history(wh, kernel=kernel, category=category, since=since, where=where,
                        today=today, kernel_key=kernel_key)


def _history(
    wh: Source, *, kernel: str | None, category: str | None, since: str | dt.date | None,
    where: Mapping[str, str] | None, today: dt.date | None, kernel_key: str | None,
) -> pl.DataFrame:
    first = window_start(wh, since, today=today)
    clauses, params = where_clause(where or {})
    # a run's child rows lie in its own day partition: the partitions before `first` hold
    # no row of a run metric_history keeps, so the connection leaves them out; the runs with
    # stored series (run_series) are read from there: only the days of the others are opened
    return wh.sql(
        "SELECT h.* FROM metric_history(kernel_pattern := $k, category_name := $c, since := $s,"
        " key_name := $key) h "
        f"WHERE h.run_id IN (SELECT run_id FROM runs WHERE {clauses}) "
        "ORDER BY h.start_ns, h.rank, h.run_id",
        {**params, "k": kernel, "c": category, "s": first, "key": kernel_key},
        since=first, days=unstored_days(wh, since=first),
    )
