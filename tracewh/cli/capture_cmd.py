"""`tracewh capture`: profile the first steps of an unmodified Python script."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

from tracewh.cli.common import app, check_format, format_option, handle_errors, parse_pairs

FORMATS = ("text", "json")


def _default_out(command: list[str]) -> Path:
    script = next((a for a in command[1:] if not a.startswith("-")), "script")
    return Path("traces") / f"{Path(script).stem}-{time.strftime('%Y%m%d-%H%M%S')}"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def overhead_text(pct: float, ci_low: float | None, ci_high: float | None) -> str:
    """The overhead estimate with its 95% interval, or "not significant" when the interval
    includes 0 or there is none (the figure alone would mislead)."""
    if ci_low is None or ci_high is None:
        return f"not significant: no 95% interval (estimate {pct:+.1f}%; needs at least 6 traced rounds)"
    if ci_low <= 0 <= ci_high:
        return (f"not significant: its 95% interval {ci_low:+.1f}% .. {ci_high:+.1f}% includes 0 "
                f"(estimate {pct:+.1f}%)")
    return f"{pct:+.1f}% ({_interval(ci_low, ci_high)})"


def _interval(ci_low: float | None, ci_high: float | None) -> str:
    if ci_low is None or ci_high is None:
        return "no 95% interval"
    return f"95% interval {ci_low:+.1f}% .. {ci_high:+.1f}%"


@app.command(context_settings={"allow_interspersed_args": False})
def capture(
    command: list[str] = typer.Argument(..., metavar="PYTHON SCRIPT [ARGS]...", help="After --: the interpreter, the script and its arguments."),
    steps: int = typer.Option(3, "--steps", metavar="N", help="Steps recorded in the trace."),
    wait: int = typer.Option(0, "--wait", metavar="N", help="Steps run before the profiler's warm-up (not profiled)."),
    warmup: int = typer.Option(1, "--warmup", metavar="N", help="Profiler warm-up steps before recording (at least 1)."),
    step_on: str = typer.Option("optimizer", "--step-on", metavar="optimizer|MODULE_CLASS|module:function", help="What a step is: optimizer (one optimizer.step()), an nn.Module class name (one call of its forward), or module:function (one call; __main__:f for a function of the script)."),
    out: Path | None = typer.Option(None, "--out", "-o", metavar="DIR", help="Directory for the trace and run.json (default traces/<script>-<time>)."),
    label: list[str] | None = typer.Option(None, "--label", "-l", metavar="K=V", help="KEY=VALUE label stored in run.json (repeatable)."),
    model: str | None = typer.Option(None, "--model", metavar="NAME", help="Model name (the model label)."),
    finish: bool = typer.Option(False, "--finish", help="Let the script run to its end after the capture (default: stop it cleanly)."),
    stack: bool = typer.Option(True, "--stack/--no-stack", help="with_stack: Python frames and the nn.Module spans module attribution needs (with --modules, about +5-15 points on small CPU steps; see docs/concepts/capture-overhead.md)."),
    modules: bool = typer.Option(True, "--modules/--no-modules", help="with_modules: module hierarchy of each op."),
    record_shapes: bool = typer.Option(True, "--record-shapes/--no-record-shapes", help="Record operator input shapes (about +5-35 points on small CPU steps)."),
    profile_memory: bool = typer.Option(False, "--profile-memory", help="Record allocations (profile_memory)."),
    overhead_rounds: int = typer.Option(9, "--overhead-rounds", metavar="N", help="Traced rounds of the overhead measurement after the trace (0: none; else at least 6)."),
    round_steps: int = typer.Option(2, "--round-steps", metavar="N", help="Timed steps per overhead round."),
    clock: str = typer.Option("auto", "--clock", metavar="auto|wall|cpu", help="What the overhead rounds compare: wall time (device synchronised) or the stepping thread's CPU time; auto: wall with CUDA/HIP, else cpu."),
    fmt: str = format_option("text", FORMATS),
) -> None:
    """Run `python SCRIPT` under torch.profiler, record its first steps, measure the profiler's overhead.

    The script is not modified. After wait + warmup + steps steps the trace is
    written; then 2R+1 alternating untraced/traced rounds measure the overhead
    (median ratio with a 95% interval; a warning when it is unreliable); then
    the script is stopped (exit 0) unless --finish. Each step is a
    record_function span named tracewh.step (ingest --step-marker tracewh.step).
    Exit code 1 when the script ends before the trace is complete.

    Example: tracewh capture --steps 3 --step-on TinyDenoiser --out traces/dit -- python examples/diffusion_loop.py
    """
    from tracewh.capture.options import CaptureOptions
    from tracewh.capture.script import capture_script

    with handle_errors():
        check_format(fmt, FORMATS)
        options = CaptureOptions(
            steps=steps, wait=wait, warmup=warmup, labels=parse_pairs(label, "--label"), model_name=model,
            record_shapes=record_shapes, with_stack=stack, with_modules=modules,
            profile_memory=profile_memory, overhead_rounds=overhead_rounds, round_steps=round_steps,
            clock=clock,  # type: ignore[arg-type]  # checked by CaptureOptions
        )
        target = out if out is not None else _default_out(command)
        done = capture_script(command, target, options, step_on=step_on, finish=finish)
    res, est = done.result, done.result.overhead
    if fmt == "json":
        typer.echo(json.dumps({
            "trace": str(res.trace_path), "run_json": str(res.sidecar_path),
            "steps_recorded": len(res.step_ns_recorded), "steps_run": res.steps_run,
            "complete": done.complete, "ended": done.ended, "script_exit": done.script_exit,
            "overhead": None if est is None else {
                "profiler_overhead_pct": round(est.pct, 2),
                "profiler_overhead_ci_low_pct": _round(est.ci_low_pct),
                "profiler_overhead_ci_high_pct": _round(est.ci_high_pct),
                "profiler_overhead_reliable": est.reliable, "reasons": list(est.reasons),
                "profiler_overhead_significant": (est.ci_low_pct is not None and est.ci_high_pct is not None
                                                  and not est.ci_low_pct <= 0 <= est.ci_high_pct),
                "clock": est.clock,
            },
        }, indent=2))
    else:
        how = {"stopped": "then stopped the script", "finished": "the script finished"}.get(
            done.ended, f"the script {done.ended}")
        typer.echo(
            f"captured {len(res.step_ns_recorded)} step(s) ({step_on}) of {res.steps_run} run, "
            f"{how}\n  trace:    {res.trace_path}\n  run.json: {res.sidecar_path}"
        )
        if est is not None:
            typer.echo(f"  profiler overhead {overhead_text(est.pct, est.ci_low_pct, est.ci_high_pct)} "
                       f"({len(est.ratios)} traced rounds, {est.clock} time)")
    if est is not None and not est.reliable:
        typer.echo(f"warning: the overhead figure is unreliable: {'; '.join(est.reasons)}", err=True)
    if done.script_exit != 0:
        typer.echo(f"error: the script exited with status {done.script_exit} after the capture was written", err=True)
        raise typer.Exit(1)
