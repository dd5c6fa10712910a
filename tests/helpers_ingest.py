"""Test-only helpers for the ingest and reliability tests.

Everything here is computed independently of the ingest code: traces are read
with plain ``json``/``gzip`` (whole-file loads are fine for test fixtures), and
warehouse state is read straight from the Delta tables with ``deltalake`` and
``pyarrow``, without the DuckDB views or the ingest package.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import itertools
import json
import os
import re
import subprocess
import sys
import urllib.parse
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable

GPU_CATS = frozenset(
    {"kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "mtia_ccp_events"}
)
RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "mtia_runtime", "hip_runtime"})
CPU_OP_CATS = frozenset({"cpu_op", "Operator"})  # operators: annotations are apart
CHILD_TABLES = (
    "events", "gpu_ops", "steps", "instants", "counters", "flows", "flow_args", "python",
    "module_spans", "annotation_spans", "graph_nodes", "threads",
)
REPO = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------ traces
def load_trace(path: Path, *, exact: bool = False) -> Any:
    """The whole JSON document (``exact``: non-integer numbers as ``Decimal``)."""
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        data = f.read()
    return json.loads(data, parse_float=Decimal) if exact else json.loads(data)


def ns(value: Any) -> int | None:
    """Exact nanoseconds from decimal microseconds (an int, a Decimal or decimal text)."""
    if value is None:
        return None
    return int(Decimal(str(value)) * 1000)


def expected_rows(events: list[Any], *, skip_python: bool = False) -> dict[str, int]:
    """Rows each child table should get for a trace, counted from the JSON by phase/category."""
    out: Counter[str] = Counter()
    thread_rows: set[str] = set()
    steps: set[int] = set()
    for ev in events:
        if not isinstance(ev, dict):
            out["instants"] += 1
            continue
        ph, cat = ev.get("ph"), ev.get("cat")
        if ph == "X":
            if cat == "python_function":
                name = ev.get("name")
                module = isinstance(name, str) and name.startswith("nn.Module: ")
                if module or not skip_python:  # --skip-python keeps the nn.Module spans
                    out["python"] += 1
                if module and _span(ev):
                    out["module_spans"] += 1
                continue
            out["events"] += 1
            name = ev.get("name")
            if cat == "user_annotation" and _span(ev) and name is not None and not (
                isinstance(name, str) and name.startswith("ProfilerStep#")
            ):
                out["annotation_spans"] += 1
            if isinstance(cat, str) and cat in GPU_CATS:
                out["gpu_ops"] += 1
            name = ev.get("name")
            if (
                isinstance(name, str)
                and name.startswith("ProfilerStep#")
                and name[13:].isdigit()
                and cat != "gpu_user_annotation"
                and ev.get("ts") is not None
                and ev.get("dur") is not None
            ):
                steps.add(int(name[13:]))
        elif ph in ("s", "t", "f"):
            out["flows"] += 1
            if ev.get("args") is not None and ev.get("args") != {}:  # a non-object: {"_args": ...}
                out["flow_args"] += 1
        elif ph == "M":
            args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
            value = args.get("name", args.get("labels"))
            key = [ev.get("pid"), ev.get("tid"), ev.get("name"), value, args.get("sort_index")]
            thread_rows.add(json.dumps(key, sort_keys=True, default=str))
        elif ph == "C":
            args = ev.get("args")  # a non-object args becomes one series {"_args": ...}
            out["counters"] += len(args) if isinstance(args, dict) else int(args is not None)
        else:
            out["instants"] += 1
    out["threads"] = len(thread_rows)
    out["steps"] = len(steps)
    out["graph_nodes"] = len(captured_launches(events))
    return {t: out.get(t, 0) for t in CHILD_TABLES}


def _span(ev: dict[str, Any]) -> bool:
    """A span the linkage nests: a positive duration, a start, typed pid and tid."""
    ids = [ev.get("pid"), ev.get("tid")]
    return bool(_int_ns(ev.get("dur"))) and ev.get("ts") is not None and all(
        v is not None and not isinstance(v, list | dict) for v in ids
    )


def _int_ns(value: Any) -> int:
    """Nanoseconds of a duration as a positive int (0 for anything else)."""
    try:
        n = ns(value) if isinstance(value, int | float | Decimal) and not isinstance(value, bool) else 0
    except (ArithmeticError, ValueError):
        return 0
    return n if n is not None and n > 0 else 0


_BEGIN = re.compile(r"^(?:cuda|hip)StreamBeginCapture")
_END = re.compile(r"^(?:cuda|hip)StreamEndCapture")
_LAUNCH = re.compile(r"Memcpy|Memset|Launch(?:Cooperative)?Kernel|^mtia\w*(?:Launch|Enqueue)")


def captured_launches(events: list[Any]) -> list[tuple[int, int]]:
    """(capture, event index) of each launch between a BeginCapture and the EndCapture after it.

    Captures are numbered from 1 by begin time; a launch is a kernel, memcpy or memset call
    (not a graph launch) of a runtime category on the capturing thread.
    """
    calls: dict[tuple[Any, Any], list[tuple[int, int, str]]] = {}
    for i, ev in enumerate(events):
        if (isinstance(ev, dict) and ev.get("ph") == "X" and ev.get("cat") in RUNTIME_CATS
                and isinstance(ev.get("name"), str) and ev.get("ts") is not None):
            calls.setdefault((ev.get("pid"), ev.get("tid")), []).append((ns(ev["ts"]) or 0, i, ev["name"]))
    windows = []
    for key, rows in calls.items():
        marks = sorted((t, i, n) for t, i, n in rows if _BEGIN.match(n) or _END.match(n))
        for (t, i, n), nxt in itertools.pairwise(marks):
            if _BEGIN.match(n) and _END.match(nxt[2]):
                windows.append((t, i, nxt[0], key))
    out = []
    for k, (t0, _, t1, key) in enumerate(sorted(windows), start=1):
        out += [(k, i) for t, i, n in sorted(calls[key]) if t0 < t < t1 and _LAUNCH.search(n)
                and "GraphLaunch" not in n]
    return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_id_of(path: Path) -> str:
    """The run id the warehouse gives a file: the first 16 hex digits of its sha256."""
    return sha256(path)[:16]


# --------------------------------------------------------------- warehouse
def _table(root: Path, name: str) -> DeltaTable | None:
    uri = root / "tables" / name
    if not (uri / "_delta_log").is_dir():
        return None
    return DeltaTable(str(uri))


def _arrow(dt: DeltaTable, columns: list[str] | None = None) -> pa.Table:
    """The snapshot's rows, from its Parquet files (delta-rs's own pyarrow dataset makes the
    process abort at exit now and then: apache/arrow#34314)."""
    files = [urllib.parse.unquote(u.removeprefix("file://")) for u in dt.file_uris()]
    if not files:
        schema = pa.schema(dt.schema())
        return schema.empty_table() if columns is None else schema.empty_table().select(columns)
    return pq.read_table(files, columns=columns, partitioning=None)


