"""The warehouse schema, declared once.

One Arrow schema per table. The writer, DuckDB and Polars all take their types
from here, partition column included (``day`` is a ``date32``; engines would
otherwise guess it from the ``day=YYYY-MM-DD`` path). Column names carry units:
``*_ns`` are int64 nanoseconds since the Unix epoch (timestamps) or int64
nanoseconds (durations), ``bytes`` are bytes, ``*_gbps`` are GB/s (1e9 bytes/s).

Every run table is partitioned by ``day`` (UTC date of the trace start);
``runs`` and ``ingest_log`` are small and unpartitioned (they are compacted
after each ingest batch, so reading them stays one or a few files). Every child table carries ``run_id`` and ``ingest_id``: a row
is visible only when a ``runs`` row with the same pair exists (``runs`` is
committed last), which makes a run's ingest atomic across tables.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

# the event categories and name prefixes live in tracewh.core.categories (no pyarrow there, so
# the ingest modules that need only them do not import pyarrow); re-exported here
from tracewh.core.categories import BASELINE_ANOMALIES as BASELINE_ANOMALIES
from tracewh.core.categories import GPU_OP_CATEGORIES as GPU_OP_CATEGORIES
from tracewh.core.categories import LAUNCH_FLOW_CATEGORIES as LAUNCH_FLOW_CATEGORIES
from tracewh.core.categories import MINHASH_SLOTS as MINHASH_SLOTS
from tracewh.core.categories import MODULE_PREFIX as MODULE_PREFIX
from tracewh.core.categories import PYTHON_CATEGORY as PYTHON_CATEGORY
from tracewh.core.categories import RUNTIME_CATEGORIES as RUNTIME_CATEGORIES

# the event tables (tracewh.schema.events), re-exported: TABLES below registers them
from tracewh.schema.events import ANNOTATION_SPANS as ANNOTATION_SPANS
from tracewh.schema.events import COLLECTIVES as COLLECTIVES
from tracewh.schema.events import COUNTERS as COUNTERS
from tracewh.schema.events import EVENT_BASE as EVENT_BASE
from tracewh.schema.events import EVENTS as EVENTS
from tracewh.schema.events import FLOW_ARGS as FLOW_ARGS
from tracewh.schema.events import FLOWS as FLOWS
from tracewh.schema.events import GPU_OPS as GPU_OPS
from tracewh.schema.events import GRAPH_NODES as GRAPH_NODES
from tracewh.schema.events import INSTANTS as INSTANTS
from tracewh.schema.events import MODULE_SPANS as MODULE_SPANS
from tracewh.schema.events import PYTHON as PYTHON
from tracewh.schema.events import RUN_KEY as RUN_KEY
from tracewh.schema.events import STEPS as STEPS
from tracewh.schema.events import THREADS as THREADS

# what a warehouse written by an older version lacks (tracewh.schema.evolution), re-exported
from tracewh.schema.evolution import ADDED_COLUMNS as ADDED_COLUMNS
from tracewh.schema.evolution import ADDED_TABLES as ADDED_TABLES
from tracewh.schema.evolution import EVOLVED_PROPERTY as EVOLVED_PROPERTY
from tracewh.schema.evolution import SCHEMA_KEY as SCHEMA_KEY

PARTITION_COLUMN = "day"

RUNS = pa.schema(
    [
        *RUN_KEY,
        pa.field("source_path", pa.string()),  # absolute path of the trace file
        pa.field("file_name", pa.string()),
        pa.field("bytes", pa.int64()),  # size of the source file as stored (compressed)
        pa.field("sha256", pa.string()),
        pa.field("ingested_at", pa.timestamp("us", tz="UTC")),  # start of the ingest command
        pa.field("start_ns", pa.int64()),  # earliest event start
        pa.field("end_ns", pa.int64()),  # latest event end
        pa.field("host", pa.string()),
        pa.field("rank", pa.int32()),  # distributedInfo.rank (null: single process)
        pa.field("world_size", pa.int32()),  # distributedInfo.world_size
        pa.field("device_name", pa.string()),  # first GPU/accelerator name
        pa.field("device_names", pa.list_(pa.string())),
        pa.field("device_count", pa.int32()),
        pa.field("backend", pa.string()),  # cuda | rocm | mtia | cpu
        pa.field("dist_backend", pa.string()),  # distributedInfo.backend (nccl, ...)
        pa.field("trace_name", pa.string()),
        pa.field("trace_id", pa.string()),
        pa.field("schema_version", pa.int32()),
        pa.field("base_time_ns", pa.int64()),
        pa.field("job", pa.string()),  # rank traces of one job: by default their directory
        pa.field("labels_json", pa.string()),  # user labels {key: value} as JSON text
        pa.field("metadata_json", pa.string()),  # header + trailer keys as JSON text
        pa.field("category_counts_json", pa.string()),  # {"ph/cat": count} as JSON text
        pa.field("n_events", pa.int64()),  # all elements of traceEvents
        pa.field("n_duration_events", pa.int64()),  # rows in `events`
        pa.field("n_gpu_ops", pa.int64()),
        pa.field("n_kernels", pa.int64()),
        pa.field("n_memcpy", pa.int64()),
        pa.field("n_memset", pa.int64()),
        pa.field("n_runtime", pa.int64()),
        pa.field("n_cpu_ops", pa.int64()),
        pa.field("n_python", pa.int64()),
        pa.field("n_instants", pa.int64()),
        pa.field("n_counters", pa.int64()),
        pa.field("n_flows", pa.int64()),
        pa.field("n_steps", pa.int64()),
        pa.field("n_unlinked_gpu_ops", pa.int64()),  # GPU ops whose launch call was not found
        pa.field("n_dropped", pa.int64()),  # duration events outside the --steps N window
        pa.field("rows_json", pa.string()),  # {child table: rows written} for `verify`
        pa.field("steps_limit", pa.int32()),  # --steps N used at ingest (null: all)
        pa.field("skip_python", pa.bool_()),
        pa.field("anomalies_json", pa.string()),  # {kind: count} of oddities met and recorded
        pa.field("tracewh_version", pa.string()),
        # added later (ADDED_COLUMNS): NULL in files written before
        pa.field("step_marker", pa.string()),  # --step-marker pattern (NULL: ProfilerStep#N)
        pa.field("kind", pa.string()),  # replay | capture | eager (CUDA/HIP graphs)
    ]
)

#: A run's workload fingerprint: a MinHash signature of the set of its kernels' keys and of
#: its CPU operators with their input shapes (see ``sql/ingest/29_out_fingerprints.sql``).
#: Two runs' Jaccard similarity is about the share of equal signature slots.
FINGERPRINTS = pa.schema(
    [
        *RUN_KEY,
        pa.field("source", pa.string()),  # gpu (kernels + launching operators) | cpu (operators)
        pa.field("tokens", pa.int64()),  # distinct tokens hashed
        pa.field("minhash", pa.list_(pa.int64())),  # MINHASH_SLOTS minima, one per salted md5
    ]
)

#: A run's value of every history series (``sql/92_run_series.sql``: step time, GPU idle
#: fraction, time per step of each GPU op name, kernel, category and module, memory peaks),
#: written at ingest with the run's tables so that history reads thousands of rows, not the
#: runs' events. Not partitioned (a few hundred rows a run, one table read whole by history
#: queries), its small files merged after each ingest as ``runs``'.
RUN_SERIES = pa.schema(
    [
        *RUN_KEY,  # day: a plain column here (the table is not partitioned)
        pa.field("metric", pa.string()),  # op | kernel | category | module | step | idle | memory
        pa.field("key", pa.string()),
        pa.field("name", pa.string()),
        pa.field("short_name", pa.string()),
        pa.field("category", pa.string()),
        pa.field("value", pa.float64()),  # ns per step (idle: fraction 0..1; memory: bytes)
        pa.field("step_sd", pa.float64()),  # standard deviation across the run's steps, same unit
        pa.field("n_steps", pa.int64()),
        pa.field("calls", pa.int64()),  # op rows: GPU ops with a duration
        pa.field("total_ns", pa.float64()),  # op, kernel, category, module: summed GPU time
    ]
)


INGEST_LOG = pa.schema(
    [
        pa.field("attempt_id", pa.string(), nullable=False),
        pa.field("path", pa.string()),
        pa.field("sha256", pa.string()),
        pa.field("run_id", pa.string()),
        pa.field("outcome", pa.string()),  # ingested | replaced | skipped | failed
        pa.field("error", pa.string()),
        pa.field("started_at", pa.timestamp("us", tz="UTC")),
        pa.field("finished_at", pa.timestamp("us", tz="UTC")),
        pa.field("bytes", pa.int64()),
        pa.field("n_events", pa.int64()),
        pa.field("host", pa.string()),
        pa.field("tracewh_version", pa.string()),
    ]
)


@dataclass(frozen=True)
class TableSpec:
    """A warehouse table: its name, Arrow schema and partition columns."""

    name: str
    schema: pa.Schema
    partition_by: tuple[str, ...]
    doc: str

    @property
    def is_run_child(self) -> bool:
        """True for tables whose rows belong to a run (visible once `runs` has the run)."""
        return self.name not in ("runs", "ingest_log")


TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        # runs is small (one row per trace) and read by every query: not partitioned,
        # and compacted after each ingest batch so it stays one or a few files
        TableSpec("runs", RUNS, (), "one row per ingested trace"),
        TableSpec("events", EVENTS, ("day",), "one row per duration (ph X) event"),
        TableSpec("gpu_ops", GPU_OPS, ("day",), "one row per GPU activity, with its linkage"),
        TableSpec("steps", STEPS, ("day",), "one row per ProfilerStep#N span"),
        TableSpec("instants", INSTANTS, ("day",), "one row per instant (ph i/I) or other event"),
        TableSpec("counters", COUNTERS, ("day",), "one row per (counter event, series)"),
        TableSpec("flows", FLOWS, ("day",), "one row per flow event (ph s/t/f)"),
        TableSpec("flow_args", FLOW_ARGS, ("day",), "the args of each flow event that has any"),
        TableSpec("python", PYTHON, ("day",), "one row per python_function event"),
        TableSpec("module_spans", MODULE_SPANS, ("day",), "one row per nn.Module span"),
        TableSpec("annotation_spans", ANNOTATION_SPANS, ("day",), "one row per user annotation"),
        TableSpec("graph_nodes", GRAPH_NODES, ("day",), "one row per launch captured in a graph"),
        TableSpec("collectives", COLLECTIVES, ("day",), "one row per communication kernel"),
        TableSpec("threads", THREADS, ("day",), "one row per process/thread metadata (ph M)"),
        TableSpec("fingerprints", FINGERPRINTS, ("day",), "one row per run: its workload fingerprint"),
        TableSpec("run_series", RUN_SERIES, (), "one row per (run, history series): its value"),
        TableSpec("ingest_log", INGEST_LOG, (), "one row per ingest attempt"),
    )
}

#: Child tables in commit order (``runs`` is committed after all of them).
CHILD_TABLES: tuple[str, ...] = tuple(name for name, spec in TABLES.items() if spec.is_run_child)

