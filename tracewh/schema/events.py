"""The event tables' Arrow schemas: one row per trace event of a kind (declared once).

The columns every run table starts with (:data:`RUN_KEY`: ``run_id``, ``ingest_id``, ``day``)
and every duration-event table (:data:`EVENT_BASE`), then one schema per event table.
:mod:`tracewh.schema.arrow` holds the run-level tables and the registry of all of them
(``TABLES``), and re-exports these names; the module docstring there says what the units are.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "ANNOTATION_SPANS", "COLLECTIVES", "COUNTERS", "EVENTS", "EVENT_BASE", "FLOWS", "FLOW_ARGS", "GPU_OPS",
    "GRAPH_NODES", "INSTANTS", "MODULE_SPANS", "PYTHON", "RUN_KEY", "STEPS", "THREADS",
]

# ---------------------------------------------------------------------------
# columns shared by event-like tables
# ---------------------------------------------------------------------------

RUN_KEY: list[pa.Field] = [
    pa.field("run_id", pa.string(), nullable=False),  # first 16 hex digits of the file's sha256
    pa.field("ingest_id", pa.string(), nullable=False),  # the ingest that wrote the row (visibility)
    pa.field("day", pa.date32(), nullable=False),  # UTC date of the trace start (partition)
]

EVENT_BASE: list[pa.Field] = [
    *RUN_KEY,
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

EVENTS = pa.schema(EVENT_BASE)

PYTHON = pa.schema(
    [
        *EVENT_BASE,
        pa.field("python_id", pa.int64()),
        pa.field("python_parent_id", pa.int64()),
    ]
)

GPU_OPS = pa.schema(
    [
        *EVENT_BASE,
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
        *RUN_KEY,
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
        *RUN_KEY,
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
        *RUN_KEY,
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
        *RUN_KEY,
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
        *RUN_KEY,
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
        *RUN_KEY,
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
        *RUN_KEY,
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
        *RUN_KEY,
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
        *RUN_KEY,
        pa.field("event_index", pa.int64(), nullable=False),
        pa.field("args_json", pa.string()),
    ]
)

THREADS = pa.schema(
    [
        *RUN_KEY,
        pa.field("pid", pa.int64()),
        pa.field("tid", pa.int64()),
        pa.field("pid_label", pa.string()),
        pa.field("tid_label", pa.string()),
        pa.field("kind", pa.string()),  # process_name | thread_name | *_sort_index | process_labels ...
        pa.field("value", pa.string()),
        pa.field("sort_index", pa.int64()),
    ]
)
