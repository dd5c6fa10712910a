"""Collectives matched across the ranks of a job: skew, bus bandwidth, waits, link peaks.

The matching and every figure are defined in SQL (``sql/79_collectives.sql``:
``collective_matches``, ``collective_rank_waits``, ``collective_arrival``); the links' peak
bandwidths in ``sql/79_link_peaks.sql``. This module adds, in Polars, the link each matched
collective ran over and its bus bandwidth as a percentage of that link's peak, and shapes
the result. Pure functions: frames in, frames out.

Units: ``*_ns`` nanoseconds, ``*_bytes`` bytes, ``*_gbps`` GB/s (1e9 bytes/s),
``pct_of_link_peak`` percent.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import polars as pl

from tracewh.core.errors import UsageError
from tracewh.query.options import COLLECTIVE_VIEWS, CollectivesOptions

if TYPE_CHECKING:
    from tracewh.query.runsel import Catalog

#: What ``by`` may be.
BY: tuple[str, ...] = COLLECTIVE_VIEWS

#: The columns of one matched collective, in order (``by="collective"``).
MATCH_COLUMNS: tuple[str, ...] = (
    "pg", "pg_desc", "seq", "collective", "dtype", "msg_bytes", "ranks", "n_ranks",
    "group_size", "step", "first_start_ns", "last_start_ns", "skew_ns", "last_rank", "comm_ns",
    "algbw_gbps", "busbw_factor", "busbw_gbps", "wait_ns", "kinds", "link", "link_peak_gbps",
    "pct_of_link_peak",
)

#: The columns of one rank (``by="rank"``).
RANK_COLUMNS: tuple[str, ...] = (
    "rank", "run_id", "collectives", "late", "late_share", "wait_ns", "caused_wait_ns",
    "kernel_ns",
)


def device_links(devices: pl.DataFrame, peaks: pl.DataFrame) -> pl.DataFrame:
    """The intra-node link of each device name: the first ``link_peaks`` row whose regex matches.

    Parameters
    ----------
    devices
        A ``device_name`` column (duplicates and NULLs allowed).
    peaks
        The ``link_peaks`` view: ``link``, ``gbps``, ``device_regex`` (NULL: never by device).

    Returns
    -------
    polars.DataFrame
        ``device_name``, ``link`` and ``link_peak_gbps`` per distinct non-null name; NULL link
        when no row matches.
    """
    rules = [(re.compile(str(rx), re.IGNORECASE), str(link), float(gbps))
             for link, gbps, rx in peaks.select("link", "gbps", "device_regex").iter_rows()
             if rx is not None]
    names, links, gbps_out = [], [], []
    for name in devices["device_name"].drop_nulls().unique().sort().to_list():
        hit = next(((lk, g) for rx, lk, g in rules if rx.search(name)), (None, None))
        names.append(name)
        links.append(hit[0])
        gbps_out.append(hit[1])
    return pl.DataFrame(
        {"device_name": names, "link": links, "link_peak_gbps": gbps_out},
        schema={"device_name": pl.String, "link": pl.String, "link_peak_gbps": pl.Float64},
    )


def with_link_peak(
    matches: pl.DataFrame,
    rank_info: pl.DataFrame,
    peaks: pl.DataFrame,
    *,
    link: str | None = None,
    link_peak_gbps: float | None = None,
) -> pl.DataFrame:
    """``matches`` with ``link``, ``link_peak_gbps`` and ``pct_of_link_peak`` added.

    The link of a collective: ``link_peak_gbps`` when given (named ``link``, else ``"user"``);
    else the ``link_peaks`` row named ``link``; else, when all its ranks ran on one host (or
    no host is known), the intra-node link of its ranks' device (:func:`device_links`; the
    slowest when they differ); else (ranks on several hosts: a network link tracewh cannot
    know) none. ``pct_of_link_peak`` = 100 x ``busbw_gbps`` / ``link_peak_gbps``.

    Parameters
    ----------
    matches
        ``collective_matches`` rows (``ranks``: a list of ranks, ``busbw_gbps``).
    rank_info
        One row per rank: ``rank``, ``host``, ``device_name``.
    peaks
        The ``link_peaks`` view.
    link, link_peak_gbps
        The user's choice of link (a ``link_peaks`` name) or peak (GB/s).

    Raises
    ------
    UsageError
        ``link`` names no row of ``link_peaks``, or ``link_peak_gbps`` is not positive.
    """
    if link_peak_gbps is not None:
        if not link_peak_gbps > 0:
            raise UsageError(f"--link-peak-gbps must be a positive number, not {link_peak_gbps!r}")
        return _fixed(matches, link or "user", float(link_peak_gbps))
    if link is not None:
        hit = peaks.filter(pl.col("link") == link.lower())
        if hit.is_empty():
            known = ", ".join(peaks["link"].to_list())
            raise UsageError(f"unknown link {link!r} (known: {known}; or --link-peak-gbps N)")
        return _fixed(matches, str(hit["link"][0]), float(hit["gbps"][0]))
    per_rank = rank_info.join(device_links(rank_info, peaks), on="device_name", how="left")
    keyed = matches.with_row_index("_row")
    spans = (
        keyed.select("_row", pl.col("ranks").alias("rank")).explode("rank")
        .join(per_rank, on="rank", how="left")
        .group_by("_row")
        .agg(
            pl.col("host").drop_nulls().n_unique().alias("_hosts"),
            pl.col("link").sort_by("link_peak_gbps").first().alias("link"),
            pl.col("link_peak_gbps").min().alias("link_peak_gbps"),
        )
        .with_columns(
            pl.when(pl.col("_hosts") <= 1).then(pl.col("link")).alias("link"),
            pl.when(pl.col("_hosts") <= 1).then(pl.col("link_peak_gbps")).alias("link_peak_gbps"),
        )
        .drop("_hosts")
    )
    out = keyed.join(spans, on="_row", how="left").sort("_row").drop("_row")
    return _pct(out)


def _fixed(matches: pl.DataFrame, link: str, gbps: float) -> pl.DataFrame:
    return _pct(matches.with_columns(
        pl.lit(link, dtype=pl.String).alias("link"),
        pl.lit(gbps, dtype=pl.Float64).alias("link_peak_gbps"),
    ))


def _pct(df: pl.DataFrame) -> pl.DataFrame:
    return df.with_columns(
        (100.0 * pl.col("busbw_gbps") / pl.col("link_peak_gbps")).alias("pct_of_link_peak")
    )


def by_wait(df: pl.DataFrame) -> pl.DataFrame:
    """Rows by ``wait_ns``, largest first (ties: ``first_start_ns`` or ``rank``)."""
    tie = "first_start_ns" if "first_start_ns" in df.columns else "rank"
    return df.sort(["wait_ns", tie], descending=[True, False], nulls_last=True)


def shape(df: pl.DataFrame, by: str) -> pl.DataFrame:
    """The columns of ``by`` (:data:`MATCH_COLUMNS` or :data:`RANK_COLUMNS`), in order."""
    if by not in BY:
        raise UsageError(f"--by must be one of {', '.join(BY)}, not {by!r}")
    cols = MATCH_COLUMNS if by == "collective" else RANK_COLUMNS
    return df.select([c for c in cols if c in df.columns])


def arrival_alerts(stragglers: pl.DataFrame) -> list[str]:
    """One line per rank that arrived last at most collectives of at least one step.

    Parameters
    ----------
    stragglers
        ``rank_stragglers`` rows (``sql/80_ranks.sql``) with the arrival columns ``step``,
        ``rank``, ``collectives``, ``late``, ``caused_wait_ns`` and ``late_straggler``.

    Returns
    -------
    list[str]
        ``rank R arrived last at most collectives of N step(s) (S, ...): L of C collectives,
        the others waited W ms``; empty when no rank did.
    """
    need = {"step", "rank", "collectives", "late", "caused_wait_ns", "late_straggler"}
    if not need <= set(stragglers.columns):
        return []
    late = stragglers.filter(pl.col("late_straggler"))
    out = []
    for row in (
        late.group_by("rank")
        .agg(pl.col("step").sort(), pl.col("late").sum(), pl.col("collectives").sum(),
             pl.col("caused_wait_ns").sum())
        .sort("rank", nulls_last=True)
        .iter_rows(named=True)
    ):
        steps = row["step"]
        shown = ", ".join(str(s) for s in steps[:8]) + (", ..." if len(steps) > 8 else "")
        out.append(
            f"rank {row['rank']} arrived last at most collectives of {len(steps)} step(s) "
            f"({shown}): {row['late']} of {row['collectives']} collectives, the others waited "
            f"{row['caused_wait_ns'] / 1e6:.3f} ms"
        )
    return out


def check_by(by: str) -> None:
    """Refuse a ``by`` other than those of :data:`BY`."""
    if by not in BY:
        raise UsageError(f"--by must be one of {', '.join(BY)}, not {by!r}")


def collectives(
    src: Catalog,
    ids: list[str],
    *,
    by: str = CollectivesOptions.by,
    link: str | None = CollectivesOptions.link,
    link_peak_gbps: float | None = CollectivesOptions.link_peak_gbps,
) -> pl.DataFrame:
    """Collectives matched across the ranks ``ids`` of a job, largest wait first.

    ``by="collective"``: one row per (process group, sequence) with skew_ns, last_rank,
    comm_ns, algbw_gbps, busbw_gbps, wait_ns and pct_of_link_peak (``collective_matches``
    of ``sql/79_collectives.sql``; links: ``sql/79_link_peaks.sql``, or ``link`` /
    ``link_peak_gbps``); ``by="rank"``: one row per rank with collectives, late and its
    own wait_ns (``collective_rank_waits``). ``ids``: see
    :meth:`tracewh.api.Warehouse.job_runs`.

    Examples
    --------
    >>> Warehouse("wh").collectives(["latest"], by="rank")  # doctest: +SKIP
    """
    check_by(by)
    if by == "rank":
        return shape(by_wait(src.call("collective_rank_waits", ids)), by)
    matches = src.call("collective_matches", ids)
    info = src.sql(
        "SELECT rank, host, device_name FROM runs WHERE list_contains($ids, run_id)",
        {"ids": ids},
    )
    peaks = src.sql("SELECT * FROM link_peaks")
    out = with_link_peak(matches, info, peaks, link=link, link_peak_gbps=link_peak_gbps)
    return shape(by_wait(out), by)
