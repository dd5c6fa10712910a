"""One capture, driven a step at a time: :class:`Session`.

A session runs a fixed plan of steps, each one bracketed by :meth:`Session.begin`
and :meth:`Session.end`:

1. the **recorded window**: ``wait + warmup + steps`` steps under one
   ``torch.profiler.profile`` with ``schedule(wait, warmup, active=steps)``;
   the trace is exported (to a hidden temporary file) when it ends;
2. the **overhead rounds** (:mod:`tracewh.capture.overhead`): ``U T U … T U``,
   each one untimed step then ``round_steps`` timed ones; a traced round runs
   under a fresh profiler with the same flags (``schedule(0, 1, round_steps)``,
   its events discarded), so it costs what the recorded window cost.

Every step runs inside a ``record_function`` span named :data:`STEP_SPAN`, in
every phase (without a profiler the span costs about a microsecond). A step's
time is wall time from ``begin`` to ``end``, with the device synchronised at both
ends when CUDA/HIP is recorded. When the plan is complete (or :meth:`Session.close`
is called after the recorded window), ``run.json`` is written, then the trace is
renamed to its final name, so ingest never sees a trace without its labels.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tracewh.capture.environment import environment_labels, quiet_stderr
from tracewh.capture.options import STEP_SPAN, CaptureOptions, LabelValue
from tracewh.capture.overhead import Clock, OverheadEstimate, Round, estimate_overhead
from tracewh.core.errors import CaptureError

SIDECAR = "run.json"
INSTALL_HINT = "install the extra: pip install 'tracewh[capture]' (or pip install torch)"

PhaseKind = Literal["record", "untraced", "traced"]


@dataclass(frozen=True)
class CaptureResult:
    """What a capture wrote and measured.

    Attributes
    ----------
    trace_path
        The gzipped Kineto trace.
    sidecar_path
        The ``run.json`` next to it.
    labels
        The labels written to ``run.json`` (what ingest stores in ``runs.labels_json``).
    step_ns_recorded
        Wall time of each recorded step (the trace's steps), in ns.
    rounds
        The overhead rounds as timed, in time order (empty without them).
    overhead
        The overhead estimate with its interval, or None without rounds.
    steps_run
        Steps the capture ran (recorded window and rounds).
    """

    trace_path: Path
    sidecar_path: Path
    labels: Mapping[str, LabelValue]
    step_ns_recorded: tuple[int, ...]
    rounds: tuple[Round, ...]
    overhead: OverheadEstimate | None
    steps_run: int

    @property
    def overhead_pct(self) -> float | None:
        """The profiler overhead in % (median ratio - 1), or None without rounds."""
        return None if self.overhead is None else self.overhead.pct


@dataclass
class _Phase:
    kind: PhaseKind
    steps: int
    untimed: int
    times: list[int]
    cpu_times: list[int]


def import_torch() -> tuple[Any, Any]:
    """``torch`` and ``torch.profiler``, or a :class:`CaptureError` saying how to install them."""
    try:
        torch = importlib.import_module("torch")
        profiler = importlib.import_module("torch.profiler")
    except ImportError as exc:
        raise CaptureError(f"tracewh.capture needs PyTorch ({exc}); {INSTALL_HINT}") from exc
    return torch, profiler


def _plan(options: CaptureOptions) -> list[_Phase]:
    phases = [_Phase("record", options.recorded_window, options.wait + options.warmup, [], [])]
    for i in range(2 * options.overhead_rounds + 1 if options.overhead_rounds else 0):
        kind: PhaseKind = "untraced" if i % 2 == 0 else "traced"
        phases.append(_Phase(kind, 1 + options.round_steps, 1, [], []))
    return phases


class Session:
    """The state of one capture; see the module docstring for the plan it runs.

    Parameters
    ----------
    out_dir
        Directory for the trace and ``run.json`` (created; must not hold a ``run.json``).
    options
        What to profile.
    context
        Extra keys for ``run.json``'s ``capture`` section (e.g. the command line).
    """

    def __init__(
        self, out_dir: Path, options: CaptureOptions, *, context: Mapping[str, Any] | None = None
    ) -> None:
        self.out_dir = out_dir
        self.options = options
        self.context = dict(context or {})
        self._torch: Any = None
        self._pm: Any = None
        self._cuda = False
        self._phases = _plan(options)
        self._phase = 0
        self._in_phase = 0
        self._steps_run = 0
        self._prof: Any = None
        self._span: Any = None
        self._t0 = 0
        self._c0 = 0
        self._saving = False
        self._tmp_trace: Path | None = None
        self._result: CaptureResult | None = None
        self._opened = False

    # ------------------------------------------------------------------ state
    @property
    def done(self) -> bool:
        """True once the trace and ``run.json`` are written."""
        return self._result is not None

    @property
    def result(self) -> CaptureResult:
        """What was written and measured; a :class:`CaptureError` before :attr:`done`."""
        if self._result is None:
            raise CaptureError("the capture is not finished yet", path=self.out_dir)
        return self._result

    @property
    def steps_run(self) -> int:
        """Steps ended so far."""
        return self._steps_run

    @property
    def clock(self) -> Clock:
        """The clock the overhead rounds compare (``auto`` resolved once the device is known)."""
        if self.options.clock != "auto":
            return self.options.clock
        return "wall" if self._cuda else "cpu"

    @property
    def in_step(self) -> bool:
        """True between :meth:`begin` and :meth:`end`."""
        return self._span is not None

    @property
    def recorded(self) -> bool:
        """True once the recorded window is complete (the trace is exported)."""
        return self._phase > 0

    # ------------------------------------------------------------- protocol
    def open(self) -> None:
        """Check the directory, import torch, pick the device; call once before any step."""
        if self._opened:
            raise CaptureError("a capture can be started only once", path=self.out_dir)
        self._opened = True
        if (self.out_dir / SIDECAR).exists():
            raise CaptureError(
                f"already holds a {SIDECAR} (it labels every trace in the directory): "
                "capture into a fresh directory",
                path=self.out_dir,
            )
        self._torch, self._pm = import_torch()
        available = bool(self._torch.cuda.is_available())
        if self.options.cuda and not available:
            raise CaptureError("cuda=True but torch.cuda.is_available() is False")
        self._cuda = available if self.options.cuda is None else self.options.cuda
        self.out_dir.mkdir(parents=True, exist_ok=True)

    def begin(self) -> None:
        """Start a step: start the phase's profiler if it is the phase's first step, time it."""
        if self._result is not None:
            return
        if not self._opened or self._span is not None:
            raise CaptureError("begin() without open(), or twice in a row", path=self.out_dir)
        phase = self._phases[self._phase]
        if self._in_phase == 0 and phase.kind != "untraced":
            with quiet_stderr(phase.kind == "traced"):
                self._start_profiler(phase)
        self._span = self._pm.record_function(STEP_SPAN)
        self._span.__enter__()
        self._sync()
        self._t0 = time.perf_counter_ns()
        self._c0 = time.thread_time_ns()

    def end(self) -> bool:
        """End the step begun last; True when the capture is complete (files written)."""
        if self._result is not None:
            return True
        if self._span is None:
            raise CaptureError("end() without begin()", path=self.out_dir)
        self._sync()
        elapsed = time.perf_counter_ns() - self._t0
        cpu = time.thread_time_ns() - self._c0
        self._span.__exit__(None, None, None)
        self._span = None
        phase = self._phases[self._phase]
        if self._in_phase >= phase.untimed:
            phase.times.append(elapsed)
            phase.cpu_times.append(cpu)
        self._in_phase += 1
        self._steps_run += 1
        with quiet_stderr(phase.kind == "traced"):
            if self._prof is not None:
                self._saving = phase.kind == "record" and self._in_phase == phase.steps
                self._prof.step()
            if self._in_phase == phase.steps:
                self._stop_profiler()
        if self._in_phase == phase.steps:
            self._phase += 1
            self._in_phase = 0
            if self._phase == len(self._phases):
                self._finish()
                return True
        return False

    def close(self) -> CaptureResult | None:
        """Stop early: write what was measured if the trace is recorded, else clean up.

        Returns the result (also when already complete), or None when the
        recorded window did not finish (nothing is written then).
        """
        if self._result is not None:
            return self._result
        if self._phase == 0:
            self.discard()
            return None
        self._close_span()
        self._stop_profiler()
        self._finish()
        return self._result

    def discard(self) -> None:
        """Stop without writing anything (after an error); a no-op once :attr:`done`."""
        if self._result is not None:
            return
        self._close_span()
        self._stop_profiler()
        if self._tmp_trace is not None:
            self._tmp_trace.unlink(missing_ok=True)
            self._tmp_trace = None

    # ------------------------------------------------------------ internals
    def _close_span(self) -> None:
        if self._span is not None:
            span, self._span = self._span, None
            span.__exit__(None, None, None)

    def _sync(self) -> None:
        if self._cuda:
            self._torch.cuda.synchronize()

    def _start_profiler(self, phase: _Phase) -> None:
        opts, pm = self.options, self._pm
        activities = [pm.ProfilerActivity.CPU]
        if self._cuda:
            activities.append(pm.ProfilerActivity.CUDA)  # covers HIP on ROCm builds
        if phase.kind == "record":
            sched = pm.schedule(wait=opts.wait, warmup=opts.warmup, active=opts.steps, repeat=1)
        else:
            sched = pm.schedule(wait=0, warmup=1, active=opts.round_steps, repeat=1)
        self._prof = pm.profile(
            activities=activities,
            schedule=sched,
            on_trace_ready=self._export if phase.kind == "record" else None,
            record_shapes=opts.record_shapes,
            with_stack=opts.with_stack,
            profile_memory=opts.profile_memory,
            with_modules=opts.with_modules,
        )
        self._prof.start()

    def _stop_profiler(self) -> None:
        if self._prof is not None:
            self._saving = False
            prof, self._prof = self._prof, None
            prof.stop()

    def _export(self, prof: Any) -> None:
        """``on_trace_ready``: export to a hidden temporary file (ingest skips hidden files)."""
        if not self._saving:
            return
        name = f".{socket.gethostname()}_{os.getpid()}.{time.time_ns()}.partial.gz"
        self._tmp_trace = self.out_dir / name
        prof.export_chrome_trace(str(self._tmp_trace))

    def _rounds(self) -> list[Round]:
        rounds = [
            Round(p.kind, tuple(p.times), tuple(p.cpu_times))
            for p in self._phases[1:]
            if p.kind != "record"
        ]
        while rounds and not rounds[-1].step_ns:
            rounds.pop()
        return rounds

    def _finish(self) -> None:
        if self._tmp_trace is None:
            raise CaptureError("the profiler produced no trace", path=self.out_dir)
        final = self.out_dir / (
            self._tmp_trace.name[1:].removesuffix(".partial.gz") + ".pt.trace.json.gz"
        )
        rounds = self._rounds()
        overhead = (
            estimate_overhead(rounds, clock=self.clock, planned=self.options.overhead_rounds)
            if self.options.overhead_rounds
            else None
        )
        recorded = tuple(self._phases[0].times)
        labels = self._labels(recorded, rounds, overhead)
        opts = self.options
        doc = {
            "labels": labels,
            "capture": {
                "trace": final.name,
                "step_span": STEP_SPAN,
                "steps": opts.steps,
                "wait": opts.wait,
                "warmup": opts.warmup,
                "steps_run": self._steps_run,
                "step_ns_recorded": list(recorded),
                "overhead_rounds": opts.overhead_rounds,
                "round_steps": opts.round_steps,
                "clock": self.clock,
                "rounds": [r.to_dict() for r in rounds],
                "overhead": overhead.to_dict() if overhead is not None else None,
                "activities": ["CPU", "CUDA"] if self._cuda else ["CPU"],
                "device_sync": self._cuda,
                **self.context,
            },
        }
        sidecar = self.out_dir / SIDECAR
        tmp_sidecar = self.out_dir / f".{SIDECAR}.partial"
        tmp_sidecar.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp_sidecar, sidecar)
        os.replace(self._tmp_trace, final)
        self._tmp_trace = None
        self._result = CaptureResult(
            trace_path=final,
            sidecar_path=sidecar,
            labels=labels,
            step_ns_recorded=recorded,
            rounds=tuple(rounds),
            overhead=overhead,
            steps_run=self._steps_run,
        )

    def _labels(
        self, recorded: tuple[int, ...], rounds: list[Round], overhead: OverheadEstimate | None
    ) -> dict[str, LabelValue]:
        opts = self.options
        labels = environment_labels(self._torch, self._cuda)
        if opts.model_name is not None:
            labels["model"] = opts.model_name
        labels.update(
            {
                "steps_profiled": opts.steps,
                "step_span": STEP_SPAN,
                "record_shapes": opts.record_shapes,
                "with_stack": opts.with_stack,
                "with_modules": opts.with_modules,
                "profile_memory": opts.profile_memory,
                "step_ns_median_recorded": round(statistics.median(recorded)),
            }
        )
        for kind in ("untraced", "traced"):
            times = [t for r in rounds if r.kind == kind for t in r.step_ns]
            if times:
                labels[f"step_ns_median_{kind}"] = round(statistics.median(times))
        if overhead is not None:
            labels["profiler_overhead_pct"] = round(overhead.pct, 2)
            if overhead.ci_low_pct is not None and overhead.ci_high_pct is not None:
                labels["profiler_overhead_ci_low_pct"] = round(overhead.ci_low_pct, 2)
                labels["profiler_overhead_ci_high_pct"] = round(overhead.ci_high_pct, 2)
            labels["profiler_overhead_reliable"] = overhead.reliable
            labels["profiler_overhead_clock"] = overhead.clock
        labels.update(opts.labels)
        return labels
