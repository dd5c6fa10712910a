"""Staging one file and reading back what it staged (the C/Python staging parity tests)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import duckdb

from tracewh.core.errors import TracewhError
from tracewh.ingest.parts import stage_file
from tracewh.ingest.shred import STAGING_TABLES, stager_for


def rows(folder: Path, table: str) -> list[tuple[Any, ...]]:
    files = [str(p) for p in sorted((folder / table).glob("*.parquet"))]
    if not files:
        return []
    con = duckdb.connect()
    cur = con.execute(f"SELECT * FROM read_parquet({files!r})")
    names = [d[0] for d in cur.description]
    out = []
    for row in cur.fetchall():
        values = list(row)
        for i, name in enumerate(names):
            if name == "args_json" and values[i] is not None:
                with contextlib.suppress(ValueError):  # a non-object event's raw text: as is
                    values[i] = json.dumps(json.loads(values[i]), sort_keys=True)
        out.append(tuple(values))
    return sorted(out, key=repr)


def stage(path: Path, folder: Path, *, native: bool, **kw: Any) -> tuple[Any, dict[str, Any]]:
    folder.mkdir(parents=True)
    try:
        staged = stage_file(path, folder, stager=stager_for(native), **kw)
    except TracewhError as exc:
        return ("error", str(exc)), {}
    tables: dict[str, Any] = {}
    for sub, _ in staged.parts:
        for table in STAGING_TABLES:
            tables.setdefault(table, []).extend(rows(Path(sub), table))
    summary = (staged.events, dict(sorted(staged.anomalies.items())), staged.metadata)
    return summary, tables
