"""The Delta log replay every query command starts with, alone: every table of a warehouse.

``python -m bench.bench_deltalog [WH ...] [--rounds N] [--baseline TREE]``

Default warehouses: ``bench_fleet``'s (``wh-300``, ``wh-3000``, ``wh-30000`` under its root,
those that exist; ``make bench`` runs this before ``bench_fleet`` builds them, so a first
``make bench`` skips it with a note).

Replays each table's log of each warehouse (``tracewh.storage.deltalog.live_files``: what a
query's snapshot reads; ``live_adds`` also reads each file's statistics) in one process,
``--rounds`` times after one unmeasured pass (the checkpoint cache filled), and prints the
median CPU seconds of a round and the files listed. With ``--baseline TREE`` (a checkout of
another tracewh), that tree's ``deltalog`` module runs in the same rounds, interleaved, and
the ratio is printed; both must list the same files in the same order.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from tracewh.storage import deltalog


def _module(tree: Path) -> ModuleType:
    """``tracewh/storage/deltalog.py`` of another checkout, loaded under its own name."""
    spec = importlib.util.spec_from_file_location("baseline_deltalog", tree / "tracewh/storage/deltalog.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def _round(mod: Any, tables: list[str], fn: str) -> tuple[float, list[Any]]:
    t0 = time.process_time()
    found = [getattr(mod, fn)(t) for t in tables]
    return time.process_time() - t0, found


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="bench_deltalog")
    ap.add_argument("warehouses", nargs="*", type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline", type=Path, default=None)
    args = ap.parse_args(list(argv) if argv is not None else [])
    if not args.warehouses:
        from bench.bench_fleet import _root

        args.warehouses = [w for n in (300, 3000, 30000) if (w := _root(None) / f"wh-{n}").exists()]
        if not args.warehouses:
            print("no fleet warehouses yet (`python -m bench.bench_fleet` builds them): skipped")
            return
    sides: dict[str, Any] = {"tracewh": deltalog}
    if args.baseline is not None:
        sides["baseline"] = _module(args.baseline)
    for wh in args.warehouses:
        tables = sorted(str(wh / "tables" / t) for t in os.listdir(wh / "tables"))
        for fn in ("live_files", "live_adds"):
            times: dict[str, list[float]] = {k: [] for k in sides}
            lists = {k: _round(m, tables, fn)[1] for k, m in sides.items()}  # unmeasured
            if len(sides) > 1:
                assert lists["tracewh"] == lists["baseline"], f"{wh}: {fn} lists differ"
            for _ in range(args.rounds):
                for k, m in sides.items():
                    times[k].append(_round(m, tables, fn)[0])
            files = sum(len(f or []) for f in lists["tracewh"])
            med = {k: statistics.median(v) for k, v in times.items()}
            line = f"{wh.name}: {fn} of {len(tables)} tables ({files:,} files): {med['tracewh']:.3f} s CPU"
            if "baseline" in med:
                line += f", baseline {med['baseline']:.3f} s: {med['tracewh'] / med['baseline']:.2f}x"
            print(line + f" (median of {args.rounds})")


if __name__ == "__main__":
    main(sys.argv[1:])
