"""``tracewh sql`` bounded (issue 33, classes 7 and 9): time, memory, spill, Ctrl-C, temp folder.

Each test runs the real command as a process on a small warehouse with a runaway query
(``range()`` makes as many rows as asked, whatever the warehouse holds).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pytest
from helpers_ingest import driver_env

from tracewh.core.errors import QueryError
from tracewh.query.fetch import fetch_frame
from tracewh.query.sqllimits import (
    DEFAULT_MEMORY,
    DEFAULT_SPILL,
    DEFAULT_TIME_S,
    QueryLimits,
    run_limited,
)
from tracewh.synth import SynthConfig, write_trace

TRACEWH = str(Path(sys.executable).with_name("tracewh"))
RUNAWAY_DISTINCT = "SELECT count(DISTINCT r) FROM (SELECT range * 7 AS r FROM range(20000000000))"
RUNAWAY_LIST = "SELECT max(len(l)) FROM (SELECT list(range) AS l FROM range(3000000000))"


@pytest.fixture(scope="module")
def wh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("sqllimits")
    write_trace(base / "t" / "a.pt.trace.json.gz", SynthConfig(steps=1, layers=1, seed=3391))
    p = subprocess.run([TRACEWH, "ingest", str(base / "t"), "-w", str(base / "wh")],
                       capture_output=True, text=True, env=driver_env())
    assert p.returncode == 0, p.stderr
    (base / "tmp").mkdir()
    return base / "wh"


def _tmp(wh: Path) -> Path:
    """The commands' own temporary folder (other processes of the machine use /tmp too)."""
    return wh.parent / "tmp"


def _env(wh: Path) -> dict[str, str]:
    return {**driver_env(), "TMPDIR": str(_tmp(wh))}


def _sql(wh: Path, query: str, *args: str, cwd: Path | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TRACEWH, "sql", query, "-w", str(wh), *args], capture_output=True,
                          text=True, env=_env(wh), cwd=cwd, timeout=timeout)


def _one_line(p: subprocess.CompletedProcess[str]) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    return lines[0]


def _leftovers(wh: Path) -> set[str]:
    return {p.name for p in _tmp(wh).glob("tracewh-sql-*")}


def test_time_limit_stops_a_runaway_query(wh: Path) -> None:
    before = _leftovers(wh)
    p = _sql(wh, RUNAWAY_DISTINCT, "--time-limit", "1")
    assert p.returncode == 2, p.stderr
    assert "stopped at the time limit (1 s)" in _one_line(p)
    assert _leftovers(wh) == before


def test_memory_limit_stops_a_query_that_cannot_spill(wh: Path) -> None:
    p = _sql(wh, RUNAWAY_LIST, "--memory-limit", "200MB")
    assert p.returncode == 2, p.stderr
    assert "memory limit (200MB)" in _one_line(p)


def test_spill_limit_caps_the_private_temp_folder(wh: Path) -> None:
    before = _leftovers(wh)
    p = _sql(wh, RUNAWAY_DISTINCT, "--memory-limit", "100MB", "--spill-limit", "50MB")
    assert p.returncode == 2, p.stderr
    assert "spill limit (50MB)" in _one_line(p)
    assert _leftovers(wh) == before  # the spill folder is gone with what it held


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_interrupts_a_running_query(wh: Path, signum: signal.Signals) -> None:
    """Ctrl-C (and SIGTERM, as every command takes it) stops the query, removes its folder."""
    before = _leftovers(wh)
    proc = subprocess.Popen([TRACEWH, "sql", RUNAWAY_DISTINCT, "-w", str(wh)], stderr=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=_env(wh))
    time.sleep(3)  # the query runs
    assert proc.poll() is None
    t0 = time.monotonic()
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    took = time.monotonic() - t0
    assert proc.returncode == 128 + signum, err
    assert err.strip() == f"error: stopped by {signum.name}: nothing more was done"
    assert took < 10, took  # about 0.3-0.8 s measured; generous for a loaded machine
    assert _leftovers(wh) == before


