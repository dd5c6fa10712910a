"""What a capture profiles and how: :class:`CaptureOptions` and its keyword form."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypedDict

from tracewh.capture.overhead import MIN_ROUNDS
from tracewh.core.errors import UsageError

LabelValue = str | int | float | bool
ClockOption = Literal["auto", "wall", "cpu"]

STEP_SPAN = "tracewh.step"
"""Name of the ``record_function`` span around every step a capture runs.

Fixed and documented so ``tracewh ingest --step-marker tracewh.step`` finds the
steps of any trace tracewh captured, training loop or not.
"""


class CaptureKwargs(TypedDict, total=False):
    """Keyword options of :func:`capture` and :func:`profile_steps` (see :class:`CaptureOptions`)."""

    steps: int
    warmup: int
    wait: int
    labels: Mapping[str, LabelValue]
    model_name: str | None
    record_shapes: bool
    with_stack: bool
    with_modules: bool
    profile_memory: bool
    overhead_rounds: int
    round_steps: int
    clock: ClockOption
    cuda: bool | None


@dataclass(frozen=True)
class CaptureOptions:
    """What to profile and how.

    Parameters
    ----------
    steps
        Steps recorded in the trace.
    warmup
        Profiler warm-up steps before recording (at least 1: the first
        profiled step otherwise includes the profiler's start-up).
    wait
        Steps run before the profiler's warm-up (not profiled).
    labels
        Your labels; they override the ones tracewh derives.
    model_name
        Stored as the ``model`` label.
    record_shapes, with_stack, with_modules, profile_memory
        Passed to ``torch.profiler.profile``. ``with_stack`` records Python
        frames, including the ``nn.Module: …`` spans module attribution needs;
        both it and ``with_modules`` are on by default. Each adds overhead,
        which the overhead rounds measure (docs/concepts/capture-overhead.md states typical figures).
    overhead_rounds
        Traced rounds of the overhead measurement after the recorded window
        (``2 * overhead_rounds + 1`` rounds in all, untraced and traced in
        alternation); 0 skips the measurement. At least 6 for a 95 % interval.
    round_steps
        Timed steps per round (each round also runs one untimed step first).
    clock
        What the rounds compare: ``wall`` time (device synchronised) or ``cpu``
        time of the stepping thread; ``auto``: wall when CUDA/HIP is recorded,
        else cpu (on CPU the profiler's cost is CPU work on that thread, and a
        shared machine's time-slicing inflates wall time, not that).
    cuda
        Record CUDA (HIP on ROCm builds) activity and synchronise the device
        around each timed step; default: when ``torch.cuda.is_available()``.
    """

    steps: int = 3
    warmup: int = 1
    wait: int = 0
    labels: Mapping[str, LabelValue] = field(default_factory=dict)
    model_name: str | None = None
    record_shapes: bool = True
    with_stack: bool = True
    with_modules: bool = True
    profile_memory: bool = False
    overhead_rounds: int = 9
    round_steps: int = 2
    clock: ClockOption = "auto"
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
        if self.overhead_rounds != 0 and self.overhead_rounds < MIN_ROUNDS:
            raise UsageError(
                f"overhead_rounds must be 0 (no measurement) or at least {MIN_ROUNDS} "
                f"(a 95% interval needs {MIN_ROUNDS} traced rounds), got {self.overhead_rounds}"
            )
        if self.round_steps < 1:
            raise UsageError(f"round_steps must be at least 1, got {self.round_steps}")
        if self.clock not in ("auto", "wall", "cpu"):
            raise UsageError(f"clock must be auto, wall or cpu, got {self.clock!r}")
        for key, value in self.labels.items():
            if not isinstance(key, str) or not key:
                raise UsageError(f"label keys must be non-empty strings, got {key!r}")
            if not isinstance(value, str | int | float | bool):
                raise UsageError(f"label {key!r}: value must be str, int, float or bool")

    @property
    def recorded_window(self) -> int:
        """Steps of the recorded window: ``wait + warmup + steps``."""
        return self.wait + self.warmup + self.steps

    @property
    def overhead_steps(self) -> int:
        """Steps of the overhead rounds: ``(2R + 1) * (1 + round_steps)``, 0 without them."""
        if self.overhead_rounds == 0:
            return 0
        return (2 * self.overhead_rounds + 1) * (1 + self.round_steps)

    @property
    def total_steps(self) -> int:
        """Steps a capture runs before it is done."""
        return self.recorded_window + self.overhead_steps
