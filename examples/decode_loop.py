"""Greedy token-by-token decoding with a tiny transformer (an inference loop).

An ordinary script (it knows nothing of tracewh). Capture its first decoding
steps, one step per call of its ``decode_step`` function::

    tracewh capture --steps 3 --step-on __main__:decode_step --out traces/decode -- \\
        python examples/decode_loop.py --tokens 64
"""

from __future__ import annotations

import argparse

import torch
from torch import nn


class TinyDecoder(nn.Module):
    """Embedding, causal transformer layers, vocabulary head (no KV cache: re-reads the prefix)."""

    def __init__(self, vocab: int, dim: int, depth: int, heads: int, max_len: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, 4 * dim, dropout=0.0, batch_first=True)
        self.layers = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        h = self.embed(tokens) + self.pos(torch.arange(n, device=tokens.device))
        mask = nn.Transformer.generate_square_subsequent_mask(n, device=tokens.device)
        return self.head(self.layers(h, mask=mask, is_causal=True))  # type: ignore[no-any-return]


def decode_step(model: TinyDecoder, tokens: torch.Tensor) -> torch.Tensor:
    """Append the most likely next token to each sequence."""
    logits = model(tokens)[:, -1]
    return torch.cat([tokens, logits.argmax(-1, keepdim=True)], dim=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64, help="tokens to generate")
    parser.add_argument("--prompt", type=int, default=16, help="prompt length")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=256)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: keep)")
    parser.add_argument("--log-every", type=int, default=16, help="print before every N-th token")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    max_len = args.prompt + args.tokens
    model = TinyDecoder(args.vocab, args.dim, 2, 4, max_len).to(args.device).eval()
    tokens = torch.randint(0, args.vocab, (args.batch, args.prompt), device=args.device)
    with torch.inference_mode():
        for i in range(args.tokens):
            if i % args.log_every == 0:
                print(f"token {i + 1}/{args.tokens}", flush=True)
            tokens = decode_step(model, tokens)
    print(f"done: {args.tokens} tokens, last {tokens[0, -4:].tolist()}", flush=True)


if __name__ == "__main__":
    main()
