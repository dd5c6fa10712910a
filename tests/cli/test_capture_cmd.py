"""`tracewh capture -- python SCRIPT`: real captures of the examples, one per --step-on kind.

The CLI runs in a subprocess (it starts the script in a child process whose output
the test reads); each example prints a line before every iteration, so the test
counts how many steps the script really ran.
"""

from __future__ import annotations

import gzip
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tracewh.capture.overhead import Round, estimate_overhead
from tracewh.capture.script import ScriptCapture
from tracewh.capture.session import CaptureResult
from tracewh.cli import app

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

pytestmark = pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning")


@pytest.fixture(scope="module")
def torch() -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        return pytest.importorskip("torch")


def _tracewh(capfd: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process; the script's child process writes to the captured fds."""
    capfd.readouterr()
    result = CliRunner().invoke(app, list(args))
    child = capfd.readouterr()
    return result.exit_code, child.out + result.stdout, child.err + result.stderr


def _spans(trace: Path) -> dict[str, int]:
    with gzip.open(trace, "rt", encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]  # a small test trace
    names = [e["name"] for e in events if e.get("ph") == "X" and e.get("cat") == "user_annotation"]
    return {
        "tracewh.step": names.count("tracewh.step"),
        "ProfilerStep": sum(n.startswith("ProfilerStep#") for n in names),
    }


@pytest.mark.parametrize(
    ("step_on", "script", "marker", "setup_iterations"),
    [
        # optimizer: the first iteration, up to the first optimizer.step(), is set-up.
        ("optimizer", "train_transformer.py", "iteration ", 1),
        ("TinyDenoiser", "diffusion_loop.py", "denoising step ", 0),
        ("__main__:decode_step", "decode_loop.py", "token ", 0),
    ],
)
def test_capture_stops_after_exactly_n_steps(
    torch: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str], step_on: str, script: str,
    marker: str, setup_iterations: int,
) -> None:
    out = tmp_path / "cap"
    rc, stdout, stderr = _tracewh(
        capfd,
        "capture", "--steps", "2", "--warmup", "1", "--step-on", step_on, "--overhead-rounds", "0",
        "--out", str(out), "--label", "suite=cli", "--",
        sys.executable, str(EXAMPLES / script), "--log-every", "1", "--threads", "1",
    )
    assert rc == 0, stderr
    iterations = [line for line in stdout.splitlines() if line.startswith(marker)]
    # warmup 1 + steps 2 = 3 steps, then the script is stopped: it never reaches its end.
    assert len(iterations) == 3 + setup_iterations, stdout
    assert "done:" not in stdout
    assert f"captured 2 step(s) ({step_on}) of 3 run, then stopped the script" in stdout

    doc = json.loads((out / "run.json").read_text())
    cap = doc["capture"]
    assert cap["steps_run"] == 3 and cap["step_on"] == step_on and cap["finish"] is False
    assert doc["labels"]["suite"] == "cli" and doc["labels"]["steps_profiled"] == 2
    assert _spans(out / cap["trace"]) == {"tracewh.step": 2, "ProfilerStep": 2}


