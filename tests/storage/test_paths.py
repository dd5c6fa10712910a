"""Warehouse paths with characters that mean something to someone (issue 18, item 2):
space, non-ASCII letters, quotes, ``#``, ``?``, ``*``, ``:`` and ``key=value`` folders
(which engines read as hive partitions) work end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers_ingest import driver_env, expected_rows, load_trace

from tracewh.synth import SynthConfig, write_trace

TRACEWH = str(Path(sys.executable).with_name("tracewh"))
#: every character at once (a relative path starting "x:" was read as a URL of scheme "x"),
#: and folders an engine reads as hive partitions of every row below them
NAMES = ['col:on w h/\u00fcber-\u65e5\u672c/quo"te#hash?what*star', "run_id=evil/day=2020-01-01"]


def _tw(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TRACEWH, *args], capture_output=True, text=True, env=driver_env(),
                          cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("paths") / "t"
    write_trace(folder / "a.pt.trace.json.gz", SynthConfig(steps=2, layers=1, seed=81))
    return folder


@pytest.mark.parametrize("name", NAMES)
def test_odd_warehouse_paths_work_end_to_end(tmp_path: Path, traces: Path, name: str) -> None:
    (tmp_path / "whax").mkdir()  # what a glob "wh?x" or "wh*x" would also match
    relative = f"{name}/wh"
    root = tmp_path / relative
    assert _tw("ingest", str(traces), "-w", relative, cwd=tmp_path).returncode == 0
    trace = next(traces.glob("*.json.gz"))
    want = expected_rows(load_trace(trace)["traceEvents"])
    got = json.loads(_tw("sql", "-w", str(root), "-f", "json",
                         "SELECT (SELECT count(*) FROM gpu_ops) AS gpu_ops, "
                         "(SELECT count(*) FROM events) AS events, "
                         "(SELECT any_value(run_id) FROM gpu_ops) AS run_id, "
                         "(SELECT any_value(CAST(day AS VARCHAR)) FROM gpu_ops) AS day").stdout)
    assert got[0]["gpu_ops"] == want["gpu_ops"] and got[0]["events"] == want["events"]
    assert len(got[0]["run_id"]) == 16 and got[0]["day"] != "2020-01-01"
    for args in (["verify"], ["kernels"], ["compact"], ["runs", "-f", "csv"]):
        p = _tw(*args, "-w", str(root))
        assert p.returncode == 0, (args, p.stderr)
    p = _tw("export", "latest", "--out", str(tmp_path / "e.json.gz"), "-w", str(root))
    assert p.returncode == 0, p.stderr
