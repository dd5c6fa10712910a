"""The fleet-history warehouses of ``bench_fleet``: nightly runs of 3 workloads on 2 ranks.

A warehouse of ``N`` runs holds ``N / 6`` nights; each night, each of three workloads
(``dit-s``, ``dit-b``, ``dit-l``: the synthetic diffusion model with 2, 3 and 4 transformer
blocks) writes one trace per rank (``tracewh synth``'s nightly history: a few percent of
night-to-night noise per kernel and per night), and the night's six traces are ingested
together, as a nightly job would (one ``Warehouse.ingest`` call per night: one commit and one
small file per run and table). Four regressions are injected (:data:`REGRESSIONS`), each into
both ranks of one workload from a given fraction of the history on; they are the truth
``bench_fleet`` scores ``changes`` against.

The warehouses are built once under ``ROOT/wh-N`` (``ROOT/wh-N/BUILT`` marks one done) and
reused; an interrupted build resumes (re-ingesting the same bytes is a no-op); the traces
are written under ``ROOT/traces-N`` and removed once ingested. The build uses whatever
tracewh is importable: built with an older tracewh, a warehouse is an "existing warehouse"
for ``tracewh migrate``.
"""

from __future__ import annotations

import datetime as dt
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from tracewh.api import Warehouse
from tracewh.synth import Regression, SynthConfig
from tracewh.synth.writer import write_history

START = dt.date(2020, 1, 1)
RANKS = 2
#: nights per ingest call (one call per night took ~3-11 s a night on the shared 2-core machine)
NIGHTS_PER_INGEST = 10
#: (model, transformer blocks): the three workloads
WORKLOADS: tuple[tuple[str, int], ...] = (("dit-s", 2), ("dit-b", 3), ("dit-l", 4))


@dataclass(frozen=True)
class Injected:
    """One injected regression: a kernel pattern of one workload, slower from a night on."""

    model: str
    pattern: str
    factor: float
    at: float  # fraction of the history: the first slowed night is START + at * nights

    def night(self, nights: int) -> dt.date:
        return START + dt.timedelta(days=int(self.at * nights))


#: the four regressions (truth of the precision score)
REGRESSIONS: tuple[Injected, ...] = (
    Injected("dit-s", "flash_fwd", 0.25, 0.35),
    Injected("dit-b", "vectorized_layer_norm", 0.40, 0.55),
    Injected("dit-l", "s1688gemm_256x128", 0.15, 0.30),
    Injected("dit-l", "softmax_warp", 0.50, 0.70),
)


def nights_of(n_runs: int) -> int:
    return n_runs // (len(WORKLOADS) * RANKS)


def build(root: Path, n_runs: int, *, log: bool = True) -> Path:
    """The warehouse of ``n_runs`` runs under ``root/wh-<n_runs>`` (built once)."""
    wh_root = root / f"wh-{n_runs}"
    if (wh_root / "BUILT").exists():
        return wh_root
    nights = nights_of(n_runs)
    traces = root / f"traces-{n_runs}"
    t0 = time.perf_counter()
    for model, layers in WORKLOADS:
        if (traces / model / "DONE").exists():
            continue
        regs = [Regression(r.pattern, r.factor, r.night(nights)) for r in REGRESSIONS
                if r.model == model]  # fmt: skip
        cfg = SynthConfig(steps=4, layers=layers, ranks=RANKS, model=model,
                          seed=len(model) * 7 + layers, noise=0.03)  # fmt: skip
        write_history(traces / model, cfg, runs=nights, start=START, regressions=regs)
        (traces / model / "DONE").write_text("ok\n")
    if log:
        print(f"  synth: {nights} nights x {len(WORKLOADS)} workloads x {RANKS} ranks "
              f"in {time.perf_counter() - t0:.0f} s", flush=True)  # fmt: skip
    wh = Warehouse(wh_root)
    t1 = time.perf_counter()
    for i in range(0, nights, NIGHTS_PER_INGEST):
        days = [(START + dt.timedelta(days=j)).isoformat()
                for j in range(i, min(i + NIGHTS_PER_INGEST, nights))]
        report = wh.ingest([traces / m / d for d in days for m, _ in WORKLOADS], jobs=1)
        if not report.ok:
            raise RuntimeError(f"fleet ingest of {days[0]}.. failed: {report.to_dict()}")
        if log and (i // NIGHTS_PER_INGEST) % 10 == 9:
            print(f"  ingested {i + len(days)}/{nights} nights ({time.perf_counter() - t1:.0f} s)",
                  flush=True)  # fmt: skip
    shutil.rmtree(traces)
    (wh_root / "BUILT").write_text(f"{n_runs} runs, built in {time.perf_counter() - t0:.0f} s\n")
    return wh_root
