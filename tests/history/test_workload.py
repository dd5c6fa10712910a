"""tracewh.history.workload: the workload assignment against a plain all-pairs loop."""

from __future__ import annotations

import random

import polars as pl

from tracewh.history.workload import assign_workloads


def _naive(sigs: list[list[int] | None], threshold: float) -> list[tuple[str, float | None]]:
    """Each run joins the earliest of the most similar earlier runs (every pair compared)."""
    out: list[tuple[str, float | None]] = []
    for i, sig in enumerate(sigs):
        if sig is None:
            out.append((f"run:r{i:04d}", None))
            continue
        best, best_sim = None, -1.0
        for j in range(i):
            other = sigs[j]
            if other is None:
                continue
            sim = sum(a == b for a, b in zip(sig, other, strict=True)) / len(sig)
            if sim > best_sim:
                best, best_sim = j, sim
        if best is not None and best_sim >= threshold:
            out.append((out[best][0], best_sim))
        else:
            out.append((f"fp:r{i:04d}"[:11], None))
    return out


def test_assignment_equals_comparing_every_earlier_run() -> None:
    rng = random.Random(7)
    width = 16
    bases = [[rng.getrandbits(20) for _ in range(width)] for _ in range(5)]
    sigs: list[list[int] | None] = []
    for _ in range(300):
        roll = rng.random()
        if roll < 0.05:
            sigs.append(None)
            continue
        sig = list(rng.choice(bases))
        if roll < 0.5:  # a drifted signature: some slots differ
            for k in rng.sample(range(width), rng.randint(1, 12)):
                sig[k] = rng.getrandbits(20)
        sigs.append(sig)
    runs = pl.DataFrame({
        "run_id": [f"r{i:04d}" for i in range(len(sigs))],
        "start_ns": list(range(len(sigs))), "labels_json": [None] * len(sigs),
        "job": ["j"] * len(sigs), "device_name": ["H100"] * len(sigs),
        "backend": ["cuda"] * len(sigs), "rank": [0] * len(sigs), "world_size": [1] * len(sigs),
        "minhash": sigs,
    }, schema_overrides={"minhash": pl.List(pl.Int64), "labels_json": pl.String})  # fmt: skip
    got = assign_workloads(runs).sort("run_id")
    want = _naive(sigs, 0.5)
    assert got["workload"].to_list() == [w for w, _ in want]
    assert got["similarity"].to_list() == [s for _, s in want]
