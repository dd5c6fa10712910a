"""What the profiler's flags cost: tracewh.capture's own overhead measurement, flag by flag.

For three CPU workloads of ``examples/`` (a diffusion denoiser call, a decoding step, a
training step), captures with (a) ``with_stack`` + ``with_modules`` + ``record_shapes``
(tracewh's default), (b) ``record_shapes`` only and (c) no extra flag, interleaved
A B C A B C ... so that load drifts hit every configuration alike, and prints the median
estimate and the 95 % intervals of each configuration. One intra-op thread (stable timings on
a shared machine). Needs torch; prints a note and returns without it.

``python -m bench.run capture`` (``BENCH_CAPTURE_REPEATS``, default 3).
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CONFIGS: dict[str, dict[str, bool]] = {
    "stack+modules+shapes (default)": {
        "with_stack": True, "with_modules": True, "record_shapes": True,
    },
    "shapes only (--no-stack --no-modules)": {
        "with_stack": False, "with_modules": False, "record_shapes": True,
    },
    "no flags (--no-stack --no-modules --no-record-shapes)": {
        "with_stack": False, "with_modules": False, "record_shapes": False,
    },
}


def _example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"tw_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _workloads(torch: Any) -> dict[str, Callable[[], object]]:
    torch.manual_seed(0)
    diffusion, decode, train = _example("diffusion_loop"), _example("decode_loop"), _example("train_transformer")
    denoiser = diffusion.TinyDenoiser().eval()
    alphas = torch.linspace(0.9999, 0.02, 50).cumprod(0)
    latents = torch.randn(8, 4, 16, 16)
    decoder = decode.TinyDecoder(256, 64, 2, 4, 80).eval()
    prompt = torch.randint(0, 256, (4, 16))
    lm = train.TinyLM(256, 64, 2, 4, 32)
    opt = torch.optim.AdamW(lm.parameters(), lr=3e-4)
    data = torch.randint(0, 256, (8, 33))

    def denoise() -> object:
        with torch.no_grad():
            return diffusion.denoise_step(denoiser, latents, 25, alphas)

    def decode_step() -> object:
        with torch.inference_mode():
            return decode.decode_step(decoder, prompt)

    def train_step() -> object:
        logits = lm(data[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 256), data[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    return {
        "diffusion denoise_step": denoise,
        "decode_step": decode_step,
        "training step": train_step,
    }


def _vmhwm_mb() -> float:
    with open("/proc/self/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import torch
    except ImportError:
        print("torch is not installed (make capture-deps): skipped")
        return
    from tracewh.capture import profile_steps

    repeats = int(os.environ.get("BENCH_CAPTURE_REPEATS", "3"))
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 intra-op thread, {repeats} captures per configuration "
          "(14 traced rounds of 3 steps each), interleaved")
    for workload, step in _workloads(torch).items():
        results: dict[str, list[tuple[float, float | None, float | None, bool]]] = {
            c: [] for c in CONFIGS
        }
        untraced: list[int] = []
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(repeats):
                for i, (name, flags) in enumerate(CONFIGS.items()):
                    res = profile_steps(step, Path(tmp) / f"{r}-{i}", steps=2, overhead_rounds=14,
                                        round_steps=3, cuda=False, **flags)  # type: ignore[arg-type]
                    est = res.overhead
                    assert est is not None
                    results[name].append((est.pct, est.ci_low_pct, est.ci_high_pct, est.reliable))
                    untraced.append(int(res.labels["step_ns_median_untraced"]))
        print(f"\n{workload}: median untraced step {statistics.median(untraced) / 1e3:.0f} µs")
        for name, rows in results.items():
            cells = ", ".join(
                f"{p:+.1f}% [{lo:+.1f}, {hi:+.1f}]{'' if ok else '*'}"
                for p, lo, hi, ok in rows if lo is not None and hi is not None
            )
            med = statistics.median(p for p, *_ in rows)
            print(f"  {name:52} median {med:+6.1f}%   {cells}")
    print("\n(* = flagged unreliable: interval wider than ±10 points or estimate below -20 %)")
    print(f"peak RSS (VmHWM) {_vmhwm_mb():.0f} MB")
