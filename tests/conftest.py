from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_TRACES = (REPO / ".." / "shared" / "traces").resolve()

# a query that reads a table tracewh.query.reads did not find in it fails the test (it
# would run again over every table otherwise); inherited by the commands tests start
os.environ["TRACEWH_STRICT_READS"] = "1"


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The real Kineto traces in ../shared/traces; skips where the folder is absent."""
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is not present")
    return SHARED_TRACES
