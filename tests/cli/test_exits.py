"""Every command, run as a real process many times, exits 0, 1 or 2 (issue 18, item 1).

delta-rs's pyarrow dataset (``DeltaTable.to_pyarrow_dataset``, ``pl.scan_delta``)
reads through a file system that calls into delta-rs from Arrow's I/O threads; a
process that used it aborted at exit about half the time (SIGABRT, exit 134,
``terminate called without an active exception``). tracewh now reads the
snapshot's Parquet files directly.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cli_sweep import commands, sweep
from helpers_ingest import driver_env

from tracewh.synth import SynthConfig, write_trace

TRACEWH = str(Path(sys.executable).with_name("tracewh"))


@pytest.fixture(scope="module")
def small_wh(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("exits")
    traces = base / "traces"
    for day in range(3):
        write_trace(traces / f"2025-01-0{day + 1}" / "rank-0.pt.trace.json.gz",
                    SynthConfig(steps=2, layers=1, seed=300 + day))
    wh = base / "wh"
    p = subprocess.run([TRACEWH, "ingest", str(traces), "-w", str(wh)], capture_output=True,
                       text=True, env=driver_env())
    assert p.returncode == 0, p.stderr
    return wh, traces


def test_verify_and_reads_exit_cleanly_every_time(small_wh: tuple[Path, Path], tmp_path: Path) -> None:
    wh, traces = small_wh
    result = sweep(TRACEWH, wh, traces, 4, tmp_path, only={"verify", "runs-json"})
    assert result.unclean == [], result.unclean
    assert result.aborts == 0


SCAN = """
import sys
from tracewh.api import Warehouse
wh = Warehouse(sys.argv[1])
print(wh.scan("gpu_ops").collect().height, wh.scan("runs").collect().height)
"""


def test_scan_exits_cleanly_every_time(small_wh: tuple[Path, Path]) -> None:
    """``Warehouse.scan`` (Polars) reads the snapshot's files: no abort at exit."""
    wh, _ = small_wh
    codes = [
        subprocess.run([sys.executable, "-c", SCAN, str(wh)], capture_output=True, text=True,
                       env=driver_env()).returncode
        for _ in range(4)
    ]
    assert codes == [0] * 4


@pytest.mark.slow
def test_every_command_twenty_times(small_wh: tuple[Path, Path], tmp_path: Path) -> None:
    wh, traces = small_wh
    result = sweep(TRACEWH, wh, traces, 20, tmp_path)
    print(f"\ncli sweep: {len(commands(traces, tmp_path))} commands x 20: {result.summary()}, "
          f"{result.aborts} aborts")
    assert result.unclean == [], result.unclean
    assert {rc for (_, rc) in result.codes} <= {0, 1, 2}


FROZEN = """
import gc, sys
sys.argv = ["tracewh", *sys.argv[1:]]
from tracewh.cli import run
try:
    run()
except SystemExit as exc:
    print("exit", exc.code, "frozen", gc.get_freeze_count() > 0, file=sys.stderr)
"""


def test_the_script_freezes_the_heap_after_the_command_and_exits_as_before(
        small_wh: tuple[Path, Path], tmp_path: Path) -> None:
    """``tracewh`` (``tracewh.cli.run``) runs the command, then freezes what is left so the
    exit skips Python's last full collections: same exit codes and output, and the private
    spill folders are still removed at exit (``weakref.finalize``)."""
    wh, _ = small_wh
    spill = tmp_path / "spill"
    env = {**driver_env(), "TRACEWH_TEMP_DIR": str(spill)}
    for args, code in ((["--memory-limit", "64MB", "kernels", "-w", str(wh), "--top", "3"], 0),
                       (["kernels", "-w", str(wh), "--run", "abcdef99"], 2),
                       (["kernels", "--no-such-option"], 2)):
        done = subprocess.run([sys.executable, "-c", FROZEN, *args], capture_output=True,
                              text=True, env=env)
        assert done.returncode == 0, done.stderr
        assert f"exit {code} frozen True" in done.stderr, done.stderr
        script = subprocess.run([TRACEWH, *args], capture_output=True, text=True, env=env)
        assert script.returncode == code, script.stderr
        plain = subprocess.run([sys.executable, "-c", APP, *args], capture_output=True,
                               text=True, env=env)  # the Typer app without run()
        assert (script.returncode, script.stdout) == (plain.returncode, plain.stdout)
        if code == 0:
            assert "kernels by total" in script.stdout
    assert not spill.exists() or list(spill.iterdir()) == []


APP = """
import sys
sys.argv = ["tracewh", *sys.argv[1:]]
from tracewh.cli import app
app(prog_name="tracewh")
"""

CYCLE = """
import gc, sys
import tracewh.cli as cli
marks = []
class Held:  # a resource in a reference cycle, held by the failing command's frame
    def __del__(self):
        marks.append("finalized")
def failing(**kwargs):
    held = Held()
    held.me = held
    raise {error}
cli.app = failing
try:
    cli.run()
except BaseException as exc:
    print(type(exc).__name__, getattr(exc, "code", None), marks, gc.get_freeze_count() > 0)
"""


def test_the_script_finalizes_the_commands_garbage_before_freezing() -> None:
    """After a command's exit (its SystemExit dropped), a cycle its frames held is collected
    and finalized before the freeze; an interrupt propagates without a freeze."""
    done = subprocess.run([sys.executable, "-c", CYCLE.format(error="SystemExit(3)")],
                          capture_output=True, text=True, env=driver_env())
    assert done.stdout.strip() == "SystemExit 3 ['finalized'] True", done.stderr
    done = subprocess.run([sys.executable, "-c", CYCLE.format(error="KeyboardInterrupt()")],
                          capture_output=True, text=True, env=driver_env())
    assert done.stdout.strip() == "KeyboardInterrupt None [] False", done.stderr
