"""`diff --level op`: calls are CPU operator calls, kernels a column of their own (issue 30, item 4).

Expected counts come from plain-``json`` loops over two real A100 traces: each GPU op's
launch call by correlation id, the innermost ``cpu_op`` enclosing that call on its thread;
an operator's calls are the distinct ``cpu_op`` events so found, its kernels the GPU ops.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from helpers_ingest import GPU_CATS, RUNTIME_CATS, load_trace, ns, run_id_of
from typer.testing import CliRunner

from tracewh.api import Warehouse
from tracewh.cli import app

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces"
A = TRACES / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
B = TRACES / "critical_path__end_to_end__simple_add__input__trace.json.gz"


def _by_operator(path: Path) -> dict[str, tuple[int, int]]:
    """op name -> (distinct cpu_op calls that launched GPU ops, GPU ops) from the raw trace."""
    events = load_trace(path, exact=True)["traceEvents"]
    launch: dict[Any, dict[str, Any]] = {}
    for e in events:
        c = (e.get("args") or {}).get("correlation")
        if e.get("ph") == "X" and e.get("cat") in RUNTIME_CATS and c is not None:
            launch.setdefault(c, e)
    ops_by_thread: dict[tuple[Any, Any], list[tuple[int, int, int]]] = defaultdict(list)
    for i, e in enumerate(events):
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and ns(e.get("dur")):
            t = ns(e["ts"]) or 0
            ops_by_thread[(e["pid"], e["tid"])].append((t, t + (ns(e["dur"]) or 0), i))
    calls: dict[str, set[int]] = defaultdict(set)
    kernels: dict[str, int] = defaultdict(int)
    for e in events:
        c = (e.get("args") or {}).get("correlation")
        if not (e.get("ph") == "X" and e.get("cat") in GPU_CATS and e.get("dur") is not None):
            continue
        if c not in launch:  # unlinked: no launch call found
            kernels["(unlinked)"] += 1
            continue
        call = launch[c]
        t = ns(call["ts"]) or 0
        enclosing = [(t0, -(t1 - t0), i) for t0, t1, i in ops_by_thread[(call["pid"], call["tid"])] if t0 <= t < t1]
        if not enclosing:
            kernels["(no CPU operator)"] += 1
            continue
        i = max(enclosing)[2]
        calls[events[i]["name"]].add(i)
        kernels[events[i]["name"]] += 1
    return {name: (len(calls.get(name, ())), n) for name, n in kernels.items()}


def test_op_level_calls_are_operator_calls(tmp_path: Path) -> None:
    if not (A.exists() and B.exists()):
        pytest.skip("shared traces absent")
    wh = Warehouse(tmp_path / "wh")
    assert wh.ingest([A, B]).ok
    got = wh.diff(run_id_of(A), run_id_of(B), level="op")
    for side, path in (("a", A), ("b", B)):
        want = _by_operator(path)
        have: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for row in got.iter_rows(named=True):
            name = row["name"] if row["name"].startswith("(") else row["name"].split(" ", 1)[0]
            have[name][0] += row[f"calls_{side}"]
            have[name][1] += row[f"kernels_{side}"]
        assert {k: tuple(v) for k, v in have.items() if v != [0, 0]} == want, side
        assert any(c < k for c, k in want.values())  # some operator launches several kernels
    res = CliRunner().invoke(app, ["diff", run_id_of(A), run_id_of(B), "--level", "op", "-w", str(wh.root)])
    assert res.exit_code == 0 and "kernels" in res.output, res.output
