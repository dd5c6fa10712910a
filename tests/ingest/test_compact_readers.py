"""Readers keep working while ``compact --retain-hours 0`` runs (issue 33, class 14).

A real reader process holds a session (the snapshot a report reads) while a real
``tracewh compact --retain-hours 0`` merges the small files of every table and vacuums:
the files the reader's snapshot names stay until it is done, so its queries (every table,
then a whole report) succeed with the same numbers; the next compact, with no reader, frees them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers_ingest import driver_env

from tracewh.synth import SynthConfig, write_trace

TRACEWH = str(Path(sys.executable).with_name("tracewh"))

READER = """
import json, sys, time
from pathlib import Path
from tracewh.api import Warehouse
from tracewh.report import build_report
from tracewh.schema.arrow import TABLES
root, ready, go, out = sys.argv[1:5]
wh = Warehouse(root)
with wh.session():
    before = {t: int(wh.sql(f"SELECT count(*) AS n FROM {t}")["n"][0]) for t in TABLES}
    Path(ready).write_text("ready")
    while not Path(go).exists():
        time.sleep(0.05)
    after = {t: int(wh.sql(f"SELECT count(*) AS n FROM {t}")["n"][0]) for t in TABLES}
    build_report(wh, out)
print(json.dumps({"before": before, "after": after}))
"""


@pytest.mark.slow  # about 60 s: three ingests, two compactions and a report
def test_a_session_reads_on_while_compact_vacuums(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    for i in range(3):
        trace = tmp_path / "t" / f"r{i}.pt.trace.json.gz"
        write_trace(trace, SynthConfig(steps=1, layers=1, seed=3420 + i))
        p = subprocess.run([TRACEWH, "ingest", str(trace), "-w", str(root)], capture_output=True,
                           text=True, env=driver_env())
        assert p.returncode == 0, p.stderr
    ready, go = tmp_path / "ready", tmp_path / "go"
    reader = subprocess.Popen([sys.executable, "-c", READER, str(root), str(ready), str(go),
                               str(tmp_path / "report")], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=driver_env())
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and reader.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), reader.communicate()
        c = subprocess.run([TRACEWH, "compact", "--retain-hours", "0", "-w", str(root), "-f", "json"],
                           capture_output=True, text=True, env=driver_env(), timeout=300)
        assert c.returncode == 0, c.stderr
        done = json.loads(c.stdout)
        tables = done["tables"].values()
        assert sum(t["files_before"] for t in tables) > sum(t["files_after"] for t in tables)  # merged
        assert "a query or report is reading" in (done.get("clamp") or ""), done
        go.write_text("go")
        out, err = reader.communicate(timeout=300)
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()
    assert reader.returncode == 0, err[-3000:]
    counts = json.loads(out)
    assert counts["before"] == counts["after"]
    assert (tmp_path / "report" / "report.html").is_file()
    # no reader now: the superseded files go
    c = subprocess.run([TRACEWH, "compact", "--retain-hours", "0", "-w", str(root), "-f", "json"],
                       capture_output=True, text=True, env=driver_env(), timeout=300)
    assert c.returncode == 0, c.stderr
    again = json.loads(c.stdout)
    assert again.get("clamp") is None and sum(t["vacuumed"] for t in again["tables"].values()) > 0, again
    v = subprocess.run([TRACEWH, "verify", "-w", str(root)], capture_output=True, text=True, env=driver_env())
    assert v.returncode == 0, v.stdout
