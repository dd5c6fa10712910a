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
from tracewh.core.categories import GPU_OP_CATEGORIES as GPU_OP_CATEGORIES
from tracewh.core.categories import LAUNCH_FLOW_CATEGORIES as LAUNCH_FLOW_CATEGORIES
from tracewh.core.categories import MODULE_PREFIX as MODULE_PREFIX
from tracewh.core.categories import PYTHON_CATEGORY as PYTHON_CATEGORY
from tracewh.core.categories import RUNTIME_CATEGORIES as RUNTIME_CATEGORIES

# what a warehouse written by an older version lacks (tracewh.schema.evolution), re-exported
from tracewh.schema.evolution import ADDED_COLUMNS as ADDED_COLUMNS
from tracewh.schema.evolution import ADDED_TABLES as ADDED_TABLES
from tracewh.schema.evolution import EVOLVED_PROPERTY as EVOLVED_PROPERTY
from tracewh.schema.evolution import SCHEMA_KEY as SCHEMA_KEY

PARTITION_COLUMN = "day"

# ---------------------------------------------------------------------------
# columns shared by event-like tables
# ---------------------------------------------------------------------------

_RUN_KEY: list[pa.Field] = [
    pa.field("run_id", pa.string(), nullable=False),  # first 16 hex digits of the file's sha256
    pa.field("ingest_id", pa.string(), nullable=False),  # the ingest that wrote the row (visibility)
    pa.field("day", pa.date32(), nullable=False),  # UTC date of the trace start (partition)
]

_EVENT_BASE: list[pa.Field] = [
    *_RUN_KEY,
    pa.field("event_index", pa.int64(), nullable=False),  # position in traceEvents
    pa.field("cat", pa.string()),
    pa.field("name", pa.string()),
    pa.field("pid", pa.int64()),  # typed pid (string pids: a stable negative hash, pid_label)
    pa.field("tid", pa.int64()),
    pa.field("pid_label", pa.string()),  # raw pid where the trace wrote a string / >int64
    pa.field("tid_label", pa.string()),
    pa.field("ts_ns", pa.int64()),  # absolute, ns since epoch (or since trace clock 0)
    pa.field("dur_ns", pa.int64()),  # duration in ns (exact: from the decimal µs digits)
    pa.field("correlation", pa.int64()),  # args.correlation: links a GPU op to its launch
    pa.field("external_id", pa.int64()),  # args["External id"]: links to the CPU operator
    pa.field("stream", pa.int64()),
    pa.field("device", pa.int64()),
    pa.field("args_json", pa.string()),  # args without a typed column, as JSON text
]

