"""Stream gaps and the idle breakdown (twins of ``sql/20_gaps.sql``)."""

from __future__ import annotations

import polars as pl

#: Default threshold between a kernel wait and an "other" wait: 30 000 ns = 30 µs.
KERNEL_WAIT_THRESHOLD_NS = 30_000

_STREAM_KEY = ["device", "stream"]


def gpu_op_gaps(gpu_ops: pl.LazyFrame) -> pl.LazyFrame:
    """The gap before each GPU op on its stream.

    Parameters
    ----------
    gpu_ops
        Rows of ``gpu_ops`` of one run (``device``, ``stream``, ``event_index``, ``name``,
        ``ts_ns``, ``dur_ns``, ``launch_ts_ns``).

    Returns
    -------
    polars.LazyFrame
        One row per op with a duration: ``device``, ``stream``, ``event_index``, ``name``,
        ``ts_ns``, ``end_ns``, ``launch_ts_ns``, ``prev_end_ns`` (latest end among the earlier
        ops of the same device and stream, ops ordered by ts_ns then event_index; null for the
        first) and ``gap_ns`` = ts_ns - prev_end_ns when positive, else 0 (ns).
    """
    ends = pl.col("ts_ns") + pl.col("dur_ns")
    return (
        gpu_ops.filter(pl.col("dur_ns").is_not_null() & pl.col("ts_ns").is_not_null())
        .select(
            "device", "stream", "event_index", "name", "ts_ns", "launch_ts_ns", ends.alias("end_ns")
        )
        .sort([*_STREAM_KEY, "ts_ns", "event_index"], nulls_last=False)
        .with_columns(pl.col("end_ns").cum_max().shift(1).over(_STREAM_KEY).alias("prev_end_ns"))
        .with_columns(
            pl.max_horizontal(pl.col("ts_ns") - pl.col("prev_end_ns"), pl.lit(0, pl.Int64))
            .alias("gap_ns")
            .cast(pl.Int64)
        )
        .with_columns(
            pl.when(pl.col("prev_end_ns").is_null())
            .then(None)
            .otherwise(pl.col("gap_ns"))
            .alias("gap_ns")
        )
    )


def gap_kinds(
    gpu_ops: pl.LazyFrame, *, kernel_wait_threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS
) -> pl.LazyFrame:
    """Every positive stream gap, classified.

    Parameters
    ----------
    gpu_ops
        Rows of ``gpu_ops`` of one run.
    kernel_wait_threshold_ns
        Gaps shorter than this many nanoseconds (default 30 000 ns = 30 µs) that are not host
        waits are kernel waits (launch overhead); longer ones are "other".

    Returns
    -------
    polars.LazyFrame
        ``device``, ``stream``, ``gap_ns``, ``gap_start_ns``, ``gap_end_ns``, ``kind``
        (``host_wait`` when the next op's launch call began after the previous op ended,
        else ``kernel_wait`` below the threshold, else ``other``), ``next_event_index``,
        ``next_name``, ``next_launch_ts_ns``.
    """
    return (
        gpu_op_gaps(gpu_ops)
        .filter(pl.col("gap_ns") > 0)
        .select(
            "device",
            "stream",
            "gap_ns",
            pl.col("prev_end_ns").alias("gap_start_ns"),
            pl.col("ts_ns").alias("gap_end_ns"),
            pl.when(pl.col("launch_ts_ns") > pl.col("prev_end_ns"))
            .then(pl.lit("host_wait"))
            .when(pl.col("gap_ns") < kernel_wait_threshold_ns)
            .then(pl.lit("kernel_wait"))
            .otherwise(pl.lit("other"))
            .alias("kind"),
            pl.col("event_index").alias("next_event_index"),
            pl.col("name").alias("next_name"),
            pl.col("launch_ts_ns").alias("next_launch_ts_ns"),
        )
    )


def _kind_sums() -> list[pl.Expr]:
    return [
        pl.col("gap_ns").filter(pl.col("kind") == k).sum().cast(pl.Int64).alias(f"{k}_ns")
        for k in ("host_wait", "kernel_wait")
    ] + [
        pl.col("gap_ns")
        .filter(pl.col("kind") == "other")
        .sum()
        .cast(pl.Int64)
        .alias("other_wait_ns")
    ]


