"""A diffusion-style denoising loop: a tiny DiT-like denoiser called once per step.

An ordinary script (it knows nothing of tracewh). Capture its first denoising
steps, one step per call of ``TinyDenoiser.forward``::

    tracewh capture --steps 3 --step-on TinyDenoiser --out traces/diffusion -- \\
        python examples/diffusion_loop.py --num-steps 100

or one step per call of the script's ``denoise_step`` function::

    tracewh capture --steps 3 --step-on __main__:denoise_step -- python examples/diffusion_loop.py

The capture needs more steps than it records: after the 3 recorded ones, its overhead
measurement runs 19 rounds of 3 steps (``--overhead-rounds 9 --round-steps 2``), so the
default 100 denoising steps leave room for all of them.

The noise schedule is DDPM's linear beta schedule (beta from 1e-4 to 0.02 over the steps),
and the predicted clean latent is clipped to [-1, 1] as DDIM samplers do: every step is
finite whatever the number of steps (a cumulative product of the alphas themselves fell to
1e-20 and divided by its square root).
"""

from __future__ import annotations

import argparse
import math

import torch
from torch import nn


class Block(nn.Module):
    """Pre-norm transformer block with adaptive (time-conditioned) scale and shift."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.ada = nn.Linear(dim, 4 * dim)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        s1, b1, s2, b2 = self.ada(cond).unsqueeze(1).chunk(4, dim=-1)
        h = self.norm1(x) * (1 + s1) + b1
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x) * (1 + s2) + b2)


class TinyDenoiser(nn.Module):
    """Predicts the noise in a batch of 4x16x16 latents at timestep t (patches of 2x2)."""

    def __init__(self, dim: int = 64, depth: int = 2, heads: int = 4, channels: int = 4) -> None:
        super().__init__()
        self.patch = nn.Conv2d(channels, dim, kernel_size=2, stride=2)
        self.time = nn.Sequential(nn.Linear(dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(depth))
        self.out = nn.ConvTranspose2d(dim, channels, kernel_size=2, stride=2)
        self.dim = dim

    def embed_time(self, t: torch.Tensor) -> torch.Tensor:
        half = self.dim // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device) / half)
        angles = t.float()[:, None] * freqs[None]
        return self.time(torch.cat([angles.sin(), angles.cos()], dim=-1))

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        b, _, h, w = x.shape
        tokens = self.patch(x).flatten(2).transpose(1, 2)
        cond = self.embed_time(t)
        for block in self.blocks:
            tokens = block(tokens, cond)
        grid = tokens.transpose(1, 2).reshape(b, self.dim, h // 2, w // 2)
        return self.out(grid)  # type: ignore[no-any-return]


def denoise_step(model: TinyDenoiser, x: torch.Tensor, t: int, alphas: torch.Tensor) -> torch.Tensor:
    """One deterministic DDIM step from timestep t to t - 1."""
    ts = torch.full((x.shape[0],), t, device=x.device)
    eps = model(x, ts)
    a_t, a_prev = alphas[t], alphas[t - 1] if t > 0 else torch.ones((), device=x.device)
    x0 = ((x - (1 - a_t).sqrt() * eps) / a_t.sqrt()).clamp(-1.0, 1.0)
    return a_prev.sqrt() * x0 + (1 - a_prev).sqrt() * eps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-steps", type=int, default=100, help="denoising steps")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: keep)")
    parser.add_argument("--log-every", type=int, default=10, help="print before every N-th step")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = TinyDenoiser(dim=args.dim).to(args.device).eval()
    betas = torch.linspace(1e-4, 0.02, args.num_steps, device=args.device)
    alphas = (1 - betas).cumprod(0)  # alpha-bar: from ~1 down to exp(-sum of betas)
    x = torch.randn(args.batch, 4, 16, 16, device=args.device)
    with torch.no_grad():
        for i, t in enumerate(reversed(range(args.num_steps))):
            if i % args.log_every == 0:
                print(f"denoising step {i + 1}/{args.num_steps}", flush=True)
            x = denoise_step(model, x, t, alphas)
    print(f"done: {args.num_steps} denoising steps, latent std {x.std().item():.3f}", flush=True)


if __name__ == "__main__":
    main()
