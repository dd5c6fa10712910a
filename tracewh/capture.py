"""Profile a few steps of a PyTorch model the way the warehouse expects.

:func:`profile_steps` runs a step function under ``torch.profiler`` and
:func:`capture` does the same for a training loop that calls ``cap.step()``.
Both write one Kineto trace, ``<out_dir>/<host>_<pid>.<time_ns>.pt.trace.json.gz``,
and a ``run.json`` sidecar that ``tracewh ingest`` reads as the run's labels.

They also measure the profiler's own cost: the same number of steps is timed
without the profiler, then with it, and ``run.json`` records both per-step
latency lists and the overhead (median traced / median untraced - 1, in %).

``torch`` is an optional dependency (``pip install 'tracewh[capture]'``) and is
imported only when a capture starts, so importing this module never needs it.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import platform
import socket
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypedDict, Unpack

from tracewh import __version__
from tracewh.errors import CaptureError, UsageError

LabelValue = str | int | float | bool

SIDECAR = "run.json"
INSTALL_HINT = "install the extra: pip install 'tracewh[capture]' (or pip install torch)"


class CaptureKwargs(TypedDict, total=False):
    """Keyword options of :func:`capture` and :func:`profile_steps` (see :class:`CaptureOptions`)."""

    steps: int
    warmup: int
    wait: int
    labels: Mapping[str, LabelValue]
    model_name: str | None
    record_shapes: bool
    with_stack: bool
    profile_memory: bool
    with_modules: bool
    time_untraced: bool
    cuda: bool | None


@dataclass(frozen=True)
class CaptureOptions:
    """What to profile and how.

    Parameters
    ----------
    steps
        Steps recorded by the profiler (and timed without it).
    warmup
        Profiler warm-up steps before recording (at least 1); as many untimed
        steps also precede the untraced timing.
    wait
        Steps skipped by the profiler before its warm-up.
    labels
        Your labels; they override the ones tracewh derives.
    model_name
        Stored as the ``model`` label.
    record_shapes, with_stack, profile_memory, with_modules
        Passed to ``torch.profiler.profile`` (each adds overhead).
    time_untraced
        Time ``steps`` steps without the profiler first, to measure its overhead.
    cuda
        Record CUDA (HIP on ROCm builds) activity and synchronise the device
        around each timing; default: when ``torch.cuda.is_available()``.
    """

    steps: int = 3
    warmup: int = 1
    wait: int = 0
    labels: Mapping[str, LabelValue] = field(default_factory=dict)
    model_name: str | None = None
    record_shapes: bool = True
    with_stack: bool = False
    profile_memory: bool = False
    with_modules: bool = False
    time_untraced: bool = True
    cuda: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", dict(self.labels))
        if self.steps < 1:
            raise UsageError(f"steps must be at least 1, got {self.steps}")
        if self.warmup < 1:
            raise UsageError(
                f"warmup must be at least 1, got {self.warmup}: the first profiled step "
                "otherwise includes the profiler's start-up"
            )
        if self.wait < 0:
            raise UsageError(f"wait must be 0 or more, got {self.wait}")
        for key, value in self.labels.items():
            if not isinstance(key, str) or not key:
                raise UsageError(f"label keys must be non-empty strings, got {key!r}")
            if not isinstance(value, str | int | float | bool):
                raise UsageError(f"label {key!r}: value must be str, int, float or bool")

    @property
    def untraced_warmup(self) -> int:
        """Untimed steps run before the untraced timing (0 without it)."""
        return self.warmup if self.time_untraced else 0

    @property
    def total_steps(self) -> int:
        """Calls to ``step()`` a capture needs before it is done."""
        untraced = self.untraced_warmup + (self.steps if self.time_untraced else 0)
        return untraced + self.wait + self.warmup + self.steps


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
    step_ns_untraced
        Wall time of each timed step without the profiler, in ns (empty when
        ``time_untraced`` is off).
    step_ns_traced
        Wall time of each profiled (active) step, in ns.
    """

    trace_path: Path
    sidecar_path: Path
    labels: Mapping[str, LabelValue]
    step_ns_untraced: tuple[int, ...]
    step_ns_traced: tuple[int, ...]

    @property
    def overhead_pct(self) -> float | None:
        """Profiler overhead in % (see :func:`profiler_overhead_pct`)."""
        return profiler_overhead_pct(self.step_ns_untraced, self.step_ns_traced)


def profiler_overhead_pct(untraced_ns: Sequence[int], traced_ns: Sequence[int]) -> float | None:
    """Profiler overhead: median traced step time / median untraced step time - 1, in %.

    Parameters
    ----------
    untraced_ns, traced_ns
        Per-step wall times in ns, without and with the profiler.

    Returns
    -------
    float or None
        The overhead in percent (negative when traced steps were faster, which
        means noise dominates), or None when either list is empty or the
        untraced median is not positive.

    Examples
    --------
    >>> profiler_overhead_pct([100, 110, 90], [120, 125, 130])
    25.0
    """
    if not untraced_ns or not traced_ns:
        return None
    base = statistics.median(untraced_ns)
    if base <= 0:
        return None
    pct = (statistics.median(traced_ns) / base - 1.0) * 100.0
    return pct if math.isfinite(pct) else None


