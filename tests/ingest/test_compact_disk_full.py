"""A write error during ``compact`` (issue 33, class 12): one line, the tables as they were.

``tracewh compact`` runs as a real process under a real file-size limit (RLIMIT_FSIZE: every
write past it fails with EFBIG, as a full disk fails with ENOSPC), so the merged files it
writes fail for real. The command ends with one ``error:`` line and exit 1; every table's log
and data files are exactly as before (no commit, no merged file left behind), ``verify``
passes, and the same compaction without the limit then succeeds.
"""

from __future__ import annotations

import hashlib
import resource
import signal
import subprocess
import sys
from pathlib import Path

from helpers_ingest import driver_env, visible_state

from tracewh.synth import SynthConfig, write_trace

TRACEWH = str(Path(sys.executable).with_name("tracewh"))


def _tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((root / "tables").rglob("*")) if p.is_file()}


def _limited(limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # over-limit writes fail with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))


def test_a_write_error_during_compact_leaves_every_table_as_it_was(tmp_path: Path) -> None:
    root = tmp_path / "wh"
    for i in range(3):  # three ingests: three small files per table to merge
        trace = tmp_path / "t" / f"r{i}.pt.trace.json.gz"
        write_trace(trace, SynthConfig(steps=1, layers=1, seed=3410 + i))
        p = subprocess.run([TRACEWH, "ingest", str(trace), "-w", str(root)], capture_output=True,
                           text=True, env=driver_env())
        assert p.returncode == 0, p.stderr
    state, files = visible_state(root), _tree(root)
    p = subprocess.run([TRACEWH, "compact", "--retain-hours", "0", "-w", str(root)],
                       capture_output=True, text=True, env=driver_env(), preexec_fn=lambda: _limited(3000))
    assert p.returncode == 1, p.stdout + p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "File too large" in lines[0], p.stderr
    assert _tree(root) == files
    assert visible_state(root) == state
    v = subprocess.run([TRACEWH, "verify", "-w", str(root)], capture_output=True, text=True, env=driver_env())
    assert v.returncode == 0, v.stdout
    ok = subprocess.run([TRACEWH, "compact", "-w", str(root)], capture_output=True, text=True, env=driver_env())
    assert ok.returncode == 0, ok.stderr
    assert visible_state(root) == state
