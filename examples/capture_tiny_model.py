"""Capture a few training steps of a tiny model on CPU, ingest them, rank the CPU ops.

Needs the capture extra (``pip install 'tracewh[capture]'``, or the CPU build
``pip install torch==2.13.0``). Run from the repository root::

    .venv/bin/python examples/capture_tiny_model.py --out traces/tiny --warehouse ./warehouse
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from tracewh.api import Warehouse
from tracewh.capture import profile_steps


class TinyNet(torch.nn.Module):
    """A small conv + MLP classifier for 1x28x28 images."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 8, kernel_size=3, padding=1)
        self.head = torch.nn.Sequential(
            torch.nn.Flatten(),
            torch.nn.Linear(8 * 14 * 14, 64),
            torch.nn.ReLU(),
            torch.nn.Linear(64, 10),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.nn.functional.max_pool2d(torch.relu(self.conv(x)), 2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("traces/tiny"), help="capture directory")
    parser.add_argument("--warehouse", type=Path, default=Path("warehouse"))
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    torch.manual_seed(0)
    model = TinyNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    images, targets = torch.randn(32, 1, 28, 28), torch.randint(0, 10, (32,))

    def train_step() -> None:
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(images), targets).backward()
        opt.step()

    result = profile_steps(
        train_step,
        args.out,
        steps=args.steps,
        warmup=2,
        model_name="tinynet",
        labels={"example": "capture_tiny_model"},
    )
    print(f"trace: {result.trace_path}")
    print(f"run.json labels: {json.dumps(dict(result.labels))}")
    est = result.overhead
    if est is not None:
        interval = (
            f"95% interval {est.ci_low_pct:+.1f}% .. {est.ci_high_pct:+.1f}%"
            if est.ci_low_pct is not None and est.ci_high_pct is not None
            else "no interval"
        )
        print(
            f"median step {result.labels['step_ns_median_untraced']} ns untraced: profiler "
            f"overhead {est.pct:+.1f}% ({interval}, {len(est.ratios)} traced rounds)"
        )
        if not est.reliable:
            print(f"  (unreliable: {'; '.join(est.reasons)})")

    wh = Warehouse(args.warehouse)
    [ingested] = wh.ingest([result.trace_path]).results
    if ingested.run_id is None:
        raise SystemExit(f"ingest failed: {ingested.error}")
    print(f"{ingested.outcome}: run {ingested.run_id}, {ingested.events} events")
    print("CPU operators by total time:")
    print(wh.ops(ingested.run_id, cpu=True).head(10))


if __name__ == "__main__":
    main()
