"""HTA's critical path of one trace, as JSON (runs in the bench-only HTA venv, not tracewh's).

Usage: HTA_DISABLE_NS_ROUNDING=1 /work/hta-venv/bin/python bench/hta_critical_path.py TRACE [STEP_INDEX]

STEP_INDEX: the k-th ``ProfilerStep`` annotation of the trace (HTA's ``instance_id``); without
it, the whole trace (``annotation=""``). Prints ``{"total_ns", "by_bound", "edges", "seconds"}``:
the sum of the critical path's edge weights and per HTA bound (``bound_by``; "" is
``dependency``), in ns (HTA's microseconds x 1000), and the path's edge count.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    trace = Path(sys.argv[1]).resolve()
    step = int(sys.argv[2]) if len(sys.argv) > 2 else None
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(trace, Path(tmp) / trace.name)
        t0 = time.perf_counter()
        ta = TraceAnalysis(trace_dir=tmp)
        rank = next(iter(ta.t.traces))
        annotation, instance = ("ProfilerStep", step) if step is not None else ("", None)
        cp, ok = ta.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance)
        seconds = time.perf_counter() - t0
        if not ok:
            print(json.dumps({"error": "HTA's critical path failed"}))
            return
        df = cp.get_critical_path_breakdown()
        by = {(k or "dependency"): float(v) * 1000 for k, v in df.groupby("bound_by").duration.sum().items()}
        print(json.dumps({"total_ns": float(df.duration.sum()) * 1000, "by_bound": by,
                          "edges": len(df), "seconds": round(seconds, 3)}))


if __name__ == "__main__":
    main()
