"""The wheel and the sdist install outside the checkout and work there (.ci/package_check.py).

Slow (builds both, creates three venvs, installs the dependencies): ``make package`` runs
the same script in CI after ``make test``; here it runs with ``make test-all``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wheel_and_sdist_work_outside_the_checkout(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / ".ci" / "package_check.py"), "--dist", str(tmp_path / "dist"),
         "--work", str(tmp_path / "work")],
        capture_output=True, text=True, timeout=3600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all checks passed" in done.stdout
