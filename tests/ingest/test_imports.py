"""A small local ingest and the single-run analyses after it load neither pyarrow nor delta-rs.

The compiled stager hands its buffers to DuckDB through the Arrow C stream interface
(``take_arrow``), the Delta commits are tracewh's own and frames come from DuckDB's
``__arrow_c_stream__``: a one-process session (ingest + kernels, breakdown, idle
breakdown, launches, queue) runs without pyarrow's ~50 MB. Checked in a fresh
interpreter (``sys.modules`` at its end; no timing).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tracewh.api import Warehouse
from tracewh.ingest import fast
from tracewh.synth import SynthConfig, write_trace

SHARED = Path("../shared/traces")
REAL = SHARED / "tracelens__mi300__bert-small-uncased.json.gz"

_PROBE = """
import json, sys
from tracewh.api import Warehouse
wh = Warehouse(sys.argv[2])
report = wh.ingest([sys.argv[1]], jobs=1)
assert report.ok and report.ingested, report.to_dict()
widths = [f.width for f in (wh.kernels(), wh.breakdown(), wh.idle_breakdown(), wh.launches(),
                            wh.queue_depth())]
print(json.dumps({"widths": widths, "loaded": sorted(
    m for m in ("pyarrow", "deltalake") if m in sys.modules)}))
"""


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A first ingest + query here builds the plain-schema and catalog caches (their
    builds read the Arrow schemas); the probe then finds them."""
    base = tmp_path_factory.mktemp("ingest-imports")
    trace = base / "t.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=1, layers=1, seed=11))
    wh = Warehouse(base / "warm")
    assert wh.ingest([trace], jobs=1).ok
    wh.kernels()
    return base


def _probe(trace: Path, wh: Path) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(trace), str(wh)],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.skipif(fast.native() is None, reason="the C extension is not built")
def test_synthetic_session_imports_no_pyarrow(warm: Path) -> None:
    trace = warm / "s.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=2, layers=2, seed=12))
    got = _probe(trace, warm / "wh-synth")
    assert got["loaded"] == []
    assert all(isinstance(w, int) and w > 0 for w in got["widths"])  # type: ignore[attr-defined]


@pytest.mark.skipif(fast.native() is None, reason="the C extension is not built")
@pytest.mark.skipif(not REAL.is_file(), reason="../shared/traces not present")
def test_small_real_session_imports_no_pyarrow(warm: Path) -> None:
    got = _probe(REAL.resolve(), warm / "wh-real")
    assert got["loaded"] == []
    assert all(isinstance(w, int) and w > 0 for w in got["widths"])  # type: ignore[attr-defined]