def test_the_defaults_are_applied_and_the_temp_folder_is_private(wh: Path) -> None:
    q = ("SELECT current_setting('memory_limit') AS mem, current_setting('max_temp_directory_size') AS spill, "
         "current_setting('temp_directory') AS tmp")
    p = _sql(wh, q, "--format", "json")
    assert p.returncode == 0, p.stderr
    (row,) = json.loads(p.stdout)
    assert DEFAULT_TIME_S == 300 and DEFAULT_MEMORY == "2GB" and DEFAULT_SPILL == "4GB"
    assert row["mem"].startswith(("1.8 GiB", "1.9 GiB", "2.0 GiB", "2.0 GB", "1.8GiB")), row
    assert row["spill"].startswith(("3.7 GiB", "4.0 GB", "3.7GiB")), row
    tmp = Path(row["tmp"])
    assert tmp.name.startswith("tracewh-sql-") and tmp.parent == _tmp(wh) and not tmp.exists()  # removed after the query


def test_a_query_cannot_read_duckdbs_default_temp_folder(wh: Path, tmp_path: Path) -> None:
    """DuckDB lets a query read its temporary folder (default ``.tmp`` in the current
    folder); a confined query's is a private, fresh one, so ``.tmp`` stays out of reach."""
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "secret.txt").write_text("other user's spill")
    for query in ("SELECT * FROM read_text('.tmp/secret.txt')",
                  f"SELECT * FROM read_text('{tmp_path}/.tmp/secret.txt')",
                  "SELECT * FROM glob('.tmp/*')"):
        p = _sql(wh, query, cwd=tmp_path)
        assert p.returncode == 2, (query, p.stdout)
        assert "other user" not in p.stdout + p.stderr
        _one_line(p)


def test_a_query_sees_nothing_in_its_own_temp_folder_but_its_spill(wh: Path) -> None:
    q = "SELECT count(*) AS n FROM glob(current_setting('temp_directory') || '/*')"
    p = _sql(wh, q, "--format", "json")
    if p.returncode == 2:  # glob of the temp folder refused outright: also fine
        _one_line(p)
        return
    assert json.loads(p.stdout) == [{"n": 0}]


@pytest.mark.slow
def test_the_default_memory_limit_stops_a_runaway_query(wh: Path) -> None:
    """At the defaults (2GB): about 17 s and 2.0 GB peak RSS measured, then one line, exit 2."""
    p = _sql(wh, RUNAWAY_LIST, timeout=300)
    assert p.returncode == 2, p.stderr
    assert f"memory limit ({DEFAULT_MEMORY})" in _one_line(p)


def test_limits_are_checked(wh: Path) -> None:
    for args in (["--time-limit", "-1"], ["--memory-limit", "lots"], ["--spill-limit", "x"]):
        p = _sql(wh, "SELECT 1", *args)
        assert p.returncode == 2, (args, p.stderr)
        _one_line(p)
    assert _sql(wh, "SELECT 1", "--time-limit", "0", "--memory-limit", "none").returncode == 0


#: Runs for hours unless interrupted (10^16 pairs).
ENDLESS = "SELECT count(*) AS n FROM range(100000000) a, range(100000000) b"


def test_a_stop_event_interrupts_the_query_and_the_connection_goes_on() -> None:
    """Another thread stops the query (the MCP server's cancelled request)."""
    con = duckdb.connect()
    stop = threading.Event()
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    try:
        with pytest.raises(QueryError, match="cancelled"):
            run_limited(con, ENDLESS, lambda: fetch_frame(con, ENDLESS), QueryLimits(time_s=600),
                        stop=stop)  # fmt: skip
    finally:
        timer.cancel()
    # without limits too (only the stop), and the connection still answers
    with pytest.raises(QueryError, match="cancelled"):
        run_limited(con, ENDLESS, lambda: fetch_frame(con, ENDLESS), None, stop=stop)
    assert run_limited(con, "SELECT 1", lambda: fetch_frame(con, "SELECT 1 AS x"), None,
                       stop=threading.Event())["x"].to_list() == [1]  # fmt: skip


def test_an_interrupt_before_the_query_starts_is_not_lost() -> None:
    """A deadline reached while the worker is still starting (importing Polars, binding) stops
    the query once it runs, instead of waiting for it to end."""
    con = duckdb.connect()

    def slow_start() -> object:
        time.sleep(0.5)  # the deadline passes before the query starts
        return fetch_frame(con, ENDLESS)

    with pytest.raises(QueryError, match=r"stopped at the time limit \(0\.1 s\)"):
        run_limited(con, ENDLESS, slow_start, QueryLimits(time_s=0.1))
