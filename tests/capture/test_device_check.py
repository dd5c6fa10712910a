"""examples/device_check.sh: its skip paths here, the whole check on CPU (slow) and on a GPU (gpu).

The GPU test runs the real device check; without a CUDA/ROCm device it skips.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "examples" / "device_check.sh"
SKIP = 77

pytestmark = pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning")


def _run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), "--python", sys.executable, *args],
        capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False,
    )


@pytest.fixture(scope="module")
def torch() -> Any:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
        return pytest.importorskip("torch")


def test_bad_arguments_exit_2() -> None:
    proc = _run("--device", "tpu")
    assert proc.returncode == 2
    assert "--device must be auto, cuda or cpu" in proc.stderr


def test_skips_without_torch(tmp_path: Path) -> None:
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None or subprocess.run([python, "-c", "import torch"], capture_output=True,
                                        check=False).returncode == 0:
        pytest.skip("needs an interpreter without torch")
    proc = subprocess.run(["bash", str(SCRIPT), "--python", python, "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=REPO, check=False)
    assert proc.returncode == SKIP
    assert proc.stdout.startswith("SKIP: ") and "cannot import torch" in proc.stdout


def test_skips_without_a_gpu(torch: Any, tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the gpu test runs the check")
    proc = _run("--device", "auto", "--out", str(tmp_path))
    assert proc.returncode == SKIP, proc.stdout + proc.stderr
    assert proc.stdout.startswith("SKIP: no CUDA/ROCm device")
    assert list(tmp_path.iterdir()) == []  # nothing captured


def _check_output(out: str) -> None:
    for name in ("tiny-transformer", "tiny-diffusion"):
        assert f"== capture {name}: 3 steps" in out
        assert re.search(rf"^== {name}: \d+ GPU kernels, 3 steps$", out, re.MULTILINE), name
        for cmd in ("kernels", "modules", "steps", "launches", "roofline"):
            ran = f"-- tracewh {cmd} --run model={name}" in out
            skipped = f"-- SKIP tracewh {cmd}: not in this checkout" in out
            assert ran or skipped, cmd
        assert f"-- profiler overhead ({name})" in out
    assert out.count("profiler_overhead_pct ") == 2
    assert "all checks passed" in out


@pytest.mark.slow
def test_the_whole_check_on_cpu(torch: Any, tmp_path: Path) -> None:
    proc = _run("--device", "cpu", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _check_output(proc.stdout)
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == [
        "tiny-diffusion", "tiny-transformer",
    ]


@pytest.mark.gpu
def test_the_device_check_on_a_gpu(torch: Any, tmp_path: Path) -> None:
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA/ROCm device")
    proc = _run("--device", "cuda", "--out", str(tmp_path), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    _check_output(proc.stdout)
    assert "0 GPU kernels" not in proc.stdout