def delta_arrow(uri: Path, columns: list[str] | None = None) -> pa.Table:
    """A Delta table's rows (partition columns left out), read from its snapshot's files."""
    return _arrow(DeltaTable(str(uri)), columns)


def read_runs(root: Path) -> list[dict[str, Any]]:
    """Every row of the ``runs`` table (straight from its Delta snapshot's files)."""
    dt = _table(root, "runs")
    if dt is None:
        return []
    return _arrow(dt).to_pylist()


def raw_counts(root: Path, table: str) -> Counter[tuple[str, str]]:
    """Rows per (run_id, ingest_id) in a child table, visible or not."""
    dt = _table(root, table)
    if dt is None:
        return Counter()
    t = _arrow(dt, ["run_id", "ingest_id"])
    if t.num_rows == 0:
        return Counter()
    agg = t.group_by(["run_id", "ingest_id"]).aggregate([([], "count_all")])
    return Counter(
        {
            (r, i): n
            for r, i, n in zip(
                agg.column("run_id").to_pylist(),
                agg.column("ingest_id").to_pylist(),
                agg.column("count_all").to_pylist(),
                strict=True,
            )
        }
    )


def visible_state(root: Path) -> dict[str, Any]:
    """What a reader sees: run ids with their sha and per-table visible row counts.

    The ``runs`` table is read first (a run's child rows are committed before
    it), then each child table; only rows whose ``(run_id, ingest_id)`` is in
    ``runs`` count.
    """
    runs = read_runs(root)
    keys = {(r["run_id"], r["ingest_id"]) for r in runs}
    counts: dict[str, dict[str, int]] = {}
    for table in CHILD_TABLES:
        raw = raw_counts(root, table)
        counts[table] = {r: n for (r, i), n in sorted(raw.items()) if (r, i) in keys}
    return {
        "runs": sorted((r["run_id"], r["sha256"]) for r in runs),
        "counts": counts,
    }