def stream_gaps(
    gpu_ops: pl.LazyFrame, *, kernel_wait_threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS
) -> pl.LazyFrame:
    """Gap statistics per (device, stream).

    Parameters
    ----------
    gpu_ops
        Rows of ``gpu_ops`` of one run.
    kernel_wait_threshold_ns
        See :func:`gap_kinds` (ns; default 30 000 ns = 30 µs).

    Returns
    -------
    polars.LazyFrame
        ``device``, ``stream``, ``ops``, ``busy_ns`` (window_ns - gap_ns: the union of the op
        intervals), ``window_ns`` (first start to last end), ``gap_ns`` (sum of gaps),
        ``idle_fraction`` (gap_ns / window_ns), ``p50_gap_ns``, ``p95_gap_ns``,
        ``max_gap_ns`` (over positive gaps), ``host_wait_ns``, ``kernel_wait_ns``,
        ``other_wait_ns``; all times in ns.
    """
    per_stream = (
        gpu_op_gaps(gpu_ops)
        .group_by(_STREAM_KEY)
        .agg(
            pl.len().cast(pl.Int64).alias("ops"),
            (pl.col("end_ns").max() - pl.col("ts_ns").min()).alias("window_ns"),
            pl.col("gap_ns").sum().cast(pl.Int64).alias("gap_ns"),
        )
    )
    gaps = (
        gap_kinds(gpu_ops, kernel_wait_threshold_ns=kernel_wait_threshold_ns)
        .group_by(_STREAM_KEY)
        .agg(
            pl.col("gap_ns").quantile(0.5, interpolation="linear").alias("p50_gap_ns"),
            pl.col("gap_ns").quantile(0.95, interpolation="linear").alias("p95_gap_ns"),
            pl.col("gap_ns").max().alias("max_gap_ns"),
            *_kind_sums(),
        )
    )
    return (
        per_stream.join(gaps, on=_STREAM_KEY, how="left", nulls_equal=True)
        .select(
            "device",
            "stream",
            "ops",
            (pl.col("window_ns") - pl.col("gap_ns")).alias("busy_ns"),
            "window_ns",
            "gap_ns",
            pl.when(pl.col("window_ns") > 0)
            .then(pl.col("gap_ns") / pl.col("window_ns"))
            .alias("idle_fraction"),
            "p50_gap_ns",
            "p95_gap_ns",
            "max_gap_ns",
            pl.col("host_wait_ns").fill_null(0),
            pl.col("kernel_wait_ns").fill_null(0),
            pl.col("other_wait_ns").fill_null(0),
        )
        .sort(_STREAM_KEY, nulls_last=False)
    )


def idle_breakdown(
    gpu_ops: pl.LazyFrame, *, kernel_wait_threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS
) -> pl.LazyFrame:
    """Gap time by kind, per stream and per device, with ratios.

    Parameters
    ----------
    gpu_ops
        Rows of ``gpu_ops`` of one run.
    kernel_wait_threshold_ns
        See :func:`gap_kinds` (ns; default 30 000 ns = 30 µs).

    Returns
    -------
    polars.LazyFrame
        ``level`` (``stream`` rows, then one ``device`` row per device with ``stream``
        null), ``device``, ``stream``, ``gaps``, ``gap_ns``, ``host_wait_ns``,
        ``kernel_wait_ns``, ``other_wait_ns`` and ``*_ratio`` = each ``*_ns`` / ``gap_ns``.
    """
    kinds = gap_kinds(gpu_ops, kernel_wait_threshold_ns=kernel_wait_threshold_ns)
    aggs = [
        pl.len().cast(pl.Int64).alias("gaps"),
        pl.col("gap_ns").sum().cast(pl.Int64),
        *_kind_sums(),
    ]
    per_stream = kinds.group_by(_STREAM_KEY).agg(aggs).with_columns(pl.lit("stream").alias("level"))
    per_device = (
        kinds.group_by("device")
        .agg(aggs)
        .with_columns(pl.lit(None, pl.Int64).alias("stream"), pl.lit("device").alias("level"))
    )
    cols = [
        "level",
        "device",
        "stream",
        "gaps",
        "gap_ns",
        "host_wait_ns",
        "kernel_wait_ns",
        "other_wait_ns",
    ]
    both = pl.concat([per_stream.select(cols), per_device.select(cols)])
    return (
        both.with_columns(
            *(
                (pl.col(f"{k}_ns") / pl.col("gap_ns")).alias(f"{k}_ratio")
                for k in ("host_wait", "kernel_wait", "other_wait")
            ),
            (pl.col("level") == "device").alias("_total"),
        )
        .sort(["device", "_total", "stream"], nulls_last=False)
        .drop("_total")
    )
