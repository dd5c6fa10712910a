"""Charts rendered in a child process, beside the report's queries.

vl-convert (1.9) holds the GIL while it renders: ~0.1 s a chart and ~0.5 s for its engine's
start, during which no other Python thread of the process runs (a Python loop of 0.08 s took
1.08 s beside a thread rendering charts). Rendering in threads therefore stopped the report's
queries and spec building rather than overlapping them. :class:`RenderProcess` renders in one
child process (``python -m tracewh.report.render_process``) instead: its engine starts while
the parent queries, and each chart renders on the other core.

The child

- dies with the process that started it, however that one ends (kill -9 included), and
  ignores Ctrl-C (:func:`~tracewh.core.stopping.die_with_parent`); it also ends when its
  standard input closes;
- reads requests (a chart's key, Vega-Lite spec and format) and answers each in order, on a
  private pipe: length-prefixed pickles between two processes of the same tracewh (nothing
  else writes on it: the child's own standard output is sent to its standard error);
- renders with :func:`tracewh.report.render.image`, whose errors come back as
  :class:`~tracewh.report.render.ChartRenderError`. A child that dies (a vl-convert panic
  aborts its process) fails every chart not yet answered with one, naming the exit status.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import select
import subprocess
import sys
import threading
from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

from tracewh.report.render import ChartRenderError

#: Seconds a child is given to finish its charts and exit after its input closes.
CLOSE_TIMEOUT_S = 30.0


def _frame(obj: object) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return len(data).to_bytes(8, "big") + data


def _read_frame(stream: IO[bytes]) -> Any:
    """The next object on ``stream`` (``None`` at its end, a whole frame or nothing)."""
    head = stream.read(8)
    if len(head) < 8:
        return None
    size = int.from_bytes(head, "big")
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)  # a pipe to a child this process started


class RenderProcess:
    """A child process that renders charts in order; :meth:`submit` returns a future of the image.

    ``with RenderProcess("svg") as charts: job = charts.submit(key, spec); ...; job.result()``.
    Leaving the block normally closes the child's input and waits for it; leaving it by an
    exception kills it.
    """

    def __init__(self, fmt: str = "svg") -> None:
        import tracewh

        env = dict(os.environ)
        # the child imports the same tracewh as this process, wherever that one came from
        root = str(Path(tracewh.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        self._proc = subprocess.Popen(  # this interpreter, a module of this package
            [sys.executable, "-m", __name__, str(os.getpid()), fmt],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, close_fds=True,
        )
        self._pending: deque[tuple[str, Future[bytes]]] = deque()
        self._lock = threading.Lock()
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        # a spec is larger than a pipe's buffer: writes wait in a thread, not in the caller
        self._writer = threading.Thread(target=self._write, name="tracewh-chart-writer", daemon=True)
        self._reader = threading.Thread(target=self._read, name="tracewh-chart-reader", daemon=True)
        self._writer.start()
        self._reader.start()

    def submit(self, key: str, vl_spec: dict[str, Any], fmt: str = "svg") -> Future[bytes]:
        """Render ``vl_spec`` as ``fmt`` in the child; a future of the image's bytes."""
        job: Future[bytes] = Future()
        with self._lock:
            if not self._reader.is_alive():
                job.set_exception(self._stopped(key))
                return job
            # queued in the same order as answers are awaited, whichever thread submits
            self._pending.append((key, job))
            self._outbox.put(_frame((key, vl_spec, fmt)))
        return job

    def close(self) -> None:
        """Let the child finish the charts it has, then wait for it to exit."""
        self._outbox.put(None)
        self._writer.join()
        try:
            _wait_exit(self._proc, CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
        self._reader.join()

    def kill(self) -> None:
        """Stop the child now (SIGKILL) and reap it; charts not yet answered fail."""
        with contextlib.suppress(OSError):
            self._proc.kill()
        self._outbox.put(None)
        self._proc.wait()
        self._reader.join()

    def __enter__(self) -> RenderProcess:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None:
            self.close()
        else:
            self.kill()

    def _write(self) -> None:
        stream = self._proc.stdin
        assert stream is not None
        try:
            while (data := self._outbox.get()) is not None:
                stream.write(data)
                stream.flush()
        except OSError:  # the child died: the reader fails what is pending
            pass
        finally:
            with contextlib.suppress(OSError):
                stream.close()

    def _read(self) -> None:
        stream = self._proc.stdout
        assert stream is not None
        try:
            while (answer := _read_frame(stream)) is not None:
                with self._lock:
                    key, job = self._pending.popleft()
                kind, value = answer
                if kind == "ok":
                    job.set_result(value)
                else:
                    job.set_exception(ChartRenderError(key, value))
        finally:
            stream.close()
            with self._lock:
                pending = list(self._pending)
                self._pending.clear()
            for key, job in pending:
                job.set_exception(self._stopped(key))

    def _stopped(self, key: str) -> ChartRenderError:
        code = self._proc.poll()
        how = "was stopped" if code is None else f"ended with exit status {code}"
        return ChartRenderError(key, f"the chart renderer process {how} before drawing it")


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """``proc.wait(timeout)``, woken by the child's exit itself where Linux gives a pidfd.

    ``Popen.wait`` with a timeout polls with doubling sleeps: a child that exits in ~12 ms was
    seen at 16 or 32 ms, on the report's critical path. Raises ``subprocess.TimeoutExpired``.
    """
    if proc.returncode is not None:  # reaped: its pid may name another process by now
        return proc.returncode
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd here, or the child was reaped meanwhile
        return proc.wait(timeout)
    try:
        waiter = select.poll()
        waiter.register(fd, select.POLLIN)
        if not waiter.poll(timeout * 1000):
            raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(fd)
    return proc.wait()


def _serve(inp: IO[bytes], out: IO[bytes], fmt: str) -> None:
    """Answer each request on ``inp`` on ``out``, in order, until ``inp`` ends."""
    from tracewh.report import render

    render.warm_up(fmt)  # the engine starts while the parent's first queries run
    while (request := _read_frame(inp)) is not None:
        key, vl_spec, chart_fmt = request
        try:
            answer: tuple[str, object] = ("ok", render.image(vl_spec, key=key, fmt=chart_fmt))
        except ChartRenderError as exc:
            answer = ("error", exc.reason)
        except Exception as exc:  # any failure is this chart's, named to the parent
            answer = ("error", f"{type(exc).__name__}: {exc}")
        out.write(_frame(answer))
        out.flush()


def main(argv: list[str]) -> int:
    """The child: ``python -m tracewh.report.render_process PARENT_PID FORMAT``."""
    from tracewh.core.stopping import die_with_parent

    die_with_parent(int(argv[0]))
    # the answers go on the original standard output; anything else printed goes to stderr
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    _serve(sys.stdin.buffer, out, argv[1] if len(argv) > 1 else "svg")
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    # every answer is flushed as it is written and the child holds nothing else: end without
    # the interpreter's and vl-convert's teardown (30-50 ms the parent's close waited for),
    # as multiprocessing's children end; an exception above still ends it with a traceback
    with contextlib.suppress(Exception):
        sys.stdout.flush()  # fd 1 is stderr's here: what was printed to it
        sys.stderr.flush()
    os._exit(code)
