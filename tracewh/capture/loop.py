"""Captures driven from Python: :func:`profile_steps` and the :func:`capture` context manager."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Unpack

from tracewh.capture.options import CaptureKwargs, CaptureOptions
from tracewh.capture.session import CaptureResult, Session
from tracewh.core.errors import CaptureError


class Capture:
    """A capture in progress: call :meth:`step` once per iteration inside ``with``.

    Made by :func:`capture`. A step runs from entering the ``with`` block (or
    from the previous :meth:`step` call) to the next :meth:`step` call. Once
    :attr:`done`, the trace and ``run.json`` are written and further ``step()``
    calls do nothing. When the loop ends early, ``__exit__`` writes what was
    measured if the recorded window is complete (the overhead then says how many
    rounds ran), else raises :class:`CaptureError` and writes nothing; an
    exception inside the block writes nothing.
    """

    def __init__(
        self, out_dir: Path, options: CaptureOptions, *, context: Mapping[str, Any] | None = None
    ) -> None:
        self.out_dir = out_dir
        self.options = options
        self._session = Session(out_dir, options, context=context)

    def __enter__(self) -> Capture:
        self._session.open()
        self._session.begin()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._session.done:
            return
        if exc_type is not None:
            self._session.discard()
            return
        if self._session.close() is None:
            raise CaptureError(
                f"the loop ended after {self._session.steps_run} step() calls; the trace "
                f"needs {self.options.recorded_window} and the whole capture "
                f"{self.options.total_steps} (nothing was written)",
                path=self.out_dir,
            )

    @property
    def done(self) -> bool:
        """True once the trace and ``run.json`` are written."""
        return self._session.done

    @property
    def result(self) -> CaptureResult:
        """What was written and measured; a :class:`CaptureError` before :attr:`done`."""
        return self._session.result

    def step(self) -> None:
        """Mark the end of one step (call it once per iteration, after the step's work)."""
        if self._session.done:
            return
        if not self._session.in_step:
            raise CaptureError("step() called outside `with capture(...)`", path=self.out_dir)
        if not self._session.end():
            self._session.begin()


def capture(out_dir: str | Path, **options: Unpack[CaptureKwargs]) -> Capture:
    """Profile a few iterations of a loop that calls ``cap.step()`` after each one.

    Parameters
    ----------
    out_dir
        Directory for the trace and ``run.json``; created if missing. It must not
        hold a ``run.json`` already (one capture per directory).
    **options
        ``steps=3, warmup=1, wait=0, labels=None, model_name=None,
        record_shapes=True, with_stack=True, with_modules=True,
        profile_memory=False, overhead_rounds=9, round_steps=2, cuda=None``:
        see :class:`CaptureOptions`.

    Returns
    -------
    Capture
        Use it as a context manager. The loop needs ``wait + warmup + steps``
        steps for the trace, then ``(2 * overhead_rounds + 1) * (1 + round_steps)``
        for the overhead (``options.total_steps`` in all); :attr:`Capture.done`
        says when they ran and :attr:`Capture.result` holds what was written.

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
    """Run ``step_fn`` under ``torch.profiler``; write a trace, its ``run.json`` and the overhead.

    ``step_fn`` runs ``wait + warmup + steps`` times for the trace (the last
    ``steps`` recorded), then in the overhead rounds (see
    :mod:`tracewh.capture.overhead`), each call timed on its own (device
    synchronised). ``out_dir`` and ``options`` are those of :func:`capture`.

    Returns
    -------
    CaptureResult
        Paths written, labels, per-step latencies (ns), the rounds and ``overhead``.

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
    >>> res.overhead.ci_low_pct <= res.overhead_pct <= res.overhead.ci_high_pct  # doctest: +SKIP
    True
    """
    session = Session(Path(out_dir), CaptureOptions(**options))
    session.open()
    try:
        while True:
            session.begin()
            step_fn()
            if session.end():
                return session.result
    except BaseException:
        session.discard()
        raise
