"""The pure-Python staging path's chunks: events encoded as JSON, shredded by DuckDB.

Batches of fixed-up events (:func:`tracewh.ingest.rows.prepare_events`) are encoded with
orjson into a chunk file (a JSON array); a full chunk is handed to a background thread in
which DuckDB types and routes it (``sql/ingest/02_shred.sql``) into the staging tables'
Parquet files. At most one chunk is shredded while the next is written (see
:mod:`tracewh.ingest.shred`).
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

import orjson

from tracewh.core.sqlfiles import SQL_DIR, glob_escaped
from tracewh.ingest.memory import retry_on_oom
from tracewh.ingest.rows import MAX_DEPTH, clip_depth

INGEST_SQL = SQL_DIR / "ingest"

#: The staging tables of ``sql/ingest/00_stage_tables.sql`` (``anom`` stays in memory).
STAGING_TABLES = ("ev", "gev", "py", "gpu", "inst", "cnt", "flow", "thr")


def shred_statements(sql: str) -> list[tuple[str | None, str]]:
    """The statements of ``02_shred.sql``: (staging table it writes or None, SQL text).

    A ``COPY`` statement writes the staging table named by the comment line
    right before it (``-- ev``).
    """
    out: list[tuple[str | None, str]] = []
    for part in sql.split(";\n"):
        lines = part.strip().splitlines()
        code = "\n".join(x for x in lines if not x.lstrip().startswith("--")).strip()
        if not code:
            continue
        table = None
        if code.startswith("COPY"):
            comments = [x.strip()[2:].strip() for x in lines if x.lstrip().startswith("--")]
            table = comments[-1] if comments else ""
            if table not in STAGING_TABLES:
                raise ValueError(f"02_shred.sql: a COPY without its staging table: {table!r}")
        out.append((table, code))
    return out



def _default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _encode(rows: list[dict[str, Any]], anomalies: Counter[str]) -> bytes:
    """``[...]`` of the rows; stdlib json where orjson refuses (ints beyond 64 bits).

    Where orjson refuses, values nested deeper than :data:`MAX_DEPTH` levels
    (the rows sit one level down in the batch) become a marker, each counted
    as a ``deep_nesting`` anomaly: orjson accepts exactly those that are not.
    """
    try:
        return orjson.dumps(rows, default=_default)
    except (orjson.JSONEncodeError, TypeError):
        pass
    clipped = 0
    for k, row in enumerate(rows):
        row, n = clip_depth(row, MAX_DEPTH - 1)
        if n:
            rows[k] = row
            clipped += n
    if clipped:
        anomalies["deep_nesting"] += clipped
        try:
            return orjson.dumps(rows, default=_default)
        except (orjson.JSONEncodeError, TypeError):
            pass
    text = json.dumps(rows, separators=(",", ":"), ensure_ascii=True, default=_default)
    return text.encode("ascii")


class Chunks:
    """Encoded batches -> chunk files -> DuckDB, one chunk in flight at a time."""

    def __init__(
        self, con: Any, folder: Path, *, chunk_events: int, anomalies: Counter[str], limit: int
    ) -> None:
        self._con = con
        self._limit = limit  # the connection's memory limit (raised when a chunk runs out)
        self._anomalies = anomalies
        self._folder = folder
        self._chunk_events = chunk_events
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="tracewh-shred")
        self._pending: Future[None] | None = None
        self._file: IO[bytes] | None = None
        self._path: Path | None = None
        self._n = 0
        self._seq = 0
        self._chunk_sql = (INGEST_SQL / "01_chunk.sql").read_text(encoding="utf-8")
        self._statements = shred_statements((INGEST_SQL / "02_shred.sql").read_text("utf-8"))
        for table in STAGING_TABLES:
            (folder / table).mkdir(exist_ok=True)

    def __call__(self, rows: list[dict[str, Any]]) -> None:
        data = _encode(rows, self._anomalies)
        if self._file is None:
            self._path = self._folder / f"chunk-{self._seq:06d}.json"
            self._seq += 1
            self._file = self._path.open("wb", buffering=1 << 20)
            self._file.write(b"[")
        else:
            self._file.write(b",")
        self._file.write(data[1:-1])
        self._n += len(rows)
        if self._n >= self._chunk_events:
            self._submit()

    def _submit(self) -> None:
        if self._file is None or self._path is None:
            return
        self._file.write(b"]")
        self._file.close()
        path, self._file, self._path, self._n = self._path, None, None, 0
        self._wait()
        self._pending = self._pool.submit(self._route, path)

    def _route(self, path: Path) -> None:
        """Route one chunk; again under a larger memory limit if DuckDB runs out of it."""
        con = self._con
        saved = con.execute("SELECT key, n FROM anom").fetchall()
        tries = 0

        def attempt() -> None:
            nonlocal tries
            tries += 1
            if tries > 1:  # a failed try may have counted this chunk's anomalies already
                con.execute("DELETE FROM anom")
                if saved:
                    con.executemany("INSERT INTO anom VALUES (?, ?)", saved)
            con.execute(self._chunk_sql, {"file": glob_escaped(str(path))})
            for table, sql in self._statements:
                if table is None:
                    con.execute(sql)
                    continue
                out = self._folder / table / f"{path.stem}.parquet"
                if not con.execute(sql, {"out": str(out)}).fetchall()[0][0]:
                    out.unlink(missing_ok=True)  # no rows: no file
            con.execute("DROP TABLE c")

        try:
            _, self._limit = retry_on_oom(con, attempt, self._limit)
        finally:
            path.unlink(missing_ok=True)

    def _wait(self) -> None:
        if self._pending is not None:
            pending, self._pending = self._pending, None
            pending.result()

    def finish(self) -> None:
        self._submit()
        self._wait()
        self._pool.shutdown()

    def abort(self) -> None:
        if self._file is not None:
            self._file.close()
        with contextlib.suppress(Exception):  # the part failed already; folder discarded
            self._wait()
        self._pool.shutdown()


#: Unusual events of a scanned part kept for the pure path until the scan ends (more: now).
