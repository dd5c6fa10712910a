"""Link a staged trace: the staging DuckDB connection, its ``files`` table, run plans and steps.

After staging (:mod:`tracewh.ingest.parts`) the staged Parquet parts are opened in one DuckDB
connection, the ``sql/ingest`` link statements relate events (flows, correlations, steps) and each
run's plan (day, windows, GPU slices) is read back for :mod:`tracewh.ingest.derive`.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from tracewh.core.sqlfiles import SQL_DIR, glob_escaped, sql_string
from tracewh.ingest.memory import parse_size, retry_on_oom
from tracewh.ingest.options import IngestOptions
from tracewh.ingest.parts import Staged
from tracewh.ingest.rows import I64_MAX, I64_MIN
from tracewh.ingest.shred import STAGING_TABLES

if TYPE_CHECKING:
    pass


INGEST_SQL = SQL_DIR / "ingest"
NAMES_SQL = SQL_DIR / "05_names.sql"
KEY_SQL = SQL_DIR / "06_kernel_key.sql"

OUT_TABLES = (
    ("events", "20_out_events.sql"),
    ("gpu_ops", "21_out_gpu_ops.sql"),
    ("steps", "22_out_steps.sql"),
    ("instants", "23_out_instants.sql"),
    ("counters", "24_out_counters.sql"),
    ("flows", "25_out_flows.sql"),
    ("flow_args", "28_out_flow_args.sql"),
    ("python", "26_out_python.sql"),
    ("module_spans", "29_out_module_spans.sql"),
    ("annotation_spans", "32_out_annotation_spans.sql"),
    ("graph_nodes", "33_out_graph_nodes.sql"),
    ("collectives", "34_out_collectives.sql"),
    ("threads", "27_out_threads.sql"),
    ("fingerprints", "29_out_fingerprints.sql"),
)


def connect_staging(staging: Path, staged: Staged, options: IngestOptions) -> Any:
    """DuckDB over the staged parts: ``s_*`` views with global event indices, linkage."""
    tmp = staging / "duckdb_tmp"
    tmp.mkdir(exist_ok=True)
    con = duckdb.connect(
        config={"memory_limit": options.memory_limit, "threads": max(1, options.threads)}
    )
    try:
        con.execute("SET temp_directory = ?", [str(tmp)])
        con.execute("SET preserve_insertion_order = false")
        for name in STAGING_TABLES:
            # s_ev: every `ph: X` row but python_function, the GPU ops' (gev) included
            tables = ("ev", "gev") if name == "ev" else (name,)
            selects = [
                _part_select(  # thr: no event_index
                    folder, name, 0 if name == "thr" else off,
                    [p for t in tables for p in (Path(folder) / t).glob("*.parquet")],
                )
                for folder, off in staged.parts
            ]
            con.execute(f"CREATE TEMP VIEW s_{name} AS {' UNION ALL '.join(selects)}")
        link_setup(con, options)
        link = (INGEST_SQL / "10_link.sql").read_text(encoding="utf-8")
        _, limit = retry_on_oom(con, lambda: con.execute(link), parse_size(options.memory_limit))
        retry_on_oom(con, functools.partial(_write_link, con, staging), limit)
    except BaseException:
        con.close()
        raise
    return con


def link_setup(con: Any, options: IngestOptions) -> None:
    """What ``10_link.sql`` needs besides the staged rows: the name and key macros, ``t_opts``."""
    con.execute(NAMES_SQL.read_text(encoding="utf-8"))
    con.execute(KEY_SQL.read_text(encoding="utf-8"))
    con.execute("CREATE OR REPLACE TEMP TABLE t_opts (step_marker VARCHAR)")
    con.execute("INSERT INTO t_opts VALUES (?)", [options.step_marker])


def _write_link(con: Any, folder: Path) -> None:
    """Write the GPU ops' linkage and their operators to Parquet in ``folder``.

    ``11_link_out.sql`` and ``12_op_out.sql``, in event order (row groups of
    :data:`GPU_SLICE_ROWS`, so a ``gpu_ops`` slice reads one or two of each),
    then drops the tables they read and defines the views ``t_gpu_link`` and
    ``t_op`` over the files: no linkage table stays in DuckDB's memory (held
    there, the output queries paged them back in up to the memory limit).
    Safe to repeat (the files are written again from their start).
    """
    con.execute("SET preserve_insertion_order = true")  # the files in event order
    try:
        for name, sql_file in (("gpu_link", "11_link_out.sql"), ("op", "12_op_out.sql")):
            query = (INGEST_SQL / sql_file).read_text(encoding="utf-8")
            con.execute(
                f"COPY ({query}) TO $out (FORMAT parquet, COMPRESSION lz4, "
                f"ROW_GROUP_SIZE {GPU_SLICE_ROWS})",
                {"out": str(folder / f"{name}.parquet")},
            )
    finally:
        con.execute("SET preserve_insertion_order = false")
    con.execute("DROP TABLE IF EXISTS t_gpu_link1")
    con.execute("DROP TABLE IF EXISTS t_op")
    for name in ("gpu_link", "op"):
        files = parquet_files([folder / f"{name}.parquet"])
        con.execute(f"CREATE OR REPLACE TEMP VIEW t_{name} AS SELECT * FROM {files}")


def _part_select(
    folder: str, table: str, off: int, files: list[Path] | None = None, file_no: int = 0
) -> str:
    """``SELECT`` of one part's staged ``table`` (or of ``files`` of it), event indices + ``off``.

    Every row gets ``file_no``, the trace's key in the ingest SQL (``sql/ingest``: a
    single trace is 0; see :mod:`tracewh.ingest.group` for many at once).
    """
    rel = parquet_files(files if files is not None else list((Path(folder) / table).glob("*.parquet")))
    key = f"CAST({int(file_no)} AS INTEGER) AS file_no"
    if off == 0:
        return f"SELECT *, {key} FROM {rel}"
    return f"SELECT * REPLACE (event_index + {int(off)} AS event_index), {key} FROM {rel}"


def parquet_files(files: list[Path]) -> str:
    """``read_parquet([...])`` of ``files``, largest first.

    DuckDB estimates the rows of a multi-file scan from its first file: a small
    first file (the few events the compiled path handed back, an empty schema
    file) made it build hash joins on the large side and spill.
    """
    ordered = sorted(files, key=lambda p: (-p.stat().st_size, p.name))
    quoted = ", ".join(sql_string(glob_escaped(str(p))) for p in ordered)
    return f"read_parquet([{quoted}], hive_partitioning = false)"


class FileRanges:
    """The ``event_index`` range of each staged Parquet file, from its statistics, read once.

    A ``gpu_ops`` slice then opens only the files that overlap it (each open reads
    the file's footer; with every file listed, a 1 GB trace's 32 slices opened
    ~60 files each).
    """

    def __init__(self, con: Any = None) -> None:
        # the connection that reads the files' Parquet footers: the ingest's (default: one of
        # its own, opened on first use)
        self._con = con
        self._cache: dict[Path, tuple[int, int] | None] = {}

    def _range(self, path: Path) -> tuple[int, int] | None:
        if path not in self._cache:
            if self._con is None:
                self._con = duckdb.connect(config={"threads": 1})
            # one row per row group: its rows and event_index's min/max (NULL: unknown)
            groups = self._con.execute(
                "SELECT g.num_rows, c.stats_min_value, c.stats_max_value "
                "FROM (SELECT DISTINCT row_group_id, row_group_num_rows AS num_rows "
                "      FROM parquet_metadata($f)) g "
                "LEFT JOIN (FROM parquet_metadata($f) WHERE path_in_schema = 'event_index') c "
                "USING (row_group_id)",
                {"f": glob_escaped(str(path))},
            ).fetchall()
            span: tuple[int, int] | None = (0, -1)  # no rows: overlaps nothing
            for num_rows, lo_text, hi_text in groups:
                if not num_rows:
                    continue
                if lo_text is None or hi_text is None or span is None:
                    span = None  # unknown: always read
                    break
                lo, hi = int(lo_text), int(hi_text)
                span = (lo, hi) if span[1] < span[0] else (min(span[0], lo), max(span[1], hi))
            self._cache[path] = span
        return self._cache[path]

    def overlapping(self, folder: Path, lo: int, hi: int) -> list[Path]:
        """Files of ``folder`` that may hold an ``event_index`` in ``[lo, hi)``."""
        keep = []
        for path in folder.glob("*.parquet"):
            span = self._range(path)
            if span is None or (span[0] < hi and span[1] >= lo):
                keep.append(path)
        if keep:
            return keep
        # none: a file for its columns (the slice's bounds filter its rows out)
        schema = folder / "schema.parquet"
        return [schema if schema.exists() else min(folder.glob("*.parquet"))]


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, ArithmeticError):
        return None


def metadata_int(value: Any) -> int | None:
    """An int64 from a metadata value; None when it is not one."""
    out = _int(value)
    return out if out is not None and I64_MIN <= out <= I64_MAX else None


def _base_time(value: Any, summary: Mapping[str, Any], anomalies: Counter[str]) -> int | None:
    """``baseTimeNanoseconds`` as added to every timestamp; None when absent or unusable.

    A value that is not an integer counts ``mistyped_base_time``; one that is
    outside int64, or would take a timestamp (or the run's end) outside it,
    counts ``base_time_out_of_range``: timestamps then stay relative.
    """
    if value is None:
        return None
    base_ns = _int(value)
    if base_ns is None:
        anomalies["mistyped_base_time"] += 1
        return None
    lo = summary["min_ts_ns"] if summary["min_ts_ns"] is not None else 0
    hi = max(summary["max_ts_ns"] or 0, summary["end_ns"] or 0)
    if not (I64_MIN <= base_ns <= I64_MAX and lo + base_ns >= I64_MIN and hi + base_ns <= I64_MAX):
        anomalies["base_time_out_of_range"] += 1
        return None
    return base_ns


def device_names(meta: Mapping[str, Any]) -> list[str]:
    props = meta.get("deviceProperties")
    if isinstance(props, str):
        try:
            props = json.loads(props)
        except ValueError:
            return []
    if isinstance(props, dict):
        props = [props]
    if not isinstance(props, list):
        return []
    # a blank name ("" in some traces) is no name: device_name is NULL then, never ''
    names = (str(p.get("name") or "").strip() for p in props if isinstance(p, dict))
    return [n for n in names if n]


def _windows(con: Any, steps: int | None) -> dict[int, tuple[int | None, int | None]]:
    """Per ``file_no``, the ``--steps N`` window [first step start, last kept step end); ``t_kept``.

    ``t_kept`` holds the first N steps of each file in time order; a file absent from the
    result (or every file, without a limit) keeps everything: (None, None).
    """
    con.execute(
        "CREATE OR REPLACE TEMP TABLE t_kept AS SELECT file_no, step FROM t_steps "
        "QUALIFY row_number() OVER (PARTITION BY file_no ORDER BY ts_ns, step) <= ?",
        [steps if steps is not None else I64_MAX],
    )
    if steps is None:
        return {}
    rows = con.execute(
        "SELECT s.file_no, min(s.ts_ns), max(s.ts_ns + s.dur_ns) FROM t_steps s "
        "SEMI JOIN t_kept k ON k.file_no = s.file_no AND k.step = s.step GROUP BY s.file_no"
    ).fetchall()
    return {int(f): (lo, hi) for f, lo, hi in rows}


#: The columns of ``t_files``: per staged trace (file_no), what its output rows carry.
_FILES_COLUMNS = (
    "file_no INTEGER, run_id VARCHAR, ingest_id VARCHAR, day DATE, base_ns BIGINT, "
    "lo_ns BIGINT, hi_ns BIGINT, ev_off BIGINT"
)


def set_files(con: Any, rows: list[tuple[Any, ...]]) -> None:
    """(Re)fill ``t_files``: (file_no, run_id, ingest_id, day, base_ns, lo_ns, hi_ns, ev_off)."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE t_files ({_FILES_COLUMNS})")
    if rows:
        marks = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?)"] * len(rows))
        con.execute(f"INSERT INTO t_files VALUES {marks}", [v for r in rows for v in r])


