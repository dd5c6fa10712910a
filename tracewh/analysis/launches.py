"""Launch latency (twins of ``launch_latency`` and ``launch_latency_by_kernel`` in
``sql/30_launches.sql``)."""

from __future__ import annotations

import polars as pl

#: Runtime calls that enqueue GPU work (a version suffix such as ``_v11060`` is ignored).
LAUNCH_CALL_PATTERN = (
    r"^(?:cudaLaunchKernel|cudaLaunchKernelExC|cudaLaunchCooperativeKernel|cuLaunchKernel"
    r"|cuLaunchKernelEx|cudaMemcpyAsync|cudaMemsetAsync|cudaGraphLaunch|hipLaunchKernel"
    r"|hipExtModuleLaunchKernel|hipModuleLaunchKernel|hipMemcpyAsync|hipMemsetAsync"
    r"|hipMemcpyWithStream|hipGraphLaunch|mtia\w*(?:Launch|Enqueue)\w*)(?:_v\d+|_ptsz|_spt)?$"
)


def launch_latency(gpu_ops: pl.LazyFrame) -> pl.LazyFrame:
    """Launch latency of every launch: each linked GPU op, a graph launch once.

    A graph launch (``launch_kind`` ``graph``) replays many ops; it is measured to its
    first replayed op (``graph_position`` 1) and its other ops are left out.

    Parameters
    ----------
    gpu_ops
        Rows of ``gpu_ops`` of one run (``event_index``, ``name``, ``short_name``, ``device``,
        ``stream``, ``step``, ``ts_ns``, ``launch_name``, ``launch_ts_ns``,
        ``launch_dur_ns``, ``launch_kind``, ``graph_position``).

    Returns
    -------
    polars.LazyFrame
        One row per launch: ``event_index``, ``name``, ``short_name``,
        ``device``, ``stream``, ``step``, ``launch_name``, ``launch_kind``,
        ``is_launch_call``, ``api_ns``
        (duration of the runtime call), ``queue_ns`` (GPU start - end of the runtime call,
        negative values set to 0), ``negative_queue`` (the raw value was negative),
        ``launch_to_start_ns`` (GPU start - start of the runtime call); all in ns.
    """
    raw_queue = pl.col("ts_ns") - (pl.col("launch_ts_ns") + pl.col("launch_dur_ns"))
    return gpu_ops.filter(
        pl.col("launch_ts_ns").is_not_null()
        & pl.col("ts_ns").is_not_null()
        & (pl.col("graph_position").fill_null(1) == 1)
    ).select(
        "event_index",
        "name",
        "short_name",
        "device",
        "stream",
        "step",
        "launch_name",
        "launch_kind",
        pl.col("launch_name")
        .fill_null("")
        .str.contains(LAUNCH_CALL_PATTERN)
        .alias("is_launch_call"),
        pl.col("launch_dur_ns").alias("api_ns"),
        pl.max_horizontal(raw_queue, pl.lit(0, pl.Int64)).cast(pl.Int64).alias("queue_ns"),
        (raw_queue < 0).alias("negative_queue"),
        (pl.col("ts_ns") - pl.col("launch_ts_ns")).alias("launch_to_start_ns"),
    )


def launch_latency_by_kernel(gpu_ops: pl.LazyFrame) -> pl.LazyFrame:
    """Launch latency summarised per GPU op name (graph launches: per launch call name).

    Parameters
    ----------
    gpu_ops
        Rows of ``gpu_ops`` of one run (see :func:`launch_latency`).

    Returns
    -------
    polars.LazyFrame
        ``name``, ``short_name``, ``ops``, ``mean_api_ns``, ``p50_api_ns``, ``p95_api_ns``,
        ``mean_queue_ns``, ``p50_queue_ns``, ``p95_queue_ns``, ``max_queue_ns``,
        ``mean_launch_to_start_ns``, ``p95_launch_to_start_ns``, ``negative_queue_ops``;
        sorted by mean_queue_ns descending then name. Quantiles interpolate linearly. A graph
        launch counts under its call's name (``cudaGraphLaunch``), short name ``graph``.
    """
    api, queue, l2s = pl.col("api_ns"), pl.col("queue_ns"), pl.col("launch_to_start_ns")
    graph = pl.col("launch_kind") == "graph"
    return (
        launch_latency(gpu_ops)
        .with_columns(
            pl.when(graph).then(pl.col("launch_name")).otherwise(pl.col("name")).alias("name"),
            pl.when(graph).then(pl.lit("graph")).otherwise(pl.col("short_name"))
            .alias("short_name"),
        )
        .group_by("name")
        .agg(
            pl.col("short_name").first(),
            pl.len().cast(pl.Int64).alias("ops"),
            api.mean().alias("mean_api_ns"),
            api.quantile(0.5, interpolation="linear").alias("p50_api_ns"),
            api.quantile(0.95, interpolation="linear").alias("p95_api_ns"),
            queue.mean().alias("mean_queue_ns"),
            queue.quantile(0.5, interpolation="linear").alias("p50_queue_ns"),
            queue.quantile(0.95, interpolation="linear").alias("p95_queue_ns"),
            queue.max().alias("max_queue_ns"),
            l2s.mean().alias("mean_launch_to_start_ns"),
            l2s.quantile(0.95, interpolation="linear").alias("p95_launch_to_start_ns"),
            pl.col("negative_queue").sum().cast(pl.Int64).alias("negative_queue_ops"),
        )
        .sort(["mean_queue_ns", "name"], descending=[True, False], nulls_last=True)
    )
