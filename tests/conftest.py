from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_TRACES = (REPO / ".." / "shared" / "traces").resolve()

# a query that reads a table tracewh.query.reads did not find in it fails the test (it
# would run again over every table otherwise); inherited by the commands tests start
os.environ["TRACEWH_STRICT_READS"] = "1"

# the suite's own private cache folder (XDG_CACHE_HOME): made once by the process that
# starts the session, inherited by pytest-xdist's workers and the commands tests start, and
# removed at the end; the suite's thousands of temporary warehouses never leave entries in
# the user's ~/.cache/tracewh (tests of the cache itself set their own folder)
_OWN_CACHE: str | None = None
if not os.environ.get("TRACEWH_TEST_CACHE"):
    _OWN_CACHE = tempfile.mkdtemp(prefix="tracewh-test-cache-")
    os.environ["TRACEWH_TEST_CACHE"] = _OWN_CACHE
os.environ["XDG_CACHE_HOME"] = os.environ["TRACEWH_TEST_CACHE"]


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _OWN_CACHE is not None and not hasattr(session.config, "workerinput"):
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """The real Kineto traces in ../shared/traces; skips where the folder is absent."""
    if not SHARED_TRACES.is_dir():
        pytest.skip("../shared/traces is not present")
    return SHARED_TRACES
