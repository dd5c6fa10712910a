"""The ingest progress bar moves with bytes read (issue 30, item 13): file offsets from /proc."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tracewh.cli.readprogress import ReadProgress


def test_offsets_of_both_passes_in_this_process(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(b"x" * 1000)
    rp = ReadProgress({str(path): 1000})
    if not rp.available:
        pytest.skip("no /proc here")
    assert rp.in_flight_bytes() == 0
    with open(path, "rb", buffering=0) as f:  # the hash pass
        f.read(400)
        assert rp.in_flight_bytes() == 200  # half of the work is the hash pass
        f.read(600)
        assert rp.in_flight_bytes() == 500
    with open(path, "rb", buffering=0) as f:  # the parse pass: the offset starts again
        f.read(100)
        assert rp.in_flight_bytes() == 550
        f.read(500)
        assert rp.in_flight_bytes() == 800
    assert rp.in_flight_bytes() == 800  # closed: never goes back
    rp.finished(str(path))
    assert rp.in_flight_bytes() == 0


def test_offsets_of_a_child_process(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    path.write_bytes(b"y" * 2000)
    rp = ReadProgress({str(path): 2000})
    if not rp.available:
        pytest.skip("no /proc here")
    code = (f"import time; f = open({str(path)!r}, 'rb', buffering=0); f.read(1200); "
            "print('ready', flush=True); time.sleep(30)")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 10
        while rp.in_flight_bytes() != 600 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rp.in_flight_bytes() == 600
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