def test_capture_measures_the_overhead_and_can_let_the_script_finish(
    torch: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cap"
    rc, stdout, stderr = _tracewh(
        capfd,
        "capture", "--steps", "3", "--step-on", "TinyDenoiser", "--overhead-rounds", "6",
        "--round-steps", "1", "--finish", "--out", str(out), "--format", "json", "--",
        sys.executable, str(EXAMPLES / "diffusion_loop.py"), "--num-steps", "40",
        "--log-every", "1", "--threads", "1",
    )
    assert rc == 0, stderr
    lines = stdout.splitlines()
    assert sum(line.startswith("denoising step ") for line in lines) == 40
    assert any(line.startswith("done: 40 denoising steps") for line in lines)
    summary = json.loads(stdout[stdout.index("{\n"):])
    assert summary["ended"] == "finished" and summary["complete"] is True
    assert summary["steps_run"] == 1 + 3 + 13 * 2  # then the script ran on unprofiled
    doc = json.loads((out / "run.json").read_text())
    labels = doc["labels"]
    low, pct, high = (labels[f"profiler_overhead{k}_pct"] for k in ("_ci_low", "", "_ci_high"))
    assert low <= pct <= high
    assert summary["overhead"]["profiler_overhead_pct"] == pct
    assert [r["kind"] for r in doc["capture"]["rounds"]] == ["untraced", "traced"] * 6 + ["untraced"]
    warned = "warning: the overhead figure is unreliable" in stderr
    assert warned is (labels["profiler_overhead_reliable"] is False)


def test_a_script_that_ends_before_the_trace_is_an_error(
    torch: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cap"
    rc, _, stderr = _tracewh(
        capfd,
        "capture", "--steps", "3", "--out", str(out), "--",
        sys.executable, str(EXAMPLES / "train_transformer.py"), "--iters", "3", "--threads", "1",
    )
    assert rc == 1
    assert stderr.strip().splitlines()[-1] == (
        f"error: {out}: the script ended after 2 step(s) (--step-on optimizer); the trace needs "
        "4 (wait + warmup + steps): nothing was written"
    )
    assert not (out / "run.json").exists()
    assert not any(out.glob("*.json.gz"))


def test_a_class_that_never_appears_is_named(
    torch: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    rc, _, stderr = _tracewh(
        capfd,
        "capture", "--step-on", "NoSuchDenoiser", "--out", str(tmp_path / "c"), "--",
        sys.executable, str(EXAMPLES / "diffusion_loop.py"), "--num-steps", "2",
    )
    assert rc == 1
    assert "no nn.Module class named NoSuchDenoiser" in stderr.strip().splitlines()[-1]


def test_a_script_failing_after_the_capture_exits_1(
    torch: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "fails.py"
    script.write_text(
        "import sys\n\ndef work(i):\n    return i * 2\n\n"
        "for i in range(5):\n    work(i)\nsys.exit(3)\n"
    )
    rc, stdout, stderr = _tracewh(
        capfd, "capture", "--steps", "1", "--step-on", "__main__:work", "--overhead-rounds", "0",
        "--finish", "--out", str(tmp_path / "c"), "--", sys.executable, str(script),
    )
    assert rc == 1
    assert "captured 1 step(s)" in stdout
    assert stderr.strip().splitlines()[-1] == (
        "error: the script exited with status 3 after the capture was written"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--", "./train.py"], "must start with a Python interpreter"),
        (["--", "python", "-m", "train"], "python -m is not supported"),
        (["--", sys.executable, "missing_script.py"], "missing_script.py: no such script"),
        (["--step-on", "9lives", "--", sys.executable, "examples/decode_loop.py"],
         "--step-on '9lives'"),
        (["--overhead-rounds", "2", "--", sys.executable, "examples/decode_loop.py"], "at least 6"),
        (["--label", "novalue", "--", sys.executable, "examples/decode_loop.py"], "--label"),
        (["--format", "xml", "--", sys.executable, "examples/decode_loop.py"],
         "--format must be one of text, json"),
        (["--step-on", "__main__:nope", "--", sys.executable, "examples/decode_loop.py"],
         "has no top-level def nope"),
    ],
)
def test_usage_errors_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(app, ["capture", "--out", str(tmp_path / "c"), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def _fake_capture(tmp_path: Path, traced_ns: list[int]) -> ScriptCapture:
    rounds: list[Round] = []
    for t in traced_ns:
        rounds += [Round("untraced", (100,)), Round("traced", (t,))]
    rounds.append(Round("untraced", (100,)))
    res = CaptureResult(
        trace_path=tmp_path / "t.pt.trace.json.gz", sidecar_path=tmp_path / "run.json",
        labels={}, step_ns_recorded=(1, 2, 3), rounds=tuple(rounds),
        overhead=estimate_overhead(rounds), steps_run=4 + 2 * len(rounds),
    )
    return ScriptCapture(result=res, complete=True, ended="stopped", script_exit=0)


@pytest.mark.parametrize(
    ("traced", "warns"),
    [([110, 111, 112, 109, 110, 111], False), ([110, 150, 90, 170, 60, 110], True)],
)
def test_the_cli_warns_when_the_overhead_is_unreliable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, traced: list[int], warns: bool
) -> None:
    import tracewh.capture.script as script_mod

    monkeypatch.setattr(script_mod, "capture_script", lambda *a, **k: _fake_capture(tmp_path, traced))
    result = CliRunner().invoke(
        app, ["capture", "--out", str(tmp_path / "c"), "--", "python", "examples/decode_loop.py"]
    )
    assert result.exit_code == 0, result.output
    assert "profiler overhead +10.5% (95% interval" in result.output or warns
    assert ("warning: the overhead figure is unreliable" in result.output) is warns
