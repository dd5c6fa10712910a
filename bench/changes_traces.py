"""Trace-level part of the change-point benchmark: `tracewh synth --runs N --regress ...`.

``build_histories`` writes nightly histories of the synthetic model (one per seed, each its
own ``model`` label, 0, 1 or 2 regressions of known kernels on known nights, ``synth``'s
own per-night noise), ingests them into one warehouse, and returns the truth: for each
history the kernel names each regression touches and its first night. ``score_warehouse``
runs ``Warehouse.changes`` over every kernel series and scores kernel changes against the
truth (a change on an untouched kernel, or on another night, is a false positive), and gives
Otava the same kernel series (``series_values``: time per step of each kernel key).
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from bench.changes_series import Score
from tracewh.api import Warehouse
from tracewh.synth import Regression, SynthConfig, write_history

START = dt.date(2024, 6, 1)
PATTERNS = ("flash_fwd", "*gemm*", "layer_norm", "softmax", "nccl")


def _matches(pattern: str, name: str) -> bool:
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(name, pattern)
    return pattern in name


def build_histories(
    work: Path, *, histories: int, nights: int
) -> tuple[Warehouse, dict[str, list[tuple[str, dt.date]]]]:
    """Histories ``h0..`` with 0-2 regressions each; the truth is (pattern, night) per model."""
    wh = Warehouse(work / "wh")
    truth: dict[str, list[tuple[str, dt.date]]] = {}
    paths = []
    for h in range(histories):
        rng = random.Random(f"traces:{h}")
        k = h % 3
        regs = []
        for pat in rng.sample(PATTERNS, k):
            night = START + dt.timedelta(days=rng.randint(8, nights - 6))
            regs.append(Regression(pat, rng.choice((-1, 1)) * rng.uniform(0.10, 0.30), night))
        model = f"h{h}"
        truth[model] = [(r.pattern, r.since) for r in regs]
        out = work / model
        if not (out / "DONE").exists():
            write_history(out, SynthConfig(steps=3, layers=2, model=model, seed=100 + h,
                                           noise=rng.uniform(0.01, 0.05)),
                          runs=nights, start=START, regressions=regs)  # fmt: skip
            (out / "DONE").write_text("")
        paths.append(out)
    report = wh.ingest(paths, jobs=2)
    if report.failed:
        raise RuntimeError(f"ingest failed: {report.to_dict()['failed'][:3]}")
    return wh, truth


def _truth_hits(truth: list[tuple[str, dt.date]], name: str, day: dt.date) -> bool:
    return any(_matches(p, name) and d == day for p, d in truth)


def score_warehouse(
    wh: Warehouse,
    truth: dict[str, list[tuple[str, dt.date]]],
    *,
    otava: Callable[[Sequence[Sequence[float]]], tuple[list[list[int]], float]] | None = None,
) -> dict[str, Any]:
    """tracewh's and Otava's kernel changes against the injected regressions."""
    t0 = time.perf_counter()
    rep = wh.changes(since=None, min_ms=0.0)
    secs = time.perf_counter() - t0
    rows = [r for r in rep.to_dicts() if r["metric"] == "kernel"]
    runs = wh.runs().select("run_id", "day", "start_ns", "labels_json", "workload")
    model = dict(zip(runs["run_id"].to_list(), runs["labels_json"].str.json_path_match("$.model")
                     .to_list(), strict=True))  # fmt: skip
    values = wh.sql("SELECT run_id, key, name, value FROM series_values() WHERE metric = 'kernel'")
    series = values.join(runs, on="run_id").with_columns(
        pl.col("labels_json").str.json_path_match("$.model").alias("model")
    ).sort("start_ns")
    # every (model, kernel key) series with its names and days
    groups = series.group_by(["model", "key"], maintain_order=True).agg(
        pl.col("name").first(), pl.col("day"), pl.col("value"))
    n_changes = 0
    expected: set[tuple[str, str, dt.date]] = set()
    for m, key, name, days, _ in groups.iter_rows():
        for p, d in truth.get(m, []):
            if _matches(p, name) and d in days:
                expected.add((m, key, d))
    n_changes = len(expected)

    def score(found: set[tuple[str, str, dt.date]]) -> tuple[Score, Score]:
        sc, sc1 = Score(), Score()
        for s, tol in ((sc, 0), (sc1, 1)):
            hit = {f for f in found if any(e[0] == f[0] and e[1] == f[1]
                   and abs((e[2] - f[2]).days) <= tol for e in expected)}  # fmt: skip
            s.tp = len(hit)
            s.fp = len(found) - len(hit)
            s.fn = n_changes - len(hit)
            quiet = [m for m in truth if not truth[m]]
            s.quiet = len(quiet)
            s.quiet_alarmed = len({f[0] for f in found if f[0] in quiet})
        return sc, sc1

    ours = {(model[r["run_id"]], r["key"], dt.date.fromisoformat(r["day"])) for r in rows}
    out_rows = [("tracewh", *score(ours), secs)]
    if otava is not None:
        seqs = [list(v) for *_, v in groups.iter_rows()]
        found, osecs = otava(seqs)
        theirs = {(m, key, days[i]) for (m, key, _, days, _), idx in zip(groups.iter_rows(), found,
                  strict=True) for i in idx}  # fmt: skip
        out_rows.append(("Otava 0.8 (defaults)", *score(theirs), osecs))
    return {"series": groups.height, "changes": n_changes, "rows": out_rows}