def _import_torch() -> tuple[Any, Any]:
    """``torch`` and ``torch.profiler``, or a :class:`CaptureError` saying how to install them."""
    try:
        torch = importlib.import_module("torch")
        profiler = importlib.import_module("torch.profiler")
    except ImportError as exc:
        raise CaptureError(f"tracewh.capture needs PyTorch ({exc}); {INSTALL_HINT}") from exc
    return torch, profiler


def _environment_labels(torch: Any, cuda: bool) -> dict[str, LabelValue]:
    """Versions, device and host labels of this process."""
    labels: dict[str, LabelValue] = {
        "torch_version": str(torch.__version__),
        "python_version": platform.python_version(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "captured_by": f"tracewh {__version__}",
    }
    if getattr(torch.version, "cuda", None):
        labels["cuda_version"] = str(torch.version.cuda)
    if getattr(torch.version, "hip", None):
        labels["hip_version"] = str(torch.version.hip)
    if cuda:
        labels["device"] = str(torch.cuda.get_device_name(torch.cuda.current_device()))
        labels["device_count"] = int(torch.cuda.device_count())
    else:
        labels["device"] = "cpu"
    return labels


class Capture:
    """A capture in progress: call :meth:`step` once per step inside ``with``.

    Made by :func:`capture`. The first ``step()`` calls run without the
    profiler (warm-up, then timed steps), the next ones under it (wait,
    warm-up, then ``steps`` profiled steps); once :attr:`done`, the trace and
    ``run.json`` are written and further ``step()`` calls do nothing.
    A step's time runs from the end of the previous ``step()`` call (or from
    entering the ``with`` block) to the start of this one, CUDA synchronised.
    """

    def __init__(self, out_dir: Path, options: CaptureOptions) -> None:
        self.out_dir = out_dir
        self.options = options
        self._torch: Any = None
        self._profiler_mod: Any = None
        self._cuda = False
        self._prof: Any = None
        self._entered = False
        self._completed = 0
        self._t_start = 0
        self._untraced: list[int] = []
        self._traced: list[int] = []
        self._saving = False
        self._tmp_trace: Path | None = None
        self._result: CaptureResult | None = None

    # ------------------------------------------------------------- protocol
    def __enter__(self) -> Capture:
        if self._entered:
            raise CaptureError("a Capture can be entered only once", path=self.out_dir)
        self._entered = True
        if (self.out_dir / SIDECAR).exists():
            raise CaptureError(
                f"already holds a {SIDECAR} (it labels every trace in the directory): "
                "capture into a fresh directory",
                path=self.out_dir,
            )
        self._torch, self._profiler_mod = _import_torch()
        available = bool(self._torch.cuda.is_available())
        if self.options.cuda and not available:
            raise CaptureError("cuda=True but torch.cuda.is_available() is False")
        self._cuda = available if self.options.cuda is None else self.options.cuda
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.options.total_steps == self.options.wait + self.options.warmup + self.options.steps:
            self._start_profiler()
        self._sync()
        self._t_start = time.perf_counter_ns()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._result is not None:
            return
        self._saving = False
        if self._prof is not None:
            self._prof.stop()
            self._prof = None
        if self._tmp_trace is not None:
            self._tmp_trace.unlink(missing_ok=True)
        if exc_type is None:
            raise CaptureError(
                f"the loop ended after {self._completed} step() calls; the capture needs "
                f"{self.options.total_steps} (nothing was written)",
                path=self.out_dir,
            )

    # -------------------------------------------------------------- public
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

    def step(self) -> None:
        """Mark the end of one step (call it once per iteration, after the step's work)."""
        if self._result is not None:
            return
        if not self._entered:
            raise CaptureError("step() called outside `with capture(...)`", path=self.out_dir)
        self._sync()
        elapsed = time.perf_counter_ns() - self._t_start
        opts = self.options
        index = self._completed
        self._completed += 1
        untraced_end = opts.total_steps - (opts.wait + opts.warmup + opts.steps)
        if opts.untraced_warmup <= index < untraced_end:
            self._untraced.append(elapsed)
        elif index >= opts.total_steps - opts.steps:
            self._traced.append(elapsed)
        if self._prof is not None:
            self._saving = self._completed == opts.total_steps
            self._prof.step()
        if self._completed == untraced_end:
            self._start_profiler()
        if self._completed == opts.total_steps:
            self._finish()
            return
        self._t_start = time.perf_counter_ns()

    # ------------------------------------------------------------ internals
    def _sync(self) -> None:
        if self._cuda:
            self._torch.cuda.synchronize()

    def _start_profiler(self) -> None:
        opts = self.options
        pm = self._profiler_mod
        activities = [pm.ProfilerActivity.CPU]
        if self._cuda:
            activities.append(pm.ProfilerActivity.CUDA)  # covers HIP on ROCm builds
        self._prof = pm.profile(
            activities=activities,
            schedule=pm.schedule(wait=opts.wait, warmup=opts.warmup, active=opts.steps, repeat=1),
            on_trace_ready=self._export,
            record_shapes=opts.record_shapes,
            with_stack=opts.with_stack,
            profile_memory=opts.profile_memory,
            with_modules=opts.with_modules,
        )
        self._prof.start()

    def _export(self, prof: Any) -> None:
        """``on_trace_ready``: export to a hidden temporary file (ingest skips hidden files)."""
        if not self._saving:
            return
        name = f".{socket.gethostname()}_{os.getpid()}.{time.time_ns()}.partial.gz"
        self._tmp_trace = self.out_dir / name
        prof.export_chrome_trace(str(self._tmp_trace))

    def _finish(self) -> None:
        if self._prof is not None:
            self._prof.stop()
            self._prof = None
        if self._tmp_trace is None:
            raise CaptureError("the profiler produced no trace", path=self.out_dir)
        final = self.out_dir / (
            self._tmp_trace.name[1:].removesuffix(".partial.gz") + ".pt.trace.json.gz"
        )
        labels = self._labels()
        doc = {
            "labels": labels,
            "capture": {
                "trace": final.name,
                "steps": self.options.steps,
                "wait": self.options.wait,
                "warmup": self.options.warmup,
                "step_ns_untraced": self._untraced,
                "step_ns_traced": self._traced,
                "activities": ["CPU", "CUDA"] if self._cuda else ["CPU"],
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
            step_ns_untraced=tuple(self._untraced),
            step_ns_traced=tuple(self._traced),
        )

    def _labels(self) -> dict[str, LabelValue]:
        opts = self.options
        labels = _environment_labels(self._torch, self._cuda)
        if opts.model_name is not None:
            labels["model"] = opts.model_name
        labels.update(
            {
                "steps_profiled": opts.steps,
                "record_shapes": opts.record_shapes,
                "with_stack": opts.with_stack,
                "profile_memory": opts.profile_memory,
                "step_ns_median_traced": round(statistics.median(self._traced)),
            }
        )
        overhead = profiler_overhead_pct(self._untraced, self._traced)
        if self._untraced:
            labels["step_ns_median_untraced"] = round(statistics.median(self._untraced))
        if overhead is not None:
            labels["profiler_overhead_pct"] = round(overhead, 2)
        labels.update(opts.labels)
        return labels


def capture(out_dir: str | Path, **options: Unpack[CaptureKwargs]) -> Capture:
    """Profile a few iterations of a loop that calls ``cap.step()`` after each one.

    Parameters
    ----------
    out_dir
        Directory for the trace and ``run.json``; created if missing. It must not
        hold a ``run.json`` already (one capture per directory).
    **options
        ``steps=3, warmup=1, wait=0, labels=None, model_name=None,
        record_shapes=True, with_stack=False, profile_memory=False,
        with_modules=False, time_untraced=True, cuda=None``: see :class:`CaptureOptions`.

    Returns
    -------
    Capture
        Use it as a context manager. The loop needs ``warmup + steps`` untraced
        steps (with ``time_untraced``), then ``wait + warmup + steps`` traced ones;
        :attr:`Capture.done` says when they ran and :attr:`Capture.result` holds
        what was written.

    Raises
    ------
    UsageError
        An option value is invalid.

    Examples
    --------
    >>> with capture("traces/run1", steps=3, model_name="resnet50") as cap:  # doctest: +SKIP
    ...     for batch in loader:
    ...         train_step(batch)
    ...         cap.step()
    ...         if cap.done:
    ...             break
    """
    return Capture(Path(out_dir), CaptureOptions(**options))


def profile_steps(
    step_fn: Callable[[], object], out_dir: str | Path, **options: Unpack[CaptureKwargs]
) -> CaptureResult:
    """Run ``step_fn`` under ``torch.profiler``; write a trace and its ``run.json``.

    ``step_fn`` is called ``warmup + steps`` times without the profiler (the
    last ``steps`` timed), then ``wait + warmup + steps`` times with it (the
    last ``steps`` recorded and timed). ``out_dir`` and ``options`` are those
    of :func:`capture`.

    Returns
    -------
    CaptureResult
        Paths written, labels, per-step latencies (ns) and ``overhead_pct``.

    Raises
    ------
    CaptureError
        ``torch`` is not installed, ``out_dir`` already holds a ``run.json``, or
        ``cuda=True`` without a device.
    UsageError
        An option value is invalid.

    Examples
    --------
    >>> model, x = torch.nn.Linear(64, 8), torch.randn(32, 64)  # doctest: +SKIP
    >>> res = profile_steps(lambda: model(x).sum().backward(), "traces/lin", steps=3)  # doctest: +SKIP
    >>> round(res.overhead_pct)  # doctest: +SKIP
    12
    """
    with capture(out_dir, **options) as cap:
        while not cap.done:
            step_fn()
            cap.step()
    return cap.result
