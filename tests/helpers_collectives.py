"""A 4-rank job made from the shared NCCL trace, with one rank arriving late by known delays.

The shared ``nccl_parser_config__nccl_data.json.gz`` is rank 0 of a 2-rank job (21 NCCL
kernels: 6 broadcasts, 15 all-reduces). :func:`make_job` writes ``rank-R.pt.trace.json.gz``
for R in 0..3: ``distributedInfo`` and every collective's args say world size 4, group
``[0, 1, 2, 3]``; the i-th NCCL kernel (in time order) of rank R starts at
``t_i + offset_R`` and of the late rank at ``t_i + delay_i``; every kernel of the others ends
when the late rank's does (they wait inside the kernel, as NCCL does), so the transfer after
the last arrival lasts the original ``dur_i``. :func:`expected` gives the figures this
construction implies, computed from the same numbers and not from tracewh.

Run as a script to write a job: ``python tests/helpers_collectives.py OUT_DIR``.
"""

from __future__ import annotations

import copy
import gzip
import json
import re
import sys
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

WORLD = 4
LATE_RANK = 2
#: per-rank start offsets (ns) of the ranks that arrive early (below 1 us)
OFFSETS_NS = {0: 0, 1: 250, 3: 750}
SOURCE = "nccl_parser_config__nccl_data.json.gz"
_DTYPE_BYTES = {"Float": 4, "Long": 8}  # the dtypes of the source trace (PyTorch sizes)


def delay_ns(i: int) -> int:
    """How late the late rank starts the i-th collective (ns): 40 us + 7 us x (i mod 5) + 3 ns."""
    return 40_000 + 7_000 * (i % 5) + 3


@dataclass(frozen=True)
class Collective:
    """One constructed collective: what each rank's kernel looks like."""

    seq: int
    collective: str  # all_reduce | broadcast
    in_nelems: int
    dtype: str
    t_ns: int  # original start
    dur_ns: int  # original duration

    @property
    def msg_bytes(self) -> int:
        return self.in_nelems * _DTYPE_BYTES[self.dtype]


def _ns(us: float | int | str) -> int:
    return int((Decimal(str(us)) * 1000).to_integral_value())


def _is_nccl(e: dict[str, Any]) -> bool:
    return e.get("ph") == "X" and e.get("cat") == "kernel" and str(e.get("name", "")).startswith("nccl")


def _collectives(events: list[dict[str, Any]]) -> list[tuple[int, Collective]]:
    idx = sorted((i for i, e in enumerate(events) if _is_nccl(e)), key=lambda i: _ns(events[i]["ts"]))
    out = []
    for seq, i in enumerate(idx):
        a = events[i]["args"]
        kind = {"allreduce": "all_reduce", "broadcast": "broadcast"}[a["Collective name"]]
        out.append((i, Collective(seq, kind, int(a["In msg nelems"]), a["dtype"],
                                  _ns(events[i]["ts"]), _ns(events[i]["dur"]))))
    return out


#: ``make_job(relabel=KINDS)``: "Collective name" and out/in elements of the i-th collective
#: (i mod 3): an all-gather's output is the group's inputs, a reduce-scatter's one share of its
#: input, an all-to-all's as large as its input (as PyTorch's record_param_comms writes them)
KINDS = (("_allgather_base", "all_gather", WORLD, 1), ("reduce_scatter_tensor", "reduce_scatter", 1, WORLD),
         ("all_to_all", "all_to_all", 1, 1))  # fmt: skip


def make_job(traces: Path, out: Path, relabel: tuple[tuple[str, str, int, int], ...] = ()) -> list[Path]:
    """Write the 4 ranks' traces into ``out``; their paths, rank order.

    ``relabel``: (collective name, kind, out multiplier, out divisor) given to the i-th
    collective by i mod its length (:data:`KINDS`); empty: the source's own.
    """
    with gzip.open(traces / SOURCE, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    out.mkdir(parents=True, exist_ok=True)
    ranks = list(range(WORLD))
    paths = []
    for rank in ranks:
        d = copy.deepcopy(doc)
        info = d["distributedInfo"]
        info.update(rank=rank, world_size=WORLD)
        for pg in info.get("pg_config", []):
            pg.update(pg_size=WORLD, ranks=ranks)
        events = d["traceEvents"]
        for e in events:
            a = e.get("args")
            if isinstance(a, dict) and "Process Group Ranks" in a:
                a["Process Group Ranks"] = str(ranks)
                a["Group size"] = WORLD
        for seq, (i, c) in enumerate(_collectives(events)):
            e = events[i]
            if relabel:
                name, _, mul, div = relabel[seq % len(relabel)]
                e["args"]["Collective name"] = name
                e["args"]["Out msg nelems"] = c.in_nelems * mul // div
            late = delay_ns(seq)
            start = c.t_ns + (late if rank == LATE_RANK else OFFSETS_NS[rank])
            end = c.t_ns + late + c.dur_ns
            e["ts"] = f"@@{start}@@"
            e["dur"] = f"@@{end - start}@@"
        text = json.dumps(d)
        # exact decimal microseconds (3 decimals) instead of float text
        text = re.sub(r'"@@(-?\d+)@@"', lambda m: f"{int(m[1]) // 1000}.{int(m[1]) % 1000:03d}", text)
        path = out / f"rank-{rank}.pt.trace.json.gz"
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
        paths.append(path)
    return paths


def constructed(traces: Path) -> list[Collective]:
    """The collectives of the job, in sequence order."""
    with gzip.open(traces / SOURCE, "rt", encoding="utf-8") as f:
        doc = json.load(f)
    return [c for _, c in _collectives(doc["traceEvents"])]


def expected(traces: Path) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """Per collective: seq, skew_ns, last_rank, comm_ns, busbw_gbps, wait_ns; per rank: wait_ns."""
    rows = []
    waits = dict.fromkeys(range(WORLD), 0)
    n = WORLD
    for c in constructed(traces):
        late = delay_ns(c.seq)
        starts = {r: c.t_ns + (late if r == LATE_RANK else OFFSETS_NS[r]) for r in range(WORLD)}
        last = max(starts.values())
        for r, s in starts.items():
            waits[r] += last - s
        factor = 2 * (n - 1) / n if c.collective == "all_reduce" else 1.0
        rows.append({
            "seq": c.seq, "collective": c.collective, "msg_bytes": c.msg_bytes,
            "skew_ns": last - min(starts.values()), "last_rank": LATE_RANK,
            "comm_ns": c.dur_ns, "busbw_gbps": c.msg_bytes / c.dur_ns * factor,
            "wait_ns": sum(last - s for s in starts.values()),
        })
    return rows, waits


if __name__ == "__main__":
    here = Path(__file__).resolve().parent.parent / ".." / "shared" / "traces"
    for p in make_job(here.resolve(), Path(sys.argv[1])):
        print(p)
