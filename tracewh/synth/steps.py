"""One simulated step rendered as a template (:func:`build_step`), from :mod:`tracewh.synth.timeline`."""

from __future__ import annotations

import math
import random

from tracewh.synth.flavors import FlavorSpec, Op
from tracewh.synth.timeline import EXT, STEP, Scales, Sim, StepTemplate, Text

__all__ = ["build_step"]


def build_step(
    program: tuple[Op, ...],
    f: FlavorSpec,
    *,
    rng: random.Random,
    scales: Scales,
    pid: int,
    device: int,
    python: bool,
    memory: bool,
    profiler_step: bool = True,
) -> StepTemplate:
    """Simulate one step of ``program`` and render it as a :class:`StepTemplate`.

    ``profiler_step``: wrap it in a ``ProfilerStep#N`` span (else no step span at all).
    """
    sim = Sim(f, rng, scales, pid, device, python, memory)
    sim.ext = 1  # External id 1 is the ProfilerStep span
    for op in program:
        sim.run_op(op)
    sim.free_live()
    cpu_end = sim.t + 5_000

    def name(o: Text) -> None:
        o.lit('"ProfilerStep#')
        o.slot(0, STEP)
        o.lit('"')

    def args(o: Text) -> None:
        o.lit('"External id": ')
        o.slot(1, EXT)

    if profiler_step:
        sim.add(sim.cpu, 0, "user_annotation", sim.x_event("user_annotation", name, 0, cpu_end, args))
    end = max([cpu_end, *sim.free.values()])
    gap = int(rng.uniform(250_000, 650_000))
    out = Text()
    for bucket in (sim.cpu, sim.gpu):
        for _, _, emit in sorted(bucket, key=lambda e: (e[0], e[1])):
            emit(out)
    fmt = "".join(out.parts)
    tpl = StepTemplate(fmt, tuple(out.base), tuple(out.kinds), math.ceil((end + gap) / 1000),
                       (sim.ext, sim.corr, sim.pyid), dict(sim.counts), 0, sim.leaked)
    size = len(tpl.render(0, 0, 0, 0, 0))
    return StepTemplate(tpl.fmt, tpl.base, tpl.kinds, tpl.span_us, tpl.ids, tpl.counts, size, sim.leaked)
