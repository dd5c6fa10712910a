"""Kineto event categories and name prefixes tracewh sorts events by (no pyarrow here).

:mod:`tracewh.schema.arrow` re-exports them; modules that need only these (the staging
code) import them from here, so that importing them does not import pyarrow.
"""

from __future__ import annotations

__all__ = [
    "BASELINE_ANOMALIES", "GPU_OP_CATEGORIES", "LAUNCH_FLOW_CATEGORIES", "MODULE_PREFIX", "PYTHON_CATEGORY",
    "RUNTIME_CATEGORIES",
]

#: Kineto categories of GPU-side activity (current, legacy and MTIA spellings).
GPU_OP_CATEGORIES: frozenset[str] = frozenset(
    {
        "kernel",
        "gpu_memcpy",
        "gpu_memset",
        "Kernel",
        "Memcpy",
        "Memset",
        "mtia_ccp_events",
    }
)

#: Categories of host-side runtime / driver API calls (launches and syncs).
RUNTIME_CATEGORIES: frozenset[str] = frozenset(
    {"cuda_runtime", "cuda_driver", "Runtime", "mtia_runtime", "hip_runtime"}
)

#: Flow categories that link a launch to its GPU op.
LAUNCH_FLOW_CATEGORIES: frozenset[str] = frozenset({"ac2g", "async_gpu", "async_cpu_to_gpu"})

#: Category of Python stack events (stored in the ``python`` table, not ``events``).
PYTHON_CATEGORY = "python_function"

#: Name prefix of the python_function spans of nn.Module calls (``nn.Module: Linear_3``).
MODULE_PREFIX = "nn.Module: "

#: The ``runs.anomalies_json`` keys that skew a run's times (counted at ingest by
#: ``sql/ingest/40_anomalies.sql``): a run with a count > 0 of any of them is flagged and stays
#: out of history baselines and change-point series (:mod:`tracewh.history.health` reads this;
#: the one definition, re-exported as ``tracewh.schema.arrow.BASELINE_ANOMALIES``).
#: ``truncated_strings`` is informational and not among them.
BASELINE_ANOMALIES: tuple[str, ...] = ("duplicate_events", "correlation_reuse", "gpu_outside_cpu_window")

#: Slots of a fingerprint's MinHash signature (``fingerprints.minhash``; computed at ingest by
#: :mod:`tracewh.ingest.fingerprint`; re-exported as ``tracewh.schema.arrow.MINHASH_SLOTS``).
MINHASH_SLOTS = 128
