"""The roofline: achieved FLOP/s and bytes/s per CPU operator against the device's peaks.

Definitions live in SQL: ``sql/74_perf_helpers.sql`` and ``sql/75_perfmodel.sql`` (FLOPs and
bytes per call of an operator, from the trace's ``Input Dims``, ``Input type``, ``Input
Strides`` and ``Concrete Inputs``), ``sql/77_device_peaks.sql`` (the peak table and how a
trace's ``deviceProperties`` name is matched) and ``sql/78_roofline.sql`` (which operator a GPU
op's time is attributed to, the rates, the bound). This module checks and converts the
options, resolves runs, restricts the tables to the partitions a question needs and filters
rows by operator name.

Units: ``flops`` and ``bytes`` are per call; ``gpu_ns`` is the total over the calls;
``tflops_per_s`` is 1e12 FLOP/s, ``tb_per_s`` 1e12 bytes/s, ``intensity`` FLOP per byte,
``pct_of_peak`` percent of the bounding peak.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import polars as pl

from tracewh.core.errors import UsageError
from tracewh.query.options import RooflineOptions
from tracewh.query.runsel import parse_since

if TYPE_CHECKING:
    from tracewh.query.runsel import Catalog, RunRef, RunSelector

#: Roof labels a per-dtype ``peak_tflops`` override may name (see ``op_work.roof``).
ROOFS: tuple[str, ...] = ("vector", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")

#: The columns of a roofline row, in order (``roofline_runs`` minus ``run_id``).
COLUMNS: tuple[str, ...] = (
    "op_name", "input_dims", "dtype", "family", "params", "calls", "kernels", "flops", "bytes",
    "gpu_ns", "tflops_per_s", "tb_per_s", "intensity", "roof", "peak_tflops", "peak_tbs",
    "ridge", "bound", "pct_of_peak", "above_peak", "non_contiguous", "device", "note",
)

PeakTflops = float | Mapping[str, float]

_PAIR_RE = re.compile(r"^\s*([a-z0-9]+)\s*=\s*([^,=]+?)\s*$", re.IGNORECASE)


def _positive(what: str, value: float) -> float:
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{what} must be a positive number, not {value!r}")
    return float(value)


def parse_peak_tflops(text: str) -> PeakTflops:
    """Parse a ``--peak-tflops`` value: one number, or ``ROOF=N`` pairs separated by commas.

    Parameters
    ----------
    text
        ``989`` (the compute roof of every row, TFLOP/s) or ``bf16=989,vector=67`` (per roof
        label: vector, fp32, tf32, fp16, bf16, fp8, int8).

    Returns
    -------
    float or dict
        The single roof, or the roofs by label.

    Raises
    ------
    UsageError
        On anything else (an unknown label, a value that is not a positive number).

    Examples
    --------
    >>> parse_peak_tflops("bf16=989, fp8=1979")
    {'bf16': 989.0, 'fp8': 1979.0}
    """
    try:
        return _positive("--peak-tflops", float(text))
    except ValueError:
        pass
    out: dict[str, float] = {}
    for part in text.split(","):
        m = _PAIR_RE.match(part)
        if not m:
            raise UsageError(
                f"--peak-tflops expects a number or ROOF=TFLOPS pairs (e.g. bf16=989,fp32=67), not {text!r}"
            )
        out[m.group(1).lower()] = _parse_number("--peak-tflops", m.group(2))
    return check_peak_tflops(out)


def _parse_number(what: str, text: str) -> float:
    try:
        return _positive(what, float(text))
    except ValueError as exc:
        raise UsageError(f"{what}: {text!r} is not a number") from exc


def check_peak_tflops(peak: PeakTflops) -> PeakTflops:
    """Validate a compute-peak override (a positive number or positive numbers by roof label)."""
    if isinstance(peak, Mapping):
        unknown = sorted(set(peak) - set(ROOFS))
        if unknown:
            raise UsageError(
                f"unknown roof {', '.join(unknown)} in --peak-tflops (roofs: {', '.join(ROOFS)})"
            )
        if not peak:
            raise UsageError("--peak-tflops names no roof")
        return {k: _positive(f"--peak-tflops {k}", float(v)) for k, v in peak.items()}
    return _positive("--peak-tflops", float(peak))


def _sql_peaks(
    peak_tflops: PeakTflops | None, peak_tbs: float | None
) -> dict[str, str | float | None]:
    """The macro parameters: peak_tflops as text (a number or a JSON object), peak_tbs as a number."""
    tflops: str | None = None
    if peak_tflops is not None:
        checked = check_peak_tflops(peak_tflops)
        tflops = json.dumps(checked) if isinstance(checked, Mapping) else repr(checked)
    tbs = _positive("--peak-tbs", float(peak_tbs)) if peak_tbs is not None else None
    return {"peak_tflops": tflops, "peak_tbs": tbs}


def roofline(
    wh: Catalog,
    run: RunSelector = "latest",
    *,
    op: str | None = RooflineOptions.op,
    top: int | None = None,
    peak_tflops: PeakTflops | None = None,
    peak_tbs: float | None = RooflineOptions.peak_tbs,
) -> pl.DataFrame:
    """The roofline rows of one run (``roofline`` of ``sql/78_roofline.sql``), by GPU time.

    Parameters
    ----------
    wh
        The warehouse.
    run
        A run selector.
    op
        Keep operators whose name matches (glob with ``* ? [``, else substring; any case).
    top
        Keep the first ``top`` rows (after ``op``).
    peak_tflops
        Compute roof override: one number for every row, or numbers by roof label.
    peak_tbs
        Memory roof override (TB/s).

    Returns
    -------
    polars.DataFrame
        One row per (operator, Input Dims, dtype, params, note): the :data:`COLUMNS`.
    """
    if top is not None and top < 1:
        raise UsageError("--top must be at least 1")
    params = _sql_peaks(peak_tflops, peak_tbs)
    ref = wh.resolve_run(run)
    df = wh.call("roofline", ref.run_id, days=_days(wh, [ref]), op_pattern=op, **params)
    return df.head(top) if top else df


def roofline_runs(wh: Catalog, runs: Sequence[RunSelector]) -> dict[str, pl.DataFrame]:
    """:func:`roofline` of each run (default options), by run_id, from one query.

    ``roofline_runs`` of ``sql/78_roofline.sql`` over all of them: the macros are planned once
    (on a small run, planning is most of the roofline's time), not once per run. Each frame
    equals ``roofline(wh, run)``: the same rows in the same order (``roofline``'s: by GPU time,
    then name, shapes, params, dtype and note).
    """
    refs = list({ref.run_id: ref for ref in (wh.resolve_run(r) for r in runs)}.values())
    if not refs:
        return {}
    params = _sql_peaks(None, None)
    df = wh.sql(
        "SELECT * FROM roofline_runs($ids, peak_tflops := $peak_tflops, peak_tbs := $peak_tbs) "
        "ORDER BY run_id, gpu_ns DESC, op_name, input_dims, params, dtype, note",
        {"ids": [ref.run_id for ref in refs], **params}, days=_days(wh, refs),
    )
    parts = {str(key[0]): part.drop("run_id")
             for key, part in df.partition_by("run_id", as_dict=True, maintain_order=True).items()}
    empty = df.clear().drop("run_id")
    return {ref.run_id: parts.get(ref.run_id, empty) for ref in refs}


def _days(wh: Catalog, refs: Sequence[RunRef]) -> set[dt.date]:
    """The day partitions the roofline of ``refs`` reads: theirs and, for a graph replay, the
    days of its job's captures and replays (its kernels are attributed to the operators of the
    trace that captured the graph, which may be of another day; as the per-run macros of
    graphs read them: Session.run_conn)."""
    replays = wh.sql(
        "SELECT DISTINCT day FROM runs WHERE kind IN ('capture', 'replay') AND job IN "
        "(SELECT job FROM runs WHERE list_contains($ids, run_id) AND kind = 'replay')",
        {"ids": [ref.run_id for ref in refs]}, days=set())
    return {ref.day for ref in refs} | set(replays["day"].to_list())


def roofline_history(
    wh: Catalog,
    *,
    op: str | None = None,
    since: str | dt.date | None = None,
    where: Mapping[str, str] | None = None,
    peak_tflops: PeakTflops | None = None,
    peak_tbs: float | None = None,
) -> pl.DataFrame:
    """One row per run (oldest first): achieved TFLOP/s and TB/s of the matched operators.

    ``roofline_history`` of ``sql/78_roofline.sql`` over the runs of day ``since`` or later,
    restricted to the runs with labels/fields ``where``.
    """
    params = _sql_peaks(peak_tflops, peak_tbs)
    day = parse_since(since) if since is not None else None
    df = wh.sql(
        "SELECT * FROM roofline_history(op_pattern := $op, since := $since, "
        "peak_tflops := $peak_tflops, peak_tbs := $peak_tbs)",
        {"op": op, "since": day, **params},
        since=day,
    )
    if where:
        keep = set(wh.runs(where=where)["run_id"].to_list())
        df = df.filter(pl.col("run_id").is_in(list(keep)))
    return df


def flag_above_peak(df: pl.DataFrame, *, column: str = "pct_of_peak") -> pl.DataFrame:
    """``df`` with ``column`` as display text: one decimal, and ``! above peak`` after any
    figure over 100 % (``above_peak``), so that no screen shows it as a plain number.

    For terminal and report tables only: CSV, JSON and ``--out`` keep the number and the
    ``above_peak`` flag, and the ``note`` names the likely cause.
    """
    if column not in df.columns:
        return df
    value = pl.col(column).cast(pl.Float64).round(1).cast(pl.String)
    return df.with_columns(
        pl.when(pl.col(column) > 100).then(value + pl.lit(" ! above peak")).otherwise(value).alias(column))


