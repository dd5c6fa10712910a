"""Realistic synthetic Kineto (``torch.profiler``) traces for tests, demos and benchmarks.

A trace is a diffusion-style denoising loop (``ProfilerStep#N`` repeated) of a
DiT-like transformer with tensor parallelism: nested ``cpu_op`` events, runtime
launches with correlations, kernels on compute/NCCL/copy streams, memcpy/memset,
``ac2g`` flows, ``[memory]`` instants and optional ``python_function`` events,
laid out as Kineto writes them (header keys before ``traceEvents``, trailer after).

Generation streams: each step is pre-rendered a few times as a text template and
repeated with shifted timestamps and ids, so memory is bounded at any size.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tracewh.synth.options import (
    Regression,
    Straggler,
    SynthConfig,
    SynthSummary,
    parse_date,
    parse_flavor,
    parse_percent,
    parse_regression,
    parse_size,
    parse_straggler,
)

if TYPE_CHECKING:
    from tracewh.synth.writer import (
        DEFAULT_START,
        run_labels,
        synthesize,
        write_history,
        write_trace,
        write_traces,
    )

#: The writer's names, imported on first use (``tracewh.synth.options`` alone is what every
#: command's start needs: ``tracewh synth``'s defaults; the writer is ~8 ms more).
_WRITER = ("DEFAULT_START", "run_labels", "synthesize", "write_history", "write_trace", "write_traces")


def __getattr__(name: str) -> Any:
    if name in _WRITER:
        from tracewh.synth import writer

        return getattr(writer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "DEFAULT_START",
    "Regression",
    "Straggler",
    "SynthConfig",
    "SynthSummary",
    "parse_date",
    "parse_flavor",
    "parse_percent",
    "parse_regression",
    "parse_size",
    "parse_straggler",
    "run_labels",
    "synthesize",
    "write_history",
    "write_trace",
    "write_traces",
]
