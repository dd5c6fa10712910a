"""The child process of ``tracewh capture``: run a script under a capture session.

Started as ``python RUNNER CONFIG.json`` by :func:`tracewh.capture.script.capture_script`
(by file path, so any interpreter that has torch works). It installs the
``--step-on`` hooks, runs the script as ``__main__`` (``sys.argv``, ``sys.path[0]``
as ``python SCRIPT`` sets them), and once the capture is complete either stops
the script with :class:`CaptureComplete` (a ``BaseException``, so ``except
Exception`` in the script does not swallow it and its ``finally`` blocks and
context managers run) or lets it finish. It writes a status JSON for the parent.
"""

from __future__ import annotations

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == _HERE:
    del sys.path[0]  # never let this folder's modules shadow the script's imports

import json  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402


class CaptureComplete(BaseException):
    """Raised from a step hook to stop the script once the capture is written."""


class Driver:
    """The hooks' sink: steps go to a :class:`Session`; stop or pass through when done."""

    def __init__(self, session: Any, *, stop: bool) -> None:
        self.session = session
        self.stop = stop
        self.completed = False

    def _check_stop(self) -> None:
        # Only the main thread can stop the script; a step on another thread completes the
        # capture and the script runs on (raising there would only kill that thread).
        if self.completed and self.stop and threading.current_thread() is threading.main_thread():
            raise CaptureComplete

    def begin(self) -> None:
        self._check_stop()
        if not self.completed:
            self.session.begin()

    def end(self) -> None:
        if not self.completed and self.session.in_step and self.session.end():
            self.completed = True
        self._check_stop()

    def end_quietly(self) -> None:
        if not self.completed and self.session.in_step and self.session.end():
            self.completed = True

    def boundary(self) -> None:
        if self.session.in_step:
            self.end()
        self.begin()


def _write_status(path: str, status: dict[str, Any]) -> None:
    tmp = f"{path}.partial"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(status, f)
    os.replace(tmp, path)


def _compile_script(script: str, step_on: Any, hooks: Any) -> types.CodeType:
    with open(script, "rb") as f:
        source = f.read().decode("utf-8")
    if hooks.targets_script(step_on, script):
        return hooks.decorate_source(source, script, step_on.qualname)  # type: ignore[no-any-return]
    return compile(source, script, "exec")


def main(config_path: str) -> int:
    """Run the capture described by ``config_path``; the process exit code."""
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    status_path: str = config["status"]
    if config.get("tracewh_path") and config["tracewh_path"] not in sys.path:
        try:
            import tracewh  # noqa: F401
        except ImportError:
            sys.path.append(config["tracewh_path"])

    from tracewh.capture import hooks
    from tracewh.capture.options import CaptureOptions
    from tracewh.capture.session import Session, import_torch
    from tracewh.core.errors import TracewhError

    status: dict[str, Any] = {"outcome": "error", "steps_run": 0}
    script: str = config["script"]
    sys.argv = [script, *config["args"]]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    exit_code = 0
    session = None
    try:
        step_on = hooks.parse_step_on(config["step_on"])
        options = CaptureOptions(**config["options"])
        session = Session(Path(config["out_dir"]), options, context=config["context"])
        code = _compile_script(script, step_on, hooks)
        torch, _ = import_torch()
        session.open()
        driver = Driver(session, stop=not config["finish"])
        main_module = types.ModuleType("__main__")
        main_module.__dict__.update(
            {"__file__": script, "__builtins__": __builtins__, "__spec__": None,
             "__loader__": None, "__package__": None, "__cached__": None}
        )
        if step_on.kind == "optimizer":
            uninstall = hooks.install_optimizer(torch, driver)
        elif step_on.kind == "module":
            uninstall = hooks.install_module(torch, step_on.target, driver)
        elif hooks.targets_script(step_on, script):
            main_module.__dict__[hooks.DECORATOR] = hooks.step_decorator(driver)
            uninstall = lambda: None  # noqa: E731
        else:
            uninstall = hooks.install_function(step_on, driver)
        saved_main = sys.modules.get("__main__")
        sys.modules["__main__"] = main_module
        ended = "finished"
        try:
            exec(code, main_module.__dict__)
        except CaptureComplete:
            ended = "stopped"
        except SystemExit as exc:
            code_ = exc.code
            exit_code = code_ if isinstance(code_, int) else (0 if code_ is None else 1)
            if not isinstance(code_, int | None):
                print(code_, file=sys.stderr)
            ended = "exited"
        except TracewhError:
            raise
        except KeyboardInterrupt:
            ended = "interrupted"
            exit_code = 130
        except BaseException:
            traceback.print_exc()
            ended = "raised"
            exit_code = 1
        finally:
            uninstall()
            if saved_main is not None:
                sys.modules["__main__"] = saved_main
        if session.steps_run == 0 and step_on.kind == "function" and not (
            hooks.targets_script(step_on, script) or hooks.function_found(step_on)
        ):
            raise TracewhError(
                f"--step-on {step_on.target}: the script never imported {step_on.module} "
                f"(it {ended} without a step)"
            )
        if session.steps_run == 0 and step_on.kind == "module" and not (
            hooks.module_class_found(torch, step_on.target)
        ):
            raise TracewhError(
                f"--step-on {step_on.target}: no nn.Module class named {step_on.target} was "
                f"defined (the script {ended} without a step)"
            )
        result = session.close()
        status.update(
            outcome="complete" if driver.completed else ("partial" if result else "incomplete"),
            ended=ended,
            script_exit=exit_code,
            steps_run=session.steps_run,
            steps_needed=options.total_steps,
            recorded_window=options.recorded_window,
        )
    except TracewhError as exc:
        if session is not None:
            session.discard()
        status.update(outcome="error", error=str(exc), exit_code=exc.exit_code)
        _write_status(status_path, status)
        return exc.exit_code
    _write_status(status_path, status)
    return exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
