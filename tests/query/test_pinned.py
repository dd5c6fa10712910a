"""A session's memo (``Pinned.memoized``): once per key across threads, failures not kept.

A report's threads ask for the same run set at once; the second waits for the first's answer
instead of computing it again. A computation that fails is not remembered, and a thread
that asks for the key it is computing (from inside ``compute``) is not left waiting on itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from tracewh.query.pinned import Pinned


@pytest.fixture
def pinned() -> Pinned:
    return Pinned(con=duckdb.connect(), tables=[], live={}, temp=Path("."))


def _second_asks_while_the_first_computes(ask: Callable[[], None], started: threading.Event) -> None:
    """``ask`` in one thread, then in a second once the first is computing; both joined."""
    first = threading.Thread(target=ask)
    first.start()
    started.wait(5)
    second = threading.Thread(target=ask)
    second.start()
    first.join(5)
    second.join(5)


def test_threads_asking_at_once_compute_once(pinned: Pinned) -> None:
    calls: list[int] = []
    started = threading.Event()

    def compute() -> list[int]:
        calls.append(1)
        started.set()
        time.sleep(0.2)  # the other thread asks meanwhile
        return [42]

    answers: list[list[int]] = []

    def ask() -> None:
        answers.append(pinned.memoized("k", compute))

    _second_asks_while_the_first_computes(ask, started)
    assert calls == [1]
    assert answers == [[42], [42]] and answers[0] is answers[1]


def test_a_failure_is_not_kept(pinned: Pinned) -> None:
    def fail() -> int:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        pinned.memoized("k", fail)
    assert pinned.memoized("k", lambda: 7) == 7
    assert pinned.memoized("k", lambda: 8) == 7  # kept once it succeeded


def test_waiting_threads_get_the_error(pinned: Pinned) -> None:
    started = threading.Event()

    def fail() -> int:
        started.set()
        time.sleep(0.2)
        raise ValueError("boom")

    errors: list[BaseException] = []

    def ask() -> None:
        try:
            pinned.memoized("k", fail)
        except ValueError as exc:
            errors.append(exc)

    _second_asks_while_the_first_computes(ask, started)
    assert len(errors) == 2


def test_asking_again_from_compute_does_not_wait_on_itself(pinned: Pinned) -> None:
    def outer() -> int:
        return pinned.memoized("k", lambda: 3) + 1  # the same key, from the same thread

    assert pinned.memoized("k", outer) == 4
    assert pinned.memoized("k", lambda: 0) == 4