def step_warnings(options: IngestOptions, found: int) -> list[str]:
    """What the user should know about the steps: none found, or fewer than asked for."""
    what = (f"no span matches --step-marker {options.step_marker!r}"
            if options.step_marker is not None else "no ProfilerStep#N span in the trace")
    if found == 0 and (options.steps is not None or options.step_marker is not None):
        if options.steps is not None:
            return [f"--steps {options.steps}: {what}; nothing was dropped"]
        return [f"{what}: the run has no steps"]
    if options.steps is not None and options.steps > found:
        return [f"--steps {options.steps}: the trace has only {found} step(s); kept them all"]
    return []


#: GPU ops per slice of the ``gpu_ops`` output (bounds the output join's memory, which
#: grows faster than the slice: on the 1 GB real H100 tile a slice's COPY added ~100 MB of
#: RSS at 8192, ~25 MB at 2048; at 4096 the output stays under the linkage's peak, same
#: CPU as at 8192; at 16k it peaked ~45 MB higher than at 8192, 0.3 s faster).
GPU_SLICE_ROWS = 4_096


@dataclass(frozen=True)
class _Slices:
    """The ``gpu_ops`` output slices: ``event_index`` ranges, each with its operators' range."""

    ranges: list[tuple[int, int]]  # [lo, hi) of about GPU_SLICE_ROWS GPU ops each, in order
    ops: dict[int, tuple[int, int] | None]  # lo -> enclosing operators' [first, last] index


