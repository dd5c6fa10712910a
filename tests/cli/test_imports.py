"""A query command imports only what it uses: no Altair, vl-convert, Polars, delta-rs, Pydantic or numpy.

Each check runs the command in a fresh interpreter and lists the heavy modules
loaded by its end (no timing: what is imported decides a command's start).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tracewh.api import Warehouse
from tracewh.synth import SynthConfig, write_trace

HEAVY = (
    "altair", "vl_convert", "polars", "pyarrow", "deltalake", "ijson", "orjson",
    "tracewh.ingest.pipeline", "tracewh.ingest.batch", "tracewh.report", "tracewh.history.series",
    # Typer's Pydantic adapters: plain option values are coerced by tracewh.cli.params
    "pydantic",
    # DuckDB imports numpy when a Python function is registered (tracewh.query.udfs: only
    # for a statement that calls one)
    "numpy",
)

_PROBE = """
import contextlib, io, json, sys
from typer.testing import CliRunner
from tracewh.cli import app
result = CliRunner().invoke(app, json.loads(sys.argv[1]))
heavy = json.loads(sys.argv[2])
loaded = sorted(h for h in heavy if any(m == h or m.startswith(h + ".") for m in sys.modules))
print(json.dumps({"exit": result.exit_code, "loaded": loaded, "out": result.output[-400:]}))
"""


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("imports")
    trace = base / "t.pt.trace.json.gz"
    write_trace(trace, SynthConfig(steps=1, layers=1, seed=5))
    wh = Warehouse(base / "wh")
    assert wh.ingest([trace]).ok
    # the caches a command's start reads, built once as a first command builds them: the
    # prepared catalog and the plain schema's JSON (both import the Arrow schemas). In a
    # process that has imported those already (this one, after other tests), the schema is
    # derived from them and its JSON is not written, so it is built in a command of its own
    assert _loaded(["kernels", "-w", str(base / "wh")])["exit"] == 0
    return base / "wh"


def _loaded(args: list[str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(args), json.dumps(HEAVY)],
        capture_output=True, text=True, check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "args",
    [
        ["kernels", "--top", "5"],
        ["gaps"],
        ["launches", "--by", "step"],
        ["launches", "--by", "linkage"],  # its column graph_launches is not the macro
        ["queue"],
        ["breakdown"],
        ["sql", "SELECT count(*) AS n FROM gpu_ops"],
    ],
)
def test_query_commands_import_no_heavy_library(warehouse: Path, args: list[str]) -> None:
    got = _loaded([*args, "-w", str(warehouse)])
    assert got["exit"] == 0, got["out"]
    assert got["loaded"] == [], f"`tracewh {' '.join(args)}` imported {got['loaded']}"


def test_kernels_json_loads_polars_but_not_altair(warehouse: Path) -> None:
    got = _loaded(["kernels", "--top", "5", "--format", "json", "-w", str(warehouse)])
    assert got["exit"] == 0, got["out"]
    assert "polars" in got["loaded"]  # a frame is written: Polars is what writes it
    assert "altair" not in got["loaded"] and "vl_convert" not in got["loaded"]
    # the frame comes from DuckDB through the Arrow C stream interface, not pyarrow
    assert "pyarrow" not in got["loaded"] and "deltalake" not in got["loaded"]


def test_help_and_version_import_nothing_heavy() -> None:
    for args in (["--help"], ["version"], ["report", "--help"], ["ingest", "--help"]):
        got = _loaded(args)
        assert got["exit"] == 0, got["out"]
        assert got["loaded"] == [], f"`tracewh {' '.join(args)}` imported {got['loaded']}"


def test_runs_loads_neither_pyarrow_nor_the_change_points(warehouse: Path) -> None:
    got = _loaded(["runs", "-w", str(warehouse)])
    assert got["exit"] == 0, got["out"]
    # workload identity is a Polars frame; pyarrow (~50 MB), numpy (one run: no fingerprint
    # to compare with) and the change-point code are not needed to list runs
    assert "pyarrow" not in got["loaded"] and "numpy" not in got["loaded"], got["loaded"]
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, tracewh.history.instances; "
         "print('tracewh.history.changepoint' in sys.modules)"],
        capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "False"
