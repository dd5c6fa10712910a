"""Profile a few steps of a PyTorch model the way the warehouse expects.

:func:`profile_steps` runs a step function under ``torch.profiler``,
:func:`capture` does the same for a loop that calls ``cap.step()``, and
:func:`tracewh.capture.script.capture_script` (``tracewh capture -- python
SCRIPT``) captures an unmodified script, a step being one ``optimizer.step()``,
one call of a named ``nn.Module`` class's ``forward`` or of a named function.
Each writes one Kineto trace, ``<out_dir>/<host>_<pid>.<time_ns>.pt.trace.json.gz``,
whose steps are ``record_function`` spans named :data:`STEP_SPAN`, and a
``run.json`` sidecar that ``tracewh ingest`` reads as the run's labels.

They also measure the profiler's own cost in alternating untraced and traced
rounds (:mod:`tracewh.capture.overhead`): the median ratio with a 95 %
interval, and whether that figure can be trusted.

``torch`` is an optional dependency (``pip install 'tracewh[capture]'``) and is
imported only when a capture starts, so importing this package never needs it.
"""

from __future__ import annotations

from tracewh.capture.loop import Capture, capture, profile_steps
from tracewh.capture.options import STEP_SPAN, CaptureKwargs, CaptureOptions, LabelValue
from tracewh.capture.overhead import OverheadEstimate, Round, estimate_overhead
from tracewh.capture.session import SIDECAR, CaptureResult, Session

__all__ = [
    "SIDECAR",
    "STEP_SPAN",
    "Capture",
    "CaptureKwargs",
    "CaptureOptions",
    "CaptureResult",
    "LabelValue",
    "OverheadEstimate",
    "Round",
    "Session",
    "capture",
    "estimate_overhead",
    "profile_steps",
]
