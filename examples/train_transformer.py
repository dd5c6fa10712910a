"""Train a tiny transformer language model on random tokens (a training loop).

An ordinary script (it knows nothing of tracewh). Capture its first training
steps, one step per ``optimizer.step()``::

    tracewh capture --steps 3 --step-on optimizer --out traces/train -- \\
        python examples/train_transformer.py --iters 200
"""

from __future__ import annotations

import argparse

import torch
from torch import nn


class TinyLM(nn.Module):
    """Token embedding, a few causal transformer layers, a vocabulary head."""

    def __init__(self, vocab: int, dim: int, depth: int, heads: int, seq: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(seq, dim))
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True)
        self.layers = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens) + self.pos[: tokens.shape[1]]
        return self.head(self.layers(h, mask=self.mask, is_causal=True))  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=200, help="training iterations")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: keep)")
    parser.add_argument("--log-every", type=int, default=20, help="print before every N-th iteration")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = TinyLM(args.vocab, args.dim, args.depth, 4, args.seq).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    loss_fn = nn.CrossEntropyLoss()
    data = torch.randint(0, args.vocab, (args.batch, args.seq + 1), device=args.device)
    for i in range(args.iters):
        if i % args.log_every == 0:
            print(f"iteration {i + 1}/{args.iters}", flush=True)
        logits = model(data[:, :-1])
        loss = loss_fn(logits.reshape(-1, args.vocab), data[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    print(f"done: {args.iters} iterations, loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
