"""Kernel ranking (the Polars twin of ``kernel_ranking`` in ``sql/10_kernels.sql``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

import polars as pl

GroupBy = Literal["name", "short_name", "category"]
OrderBy = Literal["total", "mean", "max", "calls"]

_ORDER_COLUMN: dict[str, str] = {
    "total": "total_ns",
    "mean": "mean_ns",
    "max": "max_ns",
    "calls": "calls",
}


def kernel_ranking(
    gpu_ops: pl.LazyFrame,
    *,
    cats: Iterable[str] | None = None,
    group_by: GroupBy = "name",
    order_by: OrderBy = "total",
) -> pl.LazyFrame:
    """Rank GPU ops by time, one row per group.

    Parameters
    ----------
    gpu_ops
        Rows of the ``gpu_ops`` table of one run (at least ``cat``, ``name``,
        ``short_name``, ``category`` and ``dur_ns``).
    cats
        Keep only ops whose ``cat`` is in this list (``None``: all GPU ops). With
        ``["kernel", "gpu_memcpy"]`` and ``order_by="total"`` this is the classic aggregation.
    group_by
        Column to group by: ``name``, ``short_name`` or ``category``.
    order_by
        Sort key, descending: ``total`` (total_ns), ``mean``, ``max`` or ``calls``; ties by name.

    Returns
    -------
    polars.LazyFrame
        Columns ``name`` (the group's value), ``calls``, ``total_ns`` (sum of dur_ns, ns),
        ``mean_ns``, ``min_ns``, ``median_ns``, ``p95_ns`` (linear-interpolated quantiles,
        ns), ``max_ns``, ``std_ns`` (sample standard deviation, ns; null for one call) and
        ``pct`` (100 x total_ns / sum of total_ns over the rows returned). Ops without a
        duration are left out.

    Examples
    --------
    >>> ops = pl.LazyFrame({"cat": ["kernel"] * 2, "name": ["k", "k"], "dur_ns": [10, 30]})
    >>> kernel_ranking(ops).collect()["total_ns"].to_list()
    [40]
    """
    if group_by not in ("name", "short_name", "category"):
        raise ValueError(f"group_by must be name, short_name or category, not {group_by!r}")
    if order_by not in _ORDER_COLUMN:
        raise ValueError(f"order_by must be total, mean, max or calls, not {order_by!r}")
    ops = gpu_ops.filter(pl.col("dur_ns").is_not_null())
    if cats is not None:
        ops = ops.filter(pl.col("cat").is_in(list(cats)))
    dur = pl.col("dur_ns")
    ranked = (
        ops.group_by(pl.col(group_by).alias("name"))
        .agg(
            pl.len().cast(pl.Int64).alias("calls"),
            dur.sum().cast(pl.Int64).alias("total_ns"),
            dur.mean().alias("mean_ns"),
            dur.min().alias("min_ns"),
            dur.quantile(0.5, interpolation="linear").alias("median_ns"),
            dur.quantile(0.95, interpolation="linear").alias("p95_ns"),
            dur.max().alias("max_ns"),
            dur.std(ddof=1).alias("std_ns"),
        )
        .with_columns((100.0 * pl.col("total_ns") / pl.col("total_ns").sum()).alias("pct"))
    )
    return ranked.sort([_ORDER_COLUMN[order_by], "name"], descending=[True, False], nulls_last=True)
