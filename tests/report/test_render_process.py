"""Charts render in a child process (vl-convert holds the GIL while it renders).

The child answers in order, names a chart it cannot draw, fails what is pending when it
dies, and never outlives the process that started it (kill -9 included).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tracewh.report import render
from tracewh.report.render import ChartRenderError
from tracewh.report.render_process import RenderProcess, _wait_exit

BAR = {"data": {"values": [{"k": "a", "v": 1}, {"k": "b", "v": 2}]}, "mark": "bar",
       "encoding": {"x": {"field": "k", "type": "nominal"}, "y": {"field": "v", "type": "quantitative"}}}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) counts as gone
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return f.read().split()[2] != "Z"


def test_charts_come_back_in_order_as_in_process() -> None:
    with RenderProcess("svg") as charts:
        jobs = [charts.submit(f"c{i}", BAR) for i in range(3)]
        png = charts.submit("p", BAR, "png")
        images = [j.result(timeout=60) for j in jobs]
    assert all(i.startswith(b"<svg") for i in images)
    assert images[0] == render.image(BAR, key="x", fmt="svg")  # the same bytes as in process
    assert png.result().startswith(b"\x89PNG")
    assert charts._proc.returncode == 0  # it exited when its input closed


def test_threads_submitting_at_once_each_get_their_own_chart() -> None:
    # the report's history thread hands its charts over while the main thread hands over
    # the run's: each answer must go to the chart it was drawn from
    import threading

    def titled(name: str) -> dict[str, object]:
        return {**BAR, "title": name}

    got: dict[str, bytes] = {}
    with RenderProcess("svg") as charts:
        barrier = threading.Barrier(4)

        def submit(t: int) -> None:
            barrier.wait()
            jobs = {f"t{t}-{i}": charts.submit(f"t{t}-{i}", titled(f"t{t}-{i}")) for i in range(5)}
            got.update({key: job.result(timeout=60) for key, job in jobs.items()})

        threads = [threading.Thread(target=submit, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
    assert len(got) == 20
    assert all(f">{key}</text>".encode() in image for key, image in got.items())


def test_a_chart_it_cannot_draw_is_named_and_the_others_are_drawn() -> None:
    bad = {"mark": "no-such-mark", "data": {"values": []}}
    with RenderProcess() as charts:
        wrong, right = charts.submit("broken", bad), charts.submit("fine", BAR)
        with pytest.raises(ChartRenderError, match="'broken'") as info:
            wrong.result(timeout=60)
        assert info.value.key == "broken"
        assert right.result(timeout=60).startswith(b"<svg")


def test_a_dead_child_fails_what_is_pending() -> None:
    with pytest.raises(KeyboardInterrupt), RenderProcess() as charts:
        os.kill(charts._proc.pid, signal.SIGKILL)
        charts._proc.wait()
        job = charts.submit("late", BAR)
        with pytest.raises(ChartRenderError, match="exit status -9"):
            job.result(timeout=60)
        raise KeyboardInterrupt  # leaving by an exception kills (here: reaps) the child
    assert charts._proc.returncode == -signal.SIGKILL


def test_leaving_by_an_exception_stops_the_child_at_once() -> None:
    with pytest.raises(RuntimeError), RenderProcess() as charts:
        pid = charts._proc.pid
        for i in range(20):
            charts.submit(f"c{i}", BAR)
        raise RuntimeError("the report failed")
    assert not _alive(pid)


def test_the_child_dies_with_its_parent() -> None:
    # a parent process starts a renderer, says the child's pid and is killed with -9
    code = textwrap.dedent("""
        import sys, time
        from tracewh.report.render_process import RenderProcess
        charts = RenderProcess()
        print(charts._proc.pid, flush=True)
        time.sleep(60)
    """)
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True) as parent:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.kill()
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_waiting_for_a_child_returns_its_exit_status_when_it_ends() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time, sys; time.sleep(0.05); sys.exit(3)"])
    assert _wait_exit(proc, 30) == 3
    assert proc.returncode == 3


def test_waiting_for_a_child_that_does_not_end_times_out_and_leaves_it_to_the_caller() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            _wait_exit(proc, 0.2)
        assert proc.poll() is None  # still running: close() kills it then
    finally:
        proc.kill()
        proc.wait()


def test_waiting_for_a_child_already_reaped_gives_its_status(monkeypatch: pytest.MonkeyPatch) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.exit(4)"])
    proc.wait()  # reaped: its pid may name another process by now, so no pidfd is opened

    def no_pidfd(pid: int) -> int:
        raise AssertionError(f"pidfd_open({pid}) for a reaped child")

    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    assert _wait_exit(proc, 30) == 4
