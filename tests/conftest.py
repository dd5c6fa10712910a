from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_TRACES = (REPO / ".." / "shared" / "traces").resolve()


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The real Kineto traces in ../shared/traces; skips where the folder is absent."""
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is not present")
    return SHARED_TRACES
