"""tracewh.capture: a real CPU capture with torch, its run.json, and its ingest.

Tests that need torch skip when it is missing (``make test`` installs the CPU
build); GPU tests are marked ``gpu`` and skip without a CUDA/ROCm device.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import socket
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from tracewh.capture import capture, profile_steps, profiler_overhead_pct
from tracewh.errors import CaptureError, UsageError

# A torch build without NumPy warns once, at import time, from C++.
pytestmark = pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning")

STEPS = 3


@pytest.fixture(scope="module")
def torch() -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Failed to initialize NumPy", category=UserWarning
        )
        return pytest.importorskip("torch")


def _mlp(torch: Any) -> tuple[Any, Any]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    return model, torch.randn(16, 32)


@pytest.fixture(scope="module")
def captured(torch: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One CPU capture of a tiny MLP (forward + backward), shared by the tests below."""
    model, x = _mlp(torch)
    out = tmp_path_factory.mktemp("capture") / "mlp"
    return profile_steps(
        lambda: model(x).sum().backward(),
        out,
        steps=STEPS,
        model_name="tiny-mlp",
        labels={"experiment": "unit", "batch": 16},
        cuda=False,
    )


def _trace_events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        events: list[dict[str, Any]] = json.load(f)["traceEvents"]  # tiny test trace
    return events


def test_profile_steps_writes_trace_and_sidecar(captured: Any, torch: Any) -> None:
    out = captured.trace_path.parent
    pattern = rf"{re.escape(socket.gethostname())}_{os.getpid()}\.\d+\.pt\.trace\.json\.gz"
    assert re.fullmatch(pattern, captured.trace_path.name)
    assert sorted(p.name for p in out.iterdir()) == sorted([captured.trace_path.name, "run.json"])

    doc = json.loads((out / "run.json").read_text())
    labels = doc["labels"]
    assert labels["model"] == "tiny-mlp"
    assert labels["experiment"] == "unit" and labels["batch"] == 16
    assert labels["torch_version"] == torch.__version__
    assert labels["device"] == "cpu"
    assert labels["steps_profiled"] == STEPS
    assert labels["host"] == socket.gethostname()

    cap = doc["capture"]
    assert cap["trace"] == captured.trace_path.name
    for key in ("step_ns_untraced", "step_ns_traced"):
        assert len(cap[key]) == STEPS
        assert all(isinstance(v, int) and v > 0 for v in cap[key])
    assert list(captured.step_ns_traced) == cap["step_ns_traced"]
    assert math.isfinite(labels["profiler_overhead_pct"])
    assert labels["profiler_overhead_pct"] > -100.0
    assert labels["profiler_overhead_pct"] == round(captured.overhead_pct, 2)

    # The trace holds exactly the profiled steps and the MLP's matmuls.
    events = _trace_events(captured.trace_path)
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    assert len(steps) == STEPS
    names = {e.get("name") for e in events if e.get("cat") == "cpu_op"}
    assert {"aten::linear", "aten::addmm"} <= names


def test_captured_trace_ingests_with_labels_and_ranks_cpu_ops(
    captured: Any, tmp_path: Path
) -> None:
    from tracewh.api import Warehouse

    wh = Warehouse(tmp_path / "wh")
    report = wh.ingest([captured.trace_path.parent])
    [result] = report.results
    assert result.outcome == "ingested", result.error
    assert not result.anomalies

    run = wh.runs().row(0, named=True)
    labels = json.loads(run["labels_json"])
    assert labels["model"] == "tiny-mlp"
    assert labels["experiment"] == "unit"
    assert labels["steps_profiled"] == str(STEPS)
    assert float(labels["profiler_overhead_pct"]) == captured.labels["profiler_overhead_pct"]
    assert run["n_steps"] == STEPS
    assert run["n_kernels"] == 0

    ops = wh.ops(cpu=True)
    by_name = dict(zip(ops["name"], ops["calls"], strict=True))
    # Two Linear layers per forward, STEPS steps: independent of tracewh's counting.
    assert by_name["aten::linear"] == 2 * STEPS
    assert by_name["aten::addmm"] == 2 * STEPS


def test_context_manager_form(torch: Any, tmp_path: Path) -> None:
    model, x = _mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    calls = 0
    with capture(tmp_path / "loop", steps=2, warmup=1, wait=1, time_untraced=False) as cap:
        for _ in range(10):  # a "loader" longer than the capture
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
            calls += 1
            cap.step()
    assert cap.done and calls == 10
    res = cap.result
    assert res.trace_path.is_file() and res.sidecar_path.is_file()
    assert len(res.step_ns_traced) == 2
    assert res.step_ns_untraced == ()
    assert res.overhead_pct is None
    assert "profiler_overhead_pct" not in res.labels
    steps = [e for e in _trace_events(res.trace_path) if e.get("cat") == "user_annotation"]
    assert len([e for e in steps if e["name"].startswith("ProfilerStep#")]) == 2


def test_loop_ending_early_writes_nothing(torch: Any, tmp_path: Path) -> None:
    out = tmp_path / "short"
    with pytest.raises(CaptureError, match="needs 8"), capture(out, steps=3) as cap:
        for _ in range(5):
            cap.step()
    assert list(out.iterdir()) == []


def test_existing_sidecar_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text("{}")
    with pytest.raises(CaptureError, match="fresh directory"):
        profile_steps(lambda: None, tmp_path)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"steps": 0}, "steps must be at least 1"),
        ({"warmup": 0}, "warmup must be at least 1"),
        ({"wait": -1}, "wait must be 0 or more"),
        ({"labels": {"k": [1]}}, "label 'k'"),
    ],
)
def test_invalid_options(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        capture(tmp_path, **kwargs)


def test_missing_torch_raises_a_typed_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(CaptureError, match=r"pip install 'tracewh\[capture\]'"):
        profile_steps(lambda: None, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_import_does_not_import_torch() -> None:
    code = "import sys, tracewh.capture; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_overhead_formula_by_hand() -> None:
    assert profiler_overhead_pct([100, 110, 90], [120, 125, 130]) == pytest.approx(25.0)
    assert profiler_overhead_pct([200, 100], [150, 150]) == pytest.approx(0.0)
    assert profiler_overhead_pct([], [1]) is None
    assert profiler_overhead_pct([0, 0], [1]) is None


@pytest.mark.gpu
def test_gpu_capture_records_kernels(torch: Any, tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA/ROCm device")
    from tracewh.api import Warehouse

    model, x = _mlp(torch)
    model, x = model.cuda(), x.cuda()
    res = profile_steps(lambda: model(x).sum().backward(), tmp_path / "gpu", steps=STEPS)
    assert res.labels["device"] == torch.cuda.get_device_name(torch.cuda.current_device())
    assert "cuda_version" in res.labels or "hip_version" in res.labels
    wh = Warehouse(tmp_path / "wh")
    [result] = wh.ingest([res.trace_path.parent]).results
    assert result.outcome == "ingested", result.error
    assert wh.runs().row(0, named=True)["n_kernels"] > 0
    assert wh.kernels().height > 0


@pytest.mark.slow
def test_example_script_runs(torch: Any, tmp_path: Path) -> None:
    script = Path(__file__).parents[1] / "examples" / "capture_tiny_model.py"
    out = subprocess.run(
        [
            sys.executable,
            str(script),
            "--out",
            str(tmp_path / "t"),
            "--warehouse",
            str(tmp_path / "wh"),
            "--steps",
            "2",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert "ingested: run " in out.stdout
    assert "aten::" in out.stdout
