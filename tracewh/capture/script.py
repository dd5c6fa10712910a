"""Capture an unmodified script: ``tracewh capture -- python SCRIPT [ARGS…]``.

:func:`capture_script` runs the script in a child process of the interpreter
the command names (:mod:`tracewh.capture.runner`), with the ``--step-on``
hooks of :mod:`tracewh.capture.hooks`, and reads back what it wrote.
:func:`read_capture` reads any capture directory back into a :class:`CaptureResult`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import tracewh
from tracewh.capture.hooks import StepOn, decorate_source, parse_step_on, targets_script
from tracewh.capture.options import CaptureOptions
from tracewh.capture.overhead import Clock, Round, estimate_overhead
from tracewh.capture.session import SIDECAR, CaptureResult
from tracewh.core.errors import CaptureError, UsageError
from tracewh.core.outdir import check_output_dir

RUNNER = Path(__file__).with_name("runner.py")
Ended = Literal["stopped", "finished", "exited", "raised", "interrupted"]


@dataclass(frozen=True)
class ScriptCommand:
    """A parsed ``python [OPTIONS] SCRIPT [ARGS…]`` command line."""

    python: str
    python_options: tuple[str, ...]
    script: str
    args: tuple[str, ...]


@dataclass(frozen=True)
class ScriptCapture:
    """What a script capture wrote, and how the script ended.

    Attributes
    ----------
    result
        The trace, ``run.json``, labels, steps and overhead.
    complete
        True when every overhead round ran (False: the script ended first).
    ended
        ``stopped`` (tracewh stopped it after the capture), ``finished``,
        ``exited`` (``sys.exit``), ``raised`` or ``interrupted``.
    script_exit
        The script's exit status (0 when tracewh stopped it).
    """

    result: CaptureResult
    complete: bool
    ended: Ended
    script_exit: int


def parse_command(command: Sequence[str]) -> ScriptCommand:
    """Split ``python [-u|-O|-X opt|-W arg…] SCRIPT [ARGS…]``; :class:`UsageError` otherwise.

    Examples
    --------
    >>> parse_command(["python", "-u", "train.py", "--epochs", "1"]).script
    'train.py'
    """
    if not command:
        raise UsageError("no command: tracewh capture [OPTIONS] -- python SCRIPT [ARGS...]")
    python, rest = command[0], list(command[1:])
    if not re.fullmatch(r"(python|pypy)[0-9.]*(\.exe)?", Path(python).name):
        raise UsageError(
            f"the command must start with a Python interpreter, not {python!r}: "
            "tracewh capture [OPTIONS] -- python SCRIPT [ARGS...]"
        )
    if shutil.which(python) is None:
        raise UsageError(f"{python!r}: no such interpreter")
    opts: list[str] = []
    while rest and rest[0].startswith("-") and rest[0] != "-":
        flag = rest.pop(0)
        if flag[:2] in ("-m", "-c"):
            raise UsageError(
                f"python {flag[:2]} is not supported: give a script file (python SCRIPT [ARGS...])"
            )
        opts.append(flag)
        if flag in ("-W", "-X") and rest:
            opts.append(rest.pop(0))
    if not rest:
        raise UsageError("no script: tracewh capture [OPTIONS] -- python SCRIPT [ARGS...]")
    script = rest.pop(0)
    if not Path(script).is_file():
        raise UsageError(f"{script}: no such script")
    return ScriptCommand(python, tuple(opts), script, tuple(rest))


def read_capture(out_dir: str | Path) -> CaptureResult:
    """Read a capture directory back (its ``run.json``); the overhead is recomputed from the rounds.

    Raises
    ------
    CaptureError
        The directory holds no readable capture ``run.json``.
    """
    sidecar = Path(out_dir) / SIDECAR
    try:
        doc = json.loads(sidecar.read_text(encoding="utf-8"))
        cap, labels = doc["capture"], doc["labels"]
        rounds = tuple(
            Round(r["kind"], tuple(r["step_ns"]), tuple(r.get("cpu_ns", ()))) for r in cap["rounds"]
        )
        planned = int(cap["overhead_rounds"])
        clock: Clock = "cpu" if cap.get("clock") == "cpu" else "wall"
        trace = sidecar.parent / cap["trace"]
        recorded = tuple(int(t) for t in cap["step_ns_recorded"])
        steps_run = int(cap["steps_run"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CaptureError(f"not a tracewh capture ({exc})", path=sidecar) from exc
    return CaptureResult(
        trace_path=trace,
        sidecar_path=sidecar,
        labels=labels,
        step_ns_recorded=recorded,
        rounds=rounds,
        overhead=estimate_overhead(rounds, clock=clock, planned=planned) if planned else None,
        steps_run=steps_run,
    )


def capture_script(
    command: Sequence[str],
    out_dir: str | Path,
    options: CaptureOptions,
    *,
    step_on: StepOn | str = "optimizer",
    finish: bool = False,
) -> ScriptCapture:
    """Run ``python SCRIPT [ARGS…]`` under the profiler and capture its first steps.

    The script runs unmodified, in a child process of the interpreter the
    command names (it needs torch, and finds tracewh through ``sys.path`` or
    this installation). A step is one ``optimizer.step()``, one call of a named
    ``nn.Module`` class's ``forward``, or one call of a named function
    (:mod:`tracewh.capture.hooks`). After ``options.total_steps`` steps (the
    recorded window, then the overhead rounds) the trace and ``run.json`` are
    written and the script is stopped (``finish=False``) or runs to its end.

    Parameters
    ----------
    command
        ``["python", "SCRIPT", ...]``; interpreter options such as ``-u`` may
        precede the script; ``-m`` and ``-c`` are not supported.
    out_dir
        Directory for the trace and ``run.json`` (must not hold a ``run.json``).
    options
        What to profile (steps, profiler flags, overhead rounds, labels).
    step_on
        ``optimizer``, a class name, or ``module:function`` (see :func:`parse_step_on`).
    finish
        Let the script run to its end after the capture instead of stopping it.

    Returns
    -------
    ScriptCapture
        The capture and how the script ended. When the script ended during the
        overhead rounds, ``complete`` is False and the overhead says so.

    Raises
    ------
    UsageError
        A bad command, ``--step-on`` target or option.
    CaptureError
        The script ended (or failed) before the recorded window was complete,
        or the capture could not be written.
    """
    spec = parse_step_on(step_on) if isinstance(step_on, str) else step_on
    cmd = parse_command(command)
    if targets_script(spec, cmd.script):  # fail before starting torch in the child
        decorate_source(Path(cmd.script).read_text(encoding="utf-8"), cmd.script, spec.qualname)
    out = Path(out_dir)
    if (out / SIDECAR).exists():
        raise CaptureError(
            f"already holds a {SIDECAR}: capture into a fresh directory", path=out
        )
    check_output_dir(out, kind="capture")  # a new or empty folder: nothing of the user's is touched
    with tempfile.TemporaryDirectory(prefix="tracewh-capture-") as tmp:
        status_path = Path(tmp) / "status.json"
        config = {
            "status": str(status_path),
            "tracewh_path": str(Path(tracewh.__file__).resolve().parents[1]),
            "script": cmd.script,
            "args": list(cmd.args),
            "step_on": spec.describe(),
            "finish": finish,
            "out_dir": str(out.resolve()),
            "options": {**asdict(options), "labels": dict(options.labels)},
            "context": {
                "step_on": spec.describe(),
                "step_on_kind": spec.kind,
                "command": list(command),
                "cwd": os.getcwd(),
                "finish": finish,
            },
        }
        config_path = Path(tmp) / "config.json"
        config_path.write_text(json.dumps(config), encoding="utf-8")
        argv = [cmd.python, *cmd.python_options, str(RUNNER), str(config_path)]
        # Ctrl-C reaches the script (same process group), which writes what it measured; the
        # parent waits for it instead of dying first (only the main thread may set handlers).
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            proc = subprocess.run(argv, check=False)
        finally:
            if main:
                signal.signal(signal.SIGINT, previous)
        status = _read_status(status_path, proc.returncode, cmd)
    return _outcome(status, out, spec)


def _read_status(path: Path, returncode: int, cmd: ScriptCommand) -> dict[str, Any]:
    try:
        status: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CaptureError(
            f"the capture process ended (exit status {returncode}) without a status ({exc}): "
            f"was {cmd.python!r} able to import torch and tracewh?",
            path=cmd.script,
        ) from exc
    return status


def _outcome(status: dict[str, Any], out: Path, spec: StepOn) -> ScriptCapture:
    outcome = status.get("outcome")
    if outcome == "error":
        message = str(status.get("error", "the capture failed"))
        if int(status.get("exit_code", 1)) == 2:
            raise UsageError(message)
        raise CaptureError(message)
    if outcome == "incomplete":
        ended = status.get("ended", "finished")
        how = {
            "raised": "raised an exception",
            "exited": f"exited (status {status.get('script_exit')})",
            "interrupted": "was interrupted",
        }.get(str(ended), "ended")
        raise CaptureError(
            f"the script {how} after {status['steps_run']} step(s) (--step-on "
            f"{spec.describe()}); the trace needs {status['recorded_window']} (wait + warmup + "
            "steps): nothing was written",
            path=out,
        )
    return ScriptCapture(
        result=read_capture(out),
        complete=outcome == "complete",
        ended=status["ended"],
        script_exit=int(status.get("script_exit", 0)),
    )