def gpu_slices(con: Any) -> _Slices:
    """The slices of :data:`GPU_SLICE_ROWS` GPU ops (``13_gpu_slices.sql``)."""
    rows = con.execute(
        (INGEST_SQL / "13_gpu_slices.sql").read_text(encoding="utf-8"), {"n": GPU_SLICE_ROWS}
    ).fetchall()
    edges = [int(r[0]) for r in rows]
    return _Slices(
        ranges=list(zip(edges, [*edges[1:], I64_MAX], strict=False)),
        ops={int(lo): (int(a), int(b)) if a is not None else None for lo, a, b in rows},
    )


def slice_view(
    con: Any,
    parts: list[tuple[str, int]],
    lo: int,
    hi: int,
    ops: tuple[int, int] | None,
    ranges: FileRanges,
) -> None:
    """(Re)define the views of one ``gpu_ops`` slice (``21_out_gpu_ops.sql``).

    ``s_gev_slice`` / ``s_gpu_slice``: the GPU ops' staged base rows (``gev``) and
    typed args with ``lo <= event_index < hi``;
    ``s_op_slice``: the operators in ``ops`` (first, last event_index). The bounds
    are literals (relative to each part for staged rows), so DuckDB prunes the
    Parquet files and row groups outside the slice.
    """
    ends = [off for _, off in parts[1:]] + [I64_MAX]
    for view, table in (("s_gev_slice", "gev"), ("s_gpu_slice", "gpu")):
        selects = []
        for (folder, off), end in zip(parts, ends, strict=True):
            if hi <= off or lo >= end:
                continue
            plo, phi = lo - off, min(hi, end) - off
            files = ranges.overlapping(Path(folder) / table, plo, phi)
            selects.append(
                _part_select(folder, table, off, files)
                + f" WHERE event_index >= {int(plo)} AND event_index < {int(phi)}"
            )
        if not selects:  # no part overlaps: an empty slice
            selects.append(f"SELECT * FROM s_{table} WHERE false")
        con.execute(f"CREATE OR REPLACE TEMP VIEW {view} AS {' UNION ALL '.join(selects)}")
    where = (
        f"event_index >= {int(ops[0])} AND event_index <= {int(ops[1])}" if ops else "false"
    )
    con.execute(f"CREATE OR REPLACE TEMP VIEW s_op_slice AS SELECT * FROM t_op WHERE {where}")


