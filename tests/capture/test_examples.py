"""The examples run as documented and report what they measure truthfully (issue 30, item 14)."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tracewh.cli.capture_cmd import overhead_text

REPO = Path(__file__).resolve().parents[2]


def test_overhead_is_a_figure_with_its_interval_or_not_significant() -> None:
    assert overhead_text(10.5, 6.1, 14.0) == "+10.5% (95% interval +6.1% .. +14.0%)"
    text = overhead_text(-69.6, -80.0, 12.0)
    assert text.startswith("not significant: its 95% interval -80.0% .. +12.0% includes 0")
    assert overhead_text(3.0, None, None).startswith("not significant: no 95% interval")


@pytest.mark.parametrize("steps", [100, 1000])
def test_diffusion_loop_stays_finite(steps: int) -> None:
    pytest.importorskip("torch")
    out = subprocess.run([sys.executable, str(REPO / "examples" / "diffusion_loop.py"), "--num-steps", str(steps),
                          "--batch", "2", "--dim", "32", "--threads", "1", "--log-every", "1000"],
                         capture_output=True, text=True, timeout=600, check=True).stdout
    std = float(re.search(r"latent std (\S+)", out).group(1))  # type: ignore[union-attr]
    assert math.isfinite(std) and 0 < std < 10, out
