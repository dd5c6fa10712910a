"""Run every CLI command many times as a real process and tally the exit codes.

Used by ``tests/cli/test_exits.py`` (a few rounds in the default suite, 20 in
``make test-all``) and runnable by hand for the figures of a report::

    .venv/bin/python tests/cli_sweep.py WAREHOUSE TRACES_DIR ROUNDS OUT_DIR
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path


def commands(traces: Path, out: Path) -> dict[str, list[str]]:
    """Every command of the CLI, with arguments that exercise it on a small warehouse."""
    return {
        "runs": ["runs"],
        "runs-json": ["runs", "--format", "json"],
        "runs-csv": ["runs", "--format", "csv"],
        "verify": ["verify"],
        "verify-json": ["verify", "--format", "json"],
        "sql": ["sql", "SELECT count(*) AS n FROM gpu_ops"],
        "sql-runs-csv": ["sql", "SELECT * FROM runs", "--format", "csv"],
        "kernels": ["kernels"],
        "gaps": ["gaps", "--largest", "5"],
        "gaps-breakdown": ["gaps", "--breakdown"],
        "launches": ["launches"],
        "queue": ["queue"],
        "steps": ["steps"],
        "ops": ["ops"],
        "ops-cpu": ["ops", "--cpu"],
        "memcpy": ["memcpy"],
        "breakdown": ["breakdown"],
        "ranks": ["ranks"],
        "diff": ["diff", "latest", "latest"],
        "history": ["history"],
        "check": ["check"],
        "report": ["report", "--out", str(out / "report")],
        "report-site": ["report", "--site", str(out / "site")],
        "export": ["export", "latest", "--out", str(out / "e.json.gz")],
        "flame": ["flame", "latest", "--out", str(out / "f.folded")],
        "modules": ["modules"],
        "memory": ["memory"],
        "memory-timeline": ["memory", "--view", "timeline"],
        "roofline": ["roofline"],
        "changes": ["changes"],
        "history-json": ["history", "--format", "json"],
        "sql-csv-out": ["sql", "SELECT * FROM runs", "--out", str(out / "runs.csv")],
        "sql-refused": ["sql", f"COPY (SELECT 1) TO '{out / 'x.csv'}'"],
        "sql-bad": ["sql", "SELEC 1"],
        "unknown-run": ["kernels", "--run", "no-such-run"],
        "bad-option": ["kernels", "--top", "-3"],
        "synth": ["synth", str(out / "synth.pt.trace.json.gz"), "--steps", "1"],
        "capture-no-script": ["capture"],
        "ingest-missing": ["ingest", str(out / "missing.json")],
        "ingest-again": ["ingest", str(traces)],
        "compact": ["compact"],
        "version": ["version"],
    }


@dataclass
class Sweep:
    """Exit codes per command, and the stderr of every unclean exit."""

    codes: Counter[tuple[str, int]] = field(default_factory=Counter)
    unclean: list[tuple[str, int, str]] = field(default_factory=list)

    @property
    def aborts(self) -> int:
        return sum(n for (_, rc), n in self.codes.items() if rc in (-6, 134))

    def summary(self) -> str:
        by_rc: Counter[int] = Counter()
        for (_, rc), n in self.codes.items():
            by_rc[rc] += n
        return f"{sum(by_rc.values())} runs, exit codes {dict(sorted(by_rc.items()))}"


def sweep(tracewh: str, warehouse: Path, traces: Path, rounds: int, out: Path,
          only: set[str] | None = None) -> Sweep:
    """Run each command ``rounds`` times (all commands in one round, then the next)."""
    result = Sweep()
    env = {k: v for k, v in os.environ.items() if k != "TRACEWH_WAREHOUSE"}
    env["TRACEWH_WAREHOUSE"] = str(warehouse)
    cmds = commands(traces, out)
    for _ in range(rounds):
        for name, args in cmds.items():
            if only is not None and name not in only:
                continue
            p = subprocess.run([tracewh, *args], capture_output=True, text=True, env=env,
                               stdin=subprocess.DEVNULL, timeout=600)
            result.codes[(name, p.returncode)] += 1
            if p.returncode not in (0, 1, 2) or "Traceback" in p.stderr:
                result.unclean.append((name, p.returncode, p.stderr[-400:]))
    return result


if __name__ == "__main__":
    tw = str(Path(sys.executable).with_name("tracewh"))
    res = sweep(tw, Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), Path(sys.argv[4]))
    for key, n in sorted(res.codes.items()):
        print(key, n)
    for name, rc, err in res.unclean:
        print("UNCLEAN", name, rc, err.replace("\n", " | "))
    print(res.summary(), "aborts", res.aborts)