@dataclass
class RunPlan:
    """One staged trace's figures before its tables are written (:func:`plan_runs`)."""

    summary: dict[str, Any]
    anomalies: Counter[str]
    base_time: int | None
    base_ns: int
    start_ns: int | None
    end_ns: int | None
    day: date
    window: tuple[int | None, int | None]


def plan_runs(
    con: Any,
    metas: Mapping[int, Mapping[str, Any]],
    anomalies: Mapping[int, Counter[str]],
    options: IngestOptions,
    run: Callable[[Callable[[], Any]], Any] = lambda step: step(),
) -> dict[int, RunPlan]:
    """Per ``file_no`` of ``metas`` (every file of ``t_files``): its summary, anomalies, day, window.

    ``anomalies`` (the staging's, per file) are updated with those found after the
    linkage (``40_anomalies.sql``). ``run`` wraps each query (a memory-limit retry).
    """
    summary_sql = (INGEST_SQL / "30_summary.sql").read_text("utf-8")

    def summaries() -> dict[int, dict[str, Any]]:
        cur = con.execute(summary_sql)
        cols = [d[0] for d in cur.description]
        return {int(r[0]): dict(zip(cols, r, strict=True)) for r in cur.fetchall()}

    by_file = run(summaries)
    found = (INGEST_SQL / "40_anomalies.sql").read_text("utf-8")
    for file_no, key, n in run(lambda: con.execute(found).fetchall()):
        if n:
            anomalies[int(file_no)][str(key)] += int(n)
    windows = run(lambda: _windows(con, options.steps))
    plans: dict[int, RunPlan] = {}
    for file_no, meta in metas.items():
        summary, found_here = by_file[file_no], anomalies[file_no]
        base_time = _base_time(meta.get("baseTimeNanoseconds"), summary, found_here)
        base_ns = base_time or 0
        start_ns = summary["start_ns"] + base_ns if summary["start_ns"] is not None else None
        end_ns = summary["end_ns"] + base_ns if summary["end_ns"] is not None else None
        if end_ns is not None and not I64_MIN <= end_ns <= I64_MAX:
            found_here["end_out_of_range"] += 1
            end_ns = None
        day = (
            datetime.fromtimestamp(start_ns / 1e9, UTC).date()
            if start_ns is not None and 0 <= start_ns < 253402300799 * 10**9
            else date(1970, 1, 1)
        )
        plans[file_no] = RunPlan(
            summary, found_here, base_time, base_ns, start_ns, end_ns, day,
            windows.get(file_no, (None, None)),
        )
    return plans


def category_counts(con: Any) -> dict[int, dict[str, int]]:
    """Per ``file_no``: its events per (phase/category) (``31_category_counts.sql``)."""
    out: dict[int, dict[str, int]] = {}
    for file_no, k, n in con.execute(
        (INGEST_SQL / "31_category_counts.sql").read_text(encoding="utf-8")
    ).fetchall():
        out.setdefault(int(file_no), {})[str(k)] = int(n)
    return out