RUNS = pa.schema(
    [
        *_RUN_KEY,
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

EVENTS = pa.schema(_EVENT_BASE)

PYTHON = pa.schema(
    [
        *_EVENT_BASE,
        pa.field("python_id", pa.int64()),
        pa.field("python_parent_id", pa.int64()),
    ]
)

GPU_OPS = pa.schema(
    [
        *_EVENT_BASE,
        # derived classification (rules in sql/05_names.sql)
        pa.field("op_kind", pa.string()),  # kernel | memcpy | memset | other
        pa.field("short_name", pa.string()),
        pa.field("category", pa.string()),
        pa.field("memcpy_kind", pa.string()),  # HtoD | DtoH | DtoD | PtoP | ... (memcpy only)
        # typed kernel / copy args
        pa.field("grid_x", pa.int64()),
        pa.field("grid_y", pa.int64()),
        pa.field("grid_z", pa.int64()),
        pa.field("block_x", pa.int64()),
        pa.field("block_y", pa.int64()),
        pa.field("block_z", pa.int64()),
        pa.field("registers_per_thread", pa.int64()),
        pa.field("shared_memory_bytes", pa.int64()),
        pa.field("blocks_per_sm", pa.float64()),
        pa.field("warps_per_sm", pa.float64()),
        pa.field("occupancy_pct", pa.float64()),
        pa.field("bytes", pa.int64()),
        pa.field("bandwidth_gbps", pa.float64()),
        pa.field("context", pa.int64()),
        pa.field("graph_id", pa.int64()),
        pa.field("graph_node_id", pa.int64()),
        # linkage, materialised at ingest
        pa.field("link_method", pa.string()),  # correlation | flow | external_id | null
        pa.field("launch_name", pa.string()),
        pa.field("launch_ts_ns", pa.int64()),
        pa.field("launch_dur_ns", pa.int64()),
        pa.field("launch_pid", pa.int64()),
        pa.field("launch_tid", pa.int64()),
        pa.field("op_name", pa.string()),  # innermost CPU operator enclosing the launch
        pa.field("op_ts_ns", pa.int64()),
        pa.field("op_dur_ns", pa.int64()),
        pa.field("op_input_dims", pa.string()),  # its "Input Dims", JSON text
        pa.field("op_external_id", pa.int64()),
        pa.field("module_path", pa.string()),  # nn.Module path where the trace has one
        pa.field("step", pa.int64()),  # N of the enclosing ProfilerStep#N
        # added later (ADDED_COLUMNS): NULL in files written before
        pa.field("annotation_path", pa.string()),  # user_annotation spans enclosing the launch
        pa.field("launch_kind", pa.string()),  # kernel | memcpy | memset | graph | other (null: unlinked)
        pa.field("graph_position", pa.int64()),  # 1-based place among a graph launch's ops
    ]
)

STEPS = pa.schema(
    [
        *_RUN_KEY,
        pa.field("step", pa.int64()),  # N of ProfilerStep#N
        pa.field("name", pa.string()),
        pa.field("pid", pa.int64()),
        pa.field("tid", pa.int64()),
        pa.field("ts_ns", pa.int64()),
        pa.field("dur_ns", pa.int64()),
    ]
)

INSTANTS = pa.schema(
    [
        *_RUN_KEY,
        pa.field("event_index", pa.int64(), nullable=False),
        pa.field("ph", pa.string()),
        pa.field("cat", pa.string()),
        pa.field("name", pa.string()),
        pa.field("pid", pa.int64()),
        pa.field("tid", pa.int64()),
        pa.field("pid_label", pa.string()),
        pa.field("tid_label", pa.string()),
        pa.field("ts_ns", pa.int64()),
        pa.field("scope", pa.string()),  # "s": g | p | t
        # typed [memory] fields
        pa.field("bytes", pa.int64()),
        pa.field("total_allocated", pa.int64()),
        pa.field("total_reserved", pa.int64()),
        pa.field("device_type", pa.int64()),
        pa.field("device_id", pa.int64()),
        pa.field("addr", pa.int64()),
        pa.field("args_json", pa.string()),
    ]
)

COUNTERS = pa.schema(
    [
        *_RUN_KEY,
        pa.field("event_index", pa.int64(), nullable=False),
        pa.field("cat", pa.string()),
        pa.field("name", pa.string()),
        pa.field("pid", pa.int64()),
        pa.field("tid", pa.int64()),
        pa.field("ts_ns", pa.int64()),
        pa.field("series", pa.string()),  # one row per (event, args key)
        pa.field("value", pa.float64()),
    ]
)

FLOWS = pa.schema(
    [
        *_RUN_KEY,
        pa.field("event_index", pa.int64(), nullable=False),
        pa.field("ph", pa.string()),  # s | t | f
        pa.field("cat", pa.string()),
        pa.field("name", pa.string()),
        pa.field("flow_id", pa.int64()),
        pa.field("pid", pa.int64()),
        pa.field("tid", pa.int64()),
        pa.field("ts_ns", pa.int64()),
        pa.field("bp", pa.string()),
    ]
)

#: One row per ``nn.Module: X`` python_function span (PyTorch's ``with_modules``/``with_stack``
#: module tree), with its place in the tree; kept even with ``--skip-python``.
MODULE_SPANS = pa.schema(
    [
        *_RUN_KEY,
        pa.field("event_index", pa.int64(), nullable=False),
        pa.field("pid", pa.int64()),
        pa.field("tid", pa.int64()),
        pa.field("ts_ns", pa.int64()),
        pa.field("dur_ns", pa.int64()),
        pa.field("name", pa.string()),  # the module, without the "nn.Module: " prefix
        pa.field("module_path", pa.string()),  # enclosing modules' names and its own, by "/"
        pa.field("depth", pa.int64()),  # 1: outermost
        pa.field("parent_event_index", pa.int64()),  # the enclosing module span (NULL: none)
    ]
)

#: One row per ``user_annotation`` span (``record_function``) but ``ProfilerStep#N``, with its
#: place among the annotations of its thread.
ANNOTATION_SPANS = pa.schema(
    [
        *_RUN_KEY,
        pa.field("event_index", pa.int64(), nullable=False),
        pa.field("pid", pa.int64()),
        pa.field("tid", pa.int64()),
        pa.field("ts_ns", pa.int64()),
        pa.field("dur_ns", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("annotation_path", pa.string()),  # enclosing annotations' names and its own
        pa.field("depth", pa.int64()),  # 1: outermost
        pa.field("parent_event_index", pa.int64()),
    ]
)

#: One row per launch recorded while a CUDA/HIP graph was captured (between a
#: ``*StreamBeginCapture`` call and its ``*StreamEndCapture`` on one thread): the graph's nodes
#: in launch order, each with the CPU operator, module and annotations that recorded it.
GRAPH_NODES = pa.schema(
    [
        *_RUN_KEY,
        pa.field("capture", pa.int64()),  # 1-based, per run, by begin time
        pa.field("capture_ts_ns", pa.int64()),  # start of the BeginCapture call
        pa.field("position", pa.int64()),  # 1-based place of the launch in the capture
        pa.field("launch_event_index", pa.int64()),
        pa.field("launch_name", pa.string()),
        pa.field("launch_kind", pa.string()),  # kernel | memcpy | memset
        pa.field("launch_ts_ns", pa.int64()),
        pa.field("kernel_name", pa.string()),  # the launch's "kernel" arg where the trace has it
        pa.field("op_name", pa.string()),  # innermost cpu_op enclosing the launch
        pa.field("op_ts_ns", pa.int64()),
        pa.field("op_external_id", pa.int64()),
        pa.field("op_input_dims", pa.string()),
        pa.field("module_path", pa.string()),
        pa.field("annotation_path", pa.string()),
    ]
)

#: One row per communication kernel (NCCL/RCCL/MSCCL/custom all-reduce: ``tw_category`` =
#: ``communication`` in ``sql/05_names.sql``, or any kernel with a ``Collective name`` arg)
#: of a run, with its collective's args (``sql/ingest/34_out_collectives.sql``). Args the
#: trace lacks are NULL; the kernel is still a row. The rank is the run's (``runs.rank``).
COLLECTIVES = pa.schema(
    [
        *_RUN_KEY,
        pa.field("event_index", pa.int64(), nullable=False),  # the kernel's, as in gpu_ops
        pa.field("name", pa.string()),  # kernel name
        pa.field("stream", pa.int64()),
        pa.field("device", pa.int64()),
        pa.field("ts_ns", pa.int64()),
        pa.field("dur_ns", pa.int64()),
        pa.field("launch_ts_ns", pa.int64()),
        pa.field("step", pa.int64()),
        pa.field("collective", pa.string()),  # all_reduce | all_gather | ... (tw_collective)
        pa.field("collective_name", pa.string()),  # the "Collective name" arg as written
        pa.field("pg_name", pa.string()),  # "Process Group Name"
        pa.field("pg_desc", pa.string()),  # "Process Group Description"
        pa.field("pg_ranks", pa.string()),  # "Process Group Ranks" as written, e.g. "[0, 1]"
        pa.field("pg_size", pa.int64()),  # "Group size"
        pa.field("seq", pa.int64()),  # per-group sequence number (trace "Seq", else ordinal)
        pa.field("seq_source", pa.string()),  # trace | ordinal
        pa.field("dtype", pa.string()),
        pa.field("dtype_bytes", pa.int64()),  # bytes per element of dtype (NULL: unknown)
        pa.field("in_nelems", pa.int64()),
        pa.field("out_nelems", pa.int64()),
        pa.field("in_split_sizes", pa.string()),  # "In split size" as written
        pa.field("out_split_sizes", pa.string()),
        pa.field("msg_bytes", pa.int64()),  # in_nelems x dtype_bytes (per-rank input)
        pa.field("out_bytes", pa.int64()),  # out_nelems x dtype_bytes
    ]
)

#: The args of flow events that have any (e.g. HTA's critical-path annotations), apart
#: from ``flows`` so warehouses written before it keep their ``flows`` schema.
FLOW_ARGS = pa.schema(
    [
        *_RUN_KEY,
        pa.field("event_index", pa.int64(), nullable=False),
        pa.field("args_json", pa.string()),
    ]
)

#: A run's workload fingerprint: a MinHash signature of the set of its kernels' keys and of
#: its CPU operators with their input shapes (see ``sql/ingest/29_out_fingerprints.sql``).
#: Two runs' Jaccard similarity is about the share of equal signature slots.
FINGERPRINTS = pa.schema(
    [
        *_RUN_KEY,
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
        *_RUN_KEY,  # day: a plain column here (the table is not partitioned)
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

#: Slots of a fingerprint's MinHash signature.
MINHASH_SLOTS = 128

THREADS = pa.schema(
    [
        *_RUN_KEY,
        pa.field("pid", pa.int64()),
        pa.field("tid", pa.int64()),
        pa.field("pid_label", pa.string()),
        pa.field("tid_label", pa.string()),
        pa.field("kind", pa.string()),  # process_name | thread_name | *_sort_index | process_labels ...
        pa.field("value", pa.string()),
        pa.field("sort_index", pa.int64()),
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

#: The ``runs.anomalies_json`` keys that skew a run's times (counted at ingest by
#: ``sql/ingest/40_anomalies.sql``): a run with a count > 0 of any of them is flagged and stays
#: out of history baselines and change-point series (:mod:`tracewh.history.health` reads this;
#: the one definition). ``truncated_strings`` is informational and not among them.
BASELINE_ANOMALIES: tuple[str, ...] = ("duplicate_events", "correlation_reuse", "gpu_outside_cpu_window")
