"""Hand-made warehouse tables for the SQL and Polars analysis tests.

``rows_table`` builds an Arrow table of a warehouse table from dicts (missing columns are
nulls); ``warehouse`` opens DuckDB over such tables with ``sql/`` applied, adding the
``runs`` rows that make child rows visible. ``trace_tables`` builds ``gpu_ops``, ``events``
and ``steps`` rows from a real Kineto JSON trace with plain ``json`` (timestamps converted
exactly through ``Decimal``), linking each GPU op to its runtime call by correlation; it is
an independent, test-only stand-in for the ingest.
"""

from __future__ import annotations

import datetime as dt
import functools
import gzip
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa

from tracewh.query.db import connect_tables
from tracewh.schema.arrow import GPU_OP_CATEGORIES, RUNTIME_CATEGORIES, TABLES

DAY = dt.date(2024, 4, 4)
RUN = "run-a"
INGEST = "ing-1"


def rows_table(table: str, rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """An Arrow table of warehouse table ``table`` from ``rows`` (missing columns: null)."""
    schema = TABLES[table].schema
    defaults: dict[str, Any] = {"run_id": RUN, "ingest_id": INGEST, "day": DAY}
    cols: dict[str, list[Any]] = {f.name: [] for f in schema}
    for i, row in enumerate(rows):
        unknown = set(row) - set(cols)
        if unknown:
            raise KeyError(f"{table}: unknown columns {sorted(unknown)}")
        for f in schema:
            if f.name in row:
                value = row[f.name]
            elif f.name == "event_index":
                value = i
            else:
                value = defaults.get(f.name)
            cols[f.name].append(value)
    return pa.table(cols, schema=schema)


def warehouse(**tables: Sequence[Mapping[str, Any]]) -> duckdb.DuckDBPyConnection:
    """DuckDB with ``sql/`` applied over hand-made rows; ``runs`` rows are added as needed."""
    runs = list(tables.get("runs", ()))
    known = {(r.get("run_id", RUN), r.get("ingest_id", INGEST)) for r in runs}
    for name, rows in tables.items():
        if name == "runs":
            continue
        for row in rows:
            key = (row.get("run_id", RUN), row.get("ingest_id", INGEST))
            if key not in known:
                known.add(key)
                runs.append({"run_id": key[0], "ingest_id": key[1]})
    arrow = {name: rows_table(name, rows) for name, rows in tables.items() if name != "runs"}
    arrow["runs"] = rows_table("runs", runs)
    return connect_tables(arrow)


def scan(con: duckdb.DuckDBPyConnection, table: str) -> pl.LazyFrame:
    """A base table of ``con`` as a Polars LazyFrame (what ``Warehouse.scan`` will give)."""
    return con.sql(f"SELECT * FROM {table}").pl().lazy()


def query(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] = ()) -> pl.DataFrame:
    """Run ``sql`` and return a Polars DataFrame."""
    return con.sql(sql, params=list(params)).pl()


def to_ns(value: Decimal | int | float | None) -> int | None:
    """µs (as written in the trace) -> integer ns, exactly."""
    if value is None:
        return None
    return int(Decimal(value) * 1000)


def load_trace(path: Path) -> dict[str, Any]:
    """The whole JSON of a (small) test trace, numbers kept exact as Decimal."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        doc: dict[str, Any] = json.load(f, parse_float=Decimal)
    return doc


def _int(v: Any) -> int | None:
    return None if v is None else int(v)


def trace_tables(doc: dict[str, Any], *, run_id: str = RUN) -> dict[str, list[dict[str, Any]]]:
    """``gpu_ops``, ``events`` and ``steps`` rows of a trace (linkage by correlation only)."""
    events: list[dict[str, Any]] = []
    gpu: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    runtime_by_corr: dict[int, dict[str, Any]] = {}
    for i, e in enumerate(doc["traceEvents"]):
        if e.get("ph") != "X" or e.get("cat") == "python_function":
            continue
        args = e.get("args") or {}
        row = {
            "run_id": run_id,
            "event_index": i,
            "cat": e.get("cat"),
            "name": e.get("name"),
            "pid": e.get("pid") if isinstance(e.get("pid"), int) else None,
            "tid": e.get("tid") if isinstance(e.get("tid"), int) else None,
            "ts_ns": to_ns(e.get("ts")),
            "dur_ns": to_ns(e.get("dur")),
            "correlation": _int(args.get("correlation")),
            "external_id": _int(args.get("External id")),
            "stream": _int(args.get("stream")),
            "device": _int(args.get("device")),
        }
        events.append(row)
        if e.get("cat") in RUNTIME_CATEGORIES and row["correlation"] is not None:
            runtime_by_corr[row["correlation"]] = row
        if e.get("cat") in GPU_OP_CATEGORIES:
            gpu.append(dict(row, bytes=_int(args.get("bytes"))))
        m = re.fullmatch(r"ProfilerStep#(\d+)", str(e.get("name")))
        if m:
            steps.append(
                {
                    "run_id": run_id,
                    "step": int(m.group(1)),
                    "name": e["name"],
                    "pid": row["pid"],
                    "tid": row["tid"],
                    "ts_ns": row["ts_ns"],
                    "dur_ns": row["dur_ns"],
                }
            )
    for op in gpu:
        launch = runtime_by_corr.get(op["correlation"]) if op["correlation"] else None
        if launch is not None:
            op.update(
                link_method="correlation",
                launch_name=launch["name"],
                launch_ts_ns=launch["ts_ns"],
                launch_dur_ns=launch["dur_ns"],
                launch_pid=launch["pid"],
                launch_tid=launch["tid"],
            )
    return {"gpu_ops": gpu, "events": events, "steps": steps}


def classify(con: duckdb.DuckDBPyConnection, rows: Iterable[dict[str, Any]]) -> None:
    """Fill op_kind/short_name/category/memcpy_kind of gpu_ops rows with the SQL rules."""
    rows = list(rows)
    names = sorted({(r["cat"], r["name"]) for r in rows})
    t = pa.table({"cat": [c for c, _ in names], "name": [n for _, n in names]})
    con.register("__names", t)
    got = con.execute(
        "SELECT cat, name, tw_op_kind(cat, name), tw_short_name(name), tw_category(name, cat), "
        "tw_memcpy_kind(name) FROM __names"
    ).fetchall()
    con.unregister("__names")
    by = {(c, n): (k, s, g, m) for c, n, k, s, g, m in got}
    for r in rows:
        k, s, g, m = by[(r["cat"], r["name"])]
        r.update(op_kind=k, short_name=s, category=g, memcpy_kind=m)


NS_TRACE_GLOB = "ns_resolution_trace__*.json.gz"


@functools.lru_cache(maxsize=2)
def real_trace(path: Path) -> tuple[duckdb.DuckDBPyConnection, dict[str, list[dict[str, Any]]]]:
    """DuckDB over the rows of a real trace (classified with the SQL rules) and those rows."""
    tables = trace_tables(load_trace(path))
    classify(connect_tables({}), tables["gpu_ops"])
    return warehouse(**tables), tables