def incomplete_runs(root: Path) -> list[str]:
    """Runs whose child rows differ from the counts they recorded (should be empty)."""
    runs = read_runs(root)
    problems: list[str] = []
    per_run = Counter(r["run_id"] for r in runs)
    problems += [f"{r} listed {n} times" for r, n in per_run.items() if n > 1]
    raw = {t: raw_counts(root, t) for t in CHILD_TABLES}
    for run in runs:
        recorded = json.loads(run["rows_json"] or "{}")
        for table in CHILD_TABLES:
            have = raw[table].get((run["run_id"], run["ingest_id"]), 0)
            if have != recorded.get(table, 0):
                problems.append(f"{run['run_id']} {table}: {have} != {recorded.get(table, 0)}")
    return problems


def orphan_ingests(root: Path) -> set[str]:
    """ingest_ids with child rows but no runs row."""
    visible = {r["ingest_id"] for r in read_runs(root)}
    found: set[str] = set()
    for table in CHILD_TABLES:
        found |= {i for (_, i) in raw_counts(root, table)} - visible
    return found


def staging_leftovers(root: Path) -> list[str]:
    folder = root / "_staging"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def visible_column(root: Path, table: str, run_id: str, columns: list[str]) -> list[dict[str, Any]]:
    """Visible rows of one run in one table (selected columns)."""
    ingest = {r["run_id"]: r["ingest_id"] for r in read_runs(root)}[run_id]
    dt = _table(root, table)
    assert dt is not None
    t = _arrow(dt, ["run_id", "ingest_id", *columns])
    t = t.filter(pc.and_(pc.equal(t["run_id"], run_id), pc.equal(t["ingest_id"], ingest)))
    return t.select(columns).to_pylist()


# ------------------------------------------------------------- subprocesses
def driver_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    env.pop("TRACEWH_WAREHOUSE", None)
    return env


INGEST_DRIVER = """
import json, sys
from tracewh.api import Warehouse
report = Warehouse(sys.argv[1]).ingest(sys.argv[2:])
print(json.dumps(report.to_dict()))
"""


def start_ingest(root: Path, paths: Iterable[Path], **kwargs: Any) -> subprocess.Popen[str]:
    """A subprocess ingesting ``paths`` into ``root`` (prints the report as JSON)."""
    return subprocess.Popen(
        [sys.executable, "-c", INGEST_DRIVER, str(root), *map(str, paths)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=driver_env(),
        **kwargs,
    )


def one_line_error(result: Mapping[str, Any] | Any, path: Path) -> str:
    """The error of a failed result, checked to be one clean line naming the file."""
    error = result["error"] if isinstance(result, Mapping) else result.error
    assert error, result
    assert "\n" not in error, error
    assert "Traceback" not in error, error
    assert "internal error" not in error, f"a bug in the ingest: {error}"
    assert str(path) in error or path.name in error, error
    return str(error)


# ------------------------------------------------------------- adversarial load
HOG = "import os\nos.nice(0)\nwhile True:\n    pass\n"


@contextlib.contextmanager
def cpu_hog(n: int | None = None) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``n`` busy-looping processes (default: one per core) beside the block, at normal priority.

    A busy machine stretches every window between two steps of a concurrent ingest
    (read a snapshot ... commit): the races a quiet machine hides show up here.
    """
    count = n if n is not None else max(1, os.cpu_count() or 1)
    procs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(count)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


COMPACT_DRIVER = """
import json, sys, time
from tracewh.api import Warehouse
t0 = float(sys.argv[2])
while time.time() < t0:
    time.sleep(0.005)
report = Warehouse(sys.argv[1]).compact(retain_hours=168)
print(json.dumps({"files_after": report.files_after}))
"""


def start_compact(root: Path, at: float) -> subprocess.Popen[str]:
    """A subprocess that runs ``Warehouse(root).compact()`` once the clock reaches ``at``."""
    return subprocess.Popen(
        [sys.executable, "-c", COMPACT_DRIVER, str(root), repr(at)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=driver_env(),
    )
