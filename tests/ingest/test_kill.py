"""kill -9 of an ingest at many points: the warehouse holds exactly what it held before
(or, past the final commit, that plus the whole run), verify passes, and the next ingest
succeeds and cleans up the leftovers."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers_ingest import (
    incomplete_runs,
    orphan_ingests,
    run_id_of,
    staging_leftovers,
    start_ingest,
    visible_state,
)

from tracewh.api import Warehouse
from tracewh.synth import SynthConfig, write_trace

Trigger = Callable[[Path], bool]


def _log_entries(root: Path) -> int:
    tables = root / "tables"
    if not tables.is_dir():
        return 0
    return sum(
        1 for t in tables.iterdir() if (t / "_delta_log").is_dir()
        for f in (t / "_delta_log").iterdir() if f.name.endswith(".json")
    )


def _staging_has_files(root: Path) -> bool:
    staging = root / "_staging"
    return staging.is_dir() and any(any(d.iterdir()) for d in staging.iterdir() if d.is_dir())


def after(seconds: float) -> Callable[[Path, float], bool]:
    return lambda root, t0: time.monotonic() - t0 >= seconds


def commits(n: int, base: int) -> Callable[[Path, float], bool]:
    return lambda root, t0: _log_entries(root) >= base + n


def staging(root: Path, t0: float) -> bool:
    return _staging_has_files(root)


def _kill_once(root: Path, trace: Path, when: Callable[[Path, float], bool]) -> str:
    """Start an ingest of ``trace``; SIGKILL it once ``when`` holds. Returns how it ended."""
    proc = start_ingest(root, [trace])
    t0 = time.monotonic()
    try:
        while proc.poll() is None:
            if when(root, t0):
                proc.kill()
                proc.wait()
                return "killed"
            if time.monotonic() - t0 > 120:
                raise AssertionError("ingest did not finish in 120 s")
            time.sleep(0.002)
        return "finished"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def _campaign(tmp_path: Path, source: Path, points: list[Callable[[int], Callable[[Path, float], bool]]]) -> Counter[str]:
    """One kill per point, each on a fresh copy of ``source`` (trailing spaces: new bytes)."""
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([source]).ok  # the warehouse holds something before the first kill
    data = source.read_bytes()
    tally: Counter[str] = Counter()
    for k, point in enumerate(points, 1):
        trace = tmp_path / "in" / f"copy{k}.json"
        trace.parent.mkdir(exist_ok=True)
        trace.write_bytes(data + b" " * k)
        before = visible_state(wh.root)
        ended = _kill_once(wh.root, trace, point(_log_entries(wh.root)))
        tally[ended] += 1
        state = visible_state(wh.root)
        rid = run_id_of(trace)
        if any(r == rid for r, _ in state["runs"]):  # killed after the final commit: whole run
            tally["committed"] += 1
            state = {
                "runs": [x for x in state["runs"] if x[0] != rid],
                "counts": {t: {r: n for r, n in c.items() if r != rid} for t, c in state["counts"].items()},
            }
        assert state == before, f"kill point {k}: the visible warehouse changed"
        assert incomplete_runs(wh.root) == [], f"kill point {k}"
        report = wh.verify()
        assert report.ok, (k, report.problems)
        if orphan_ingests(wh.root) or staging_leftovers(wh.root):
            tally["left leftovers"] += 1
        # the next ingest succeeds and removes every leftover
        result = wh.ingest([trace]).results[0]
        assert result.outcome in ("ingested", "skipped"), result
        assert orphan_ingests(wh.root) == set(), f"kill point {k}"
        assert staging_leftovers(wh.root) == [], f"kill point {k}"
        assert incomplete_runs(wh.root) == []
    return tally


@pytest.fixture(scope="module")
def medium(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kill") / "medium.json"
    write_trace(path, SynthConfig(size_bytes=2_000_000, layers=2, seed=51, python=True))
    return path


def test_kill_at_a_few_points(tmp_path: Path, medium: Path) -> None:
    points = [
        lambda base: staging,  # mid-stream: staging files being written
        lambda base: commits(1, base),  # after the first child-table commit
        lambda base: commits(4, base),  # deeper into the commit sequence
    ]
    tally = _campaign(tmp_path, medium, points)
    assert tally["killed"] >= 2, tally


def _uninterrupted(tmp_path: Path, source: Path) -> tuple[float, int]:
    """How long an ingest of a new copy of ``source`` takes when nothing stops it, and how many
    commits (log entries) it writes: the kill points are spread over that run, whatever this
    machine's speed (fixed points at 0.1 s steps left a third of them after the end once ingest
    got faster)."""
    wh = Warehouse(tmp_path / "probe")
    assert wh.ingest([source]).ok  # as _campaign: a warehouse that holds something
    trace = tmp_path / "probe-in" / "copy.json"
    trace.parent.mkdir(exist_ok=True)
    trace.write_bytes(source.read_bytes() + b"\n")
    base = _log_entries(wh.root)
    proc = start_ingest(wh.root, [trace])
    t0 = time.monotonic()
    proc.communicate(timeout=120)
    seconds = time.monotonic() - t0
    assert proc.returncode == 0
    return seconds, _log_entries(wh.root) - base


@pytest.mark.slow
def test_kill_at_sixty_points(tmp_path: Path, medium: Path) -> None:
    seconds, n_commits = _uninterrupted(tmp_path, medium)
    assert n_commits >= 3, n_commits
    points: list[Callable[[int], Callable[[Path, float], bool]]] = []
    for i in range(30):  # time-based, spread over start-up, parsing and committing
        points.append(lambda base, s=seconds * i / 30: after(s))
    points += [lambda base: staging] * 5
    for n in range(1, n_commits):  # every commit boundary but the last (children, runs, ingest_log)
        points.append(lambda base, n=n: commits(n, base))
        points.append(lambda base, n=n: commits(n, base))
    points = points[:60]
    tally = _campaign(tmp_path, medium, points)
    print(f"\nkill points: {len(points)} over {seconds:.2f} s and {n_commits} commits, {dict(tally)}")
    assert tally["killed"] >= 0.75 * len(points), tally
