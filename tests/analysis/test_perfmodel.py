"""op_work (sql/75_perfmodel.sql): FLOPs and bytes per call, from hand-worked formulas.

Every expected value below is written out from the textbook formula of its op type with the
case's shapes (no call into the code under test): GEMM 2*M*N*K, attention 4*B*H*S_q*S_kv*D
(x the unmasked fraction), convolution 2*numel(out)*C_in/groups*prod(kernel), ... Each case is
one cpu_op event in a run of its own, so one op_work query answers them all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from fixtures import query, warehouse

BF16, FP16, FP32, I64, FP8 = "c10::BFloat16", "c10::Half", "float", "long int", "c10::Float8_e4m3fn"
S, SL, N = "Scalar", "ScalarList", ""


@dataclass(frozen=True)
class Case:
    """One operator call and what op_work must say about it."""

    id: str
    name: str
    dims: list[Any]
    types: list[str]
    concrete: list[str] | None = None
    strides: list[Any] | None = None
    flops: float | None = None
    bytes: float | None = None
    expect: dict[str, Any] = field(default_factory=dict)
    note: str | None = None  # a substring of the note (flops and bytes then NULL)


def bshd_bytes(b: int, s: int, h: int, d: int, bpe: int) -> int:
    return b * s * h * d * bpe


CASES = [
    # ------------------------------------------------------------------ GEMM: 2*M*N*K
    Case("mm", "aten::mm", [[64, 128], [128, 32]], [BF16, BF16],
         flops=2 * 64 * 32 * 128, bytes=(64 * 128 + 128 * 32 + 64 * 32) * 2,
         expect={"family": "gemm", "dtype": "bf16", "roof": "bf16", "params": "M=64 N=32 K=128"}),
    Case("addmm", "aten::addmm", [[32], [64, 128], [128, 32], [], []], [FP16, FP16, FP16, S, S],
         concrete=["", "", "", "1", "1"], strides=[[1], [128, 1], [1, 128], [], []],
         flops=2 * 64 * 32 * 128 + 64 * 32, bytes=(64 * 128 + 128 * 32 + 64 * 32 + 32) * 2,
         expect={"non_contiguous": False, "roof": "fp16"}),  # a transposed weight is BLAS-native
    Case("mm_strided", "aten::mm", [[64, 128], [128, 32]], [BF16, BF16],
         strides=[[256, 2], [32, 1]], flops=2 * 64 * 32 * 128,
         expect={"non_contiguous": True}),  # every other column: not a BLAS layout
    Case("bmm", "aten::bmm", [[8, 16, 32], [8, 32, 24]], [FP32, FP32],
         flops=2 * 8 * 16 * 24 * 32, bytes=(8 * 16 * 32 + 8 * 32 * 24 + 8 * 16 * 24) * 4,
         expect={"roof": "fp32", "params": "B=8 M=16 N=24 K=32"}),
    Case("baddbmm", "aten::baddbmm", [[8, 16, 24], [8, 16, 32], [8, 32, 24], [], []],
         [BF16, BF16, BF16, S, S],
         flops=2 * 8 * 16 * 24 * 32 + 8 * 16 * 24,
         bytes=(8 * 16 * 24 + 8 * 16 * 32 + 8 * 32 * 24 + 8 * 16 * 24) * 2),
    # batch dims broadcast: [2, 1] with [3] -> [2, 3], 6 products of [16, 32] x [32, 8]
    Case("matmul_broadcast", "aten::matmul", [[2, 1, 16, 32], [3, 32, 8]], [BF16, BF16],
         flops=2 * 6 * 16 * 8 * 32, bytes=(2 * 16 * 32 + 3 * 32 * 8 + 6 * 16 * 8) * 2),
    # x [4, 10, 64] . W[128, 64]^T + b: M = 40, N = 128, K = 64
    Case("linear", "aten::linear", [[4, 10, 64], [128, 64], [128]], [BF16, BF16, BF16],
         flops=2 * 40 * 128 * 64 + 40 * 128, bytes=(4 * 10 * 64 + 128 * 64 + 40 * 128 + 128) * 2),
    # fp8 x fp8 -> bf16 (out_dtype 15), two fp32 scalar scales
    Case("scaled_mm", "aten::_scaled_mm", [[64, 128], [128, 32], [], [], [], [], [], []],
         [FP8, FP8, FP32, FP32, N, N, S, S], concrete=["", "", "", "", "", "", "15", "False"],
         flops=2 * 64 * 32 * 128, bytes=64 * 128 * 1 + 128 * 32 * 1 + 64 * 32 * 2 + 4 + 4,
         expect={"dtype": "fp8_e4m3fn", "roof": "fp8"}),
    # MoE: 1000 routed tokens x 8 experts' [64, 32] weights
    Case("grouped_mm", "aten::_grouped_mm", [[1000, 64], [8, 64, 32], [8], [], []],
         [BF16, BF16, "int", N, N], concrete=["", "", "", "", ""],
         flops=2 * 1000 * 64 * 32, bytes=(1000 * 64 + 8 * 64 * 32 + 1000 * 32) * 2,
         expect={"family": "grouped_gemm"}),
    # ------------------------------------------------------------------ attention
    # 2*B*H*S_q*S_kv*D for QK^T plus as much for PV
    Case("sdpa", "aten::scaled_dot_product_attention",
         [[2, 8, 128, 64], [2, 8, 128, 64], [2, 8, 128, 64], [], [], [], [], []],
         [BF16, BF16, BF16, N, S, S, N, S], concrete=["", "", "", "", "0.", "False", "", "False"],
         flops=4 * 2 * 8 * 128 * 128 * 64, bytes=4 * 2 * 8 * 128 * 64 * 2,
         expect={"family": "attention", "params": "B=2 H=8 S_q=128 S_kv=128 D=64"}),
    # [B, S, H, D], causal with S_q = S_kv: half the score matrix
    Case("flash_causal", "aten::_flash_attention_forward",
         [[2, 128, 8, 64]] * 3 + [[]] * 12, [BF16] * 3 + [N, N] + [S] * 6 + [N] * 4,
         concrete=["", "", "", "", "", "128", "128", "0.", "True", "False", "", "", "", "", ""],
         flops=4 * 2 * 8 * 128 * 128 * 64 / 2, bytes=4 * bshd_bytes(2, 128, 8, 64, 2),
         expect={"params": "B=2 H=8 S_q=128 S_kv=128 D=64 causal"}),
    # mask type 2 (bottom-right), S_q = 64 < S_kv = 256: rows see 192 + i + 1 keys, area
    # 64*192 + 64*64/2 of 64*256 = 0.875
    Case("efficient_bottom_right", "aten::_efficient_attention_forward",
         [[1, 64, 4, 32], [1, 256, 4, 32], [1, 256, 4, 32]] + [[]] * 11,
         [BF16] * 3 + [N, N, N, S, S, S, S, S, S, N, N],
         concrete=["", "", "", "", "", "", "", "", "0.", "2", "True", "", "", ""],
         flops=0.875 * 2 * 1 * 4 * 64 * 256 * (32 + 32),
         bytes=(64 * 4 * 32 + 2 * 256 * 4 * 32 + 64 * 4 * 32) * 2),
    # aten SDPA causal aligns top-left: S_q = 64 rows of S_kv = 256 keys see 64*64/2
    Case("sdpa_causal_top_left", "aten::scaled_dot_product_attention",
         [[1, 4, 64, 32], [1, 4, 256, 32], [1, 4, 256, 32], [], [], [], [], []],
         [BF16, BF16, BF16, N, S, S, N, S], concrete=["", "", "", "", "0.", "True", "", "False"],
         flops=(64 * 64 / 2) / (64 * 256) * 2 * 4 * 64 * 256 * (32 + 32)),
    # grouped-query attention: 32 query heads over 8 KV heads
    Case("sdpa_gqa", "aten::scaled_dot_product_attention",
         [[1, 32, 16, 64], [1, 8, 16, 64], [1, 8, 16, 64], [], [], [], [], []],
         [BF16, BF16, BF16, N, S, S, N, S], concrete=["", "", "", "", "0.", "False", "", "True"],
         flops=2 * 1 * 32 * 16 * 16 * (64 + 64),
         bytes=(32 * 16 * 64 + 2 * 8 * 16 * 64 + 32 * 16 * 64) * 2,
         expect={"params": "B=1 H=32 H_kv=8 S_q=16 S_kv=16 D=64"}),
    # backward: 5 matmuls (QK^T again, dV, dP, dQ, dK) = 2.5 x the forward; Q K V O dO read,
    # dQ dK dV written
    Case("flash_bwd", "aten::_scaled_dot_product_flash_attention_backward",
         [[1, 4, 64, 32]] * 5 + [[1, 4, 64]] + [[]] * 9,
         [BF16] * 5 + [FP32] + [N, N, S, S, S, S, N, N, S],
         concrete=[""] * 10 + ["0.", "False", "", "", ""],
         flops=2.5 * 4 * 1 * 4 * 64 * 64 * 32, bytes=2 * 4 * (4 * 64 * 32) * 2,
         expect={"family": "attention_bwd"}),
    Case("flash_varlen", "aten::_flash_attention_forward",
         [[300, 8, 64]] * 3 + [[4], [4]] + [[]] * 10, [BF16] * 3 + ["int", "int"] + [S] * 6 + [N] * 4,
         concrete=["", "", "", "", "", "128", "128", "0.", "True", "False", "", "", "", "", ""],
         note="variable-length"),
    Case("flash_no_concrete", "aten::_flash_attention_forward", [[2, 128, 8, 64]] * 3,
         [BF16] * 3, note="is_causal not recorded"),
    # ------------------------------------------------------------------ convolution
    # cudnn_convolution(self, weight, padding, stride, dilation, groups, ...): padding first.
    # out = floor((32 + 2*1 - 1*(3-1) - 1) / 2) + 1 = 16
    Case("cudnn_conv", "aten::cudnn_convolution", [[2, 3, 32, 32], [16, 3, 3, 3]] + [[]] * 7,
         [BF16, BF16, SL, SL, SL, S, S, S, S],
         concrete=["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"],
         flops=2 * (2 * 16 * 16 * 16) * (3 * 3 * 3),
         bytes=(2 * 3 * 32 * 32 + 16 * 3 * 3 * 3 + 2 * 16 * 16 * 16) * 2,
         expect={"family": "conv", "roof": "bf16"}),
    # groups 2, dilation 2, bias: out = (10 - 2*(3-1) - 1) + 1 = 6 -> [1, 8, 6, 6] = 288
    Case("conv_groups_bias", "aten::convolution", [[1, 4, 10, 10], [8, 2, 3, 3], [8]] + [[]] * 6,
         [FP32, FP32, FP32, SL, SL, SL, S, SL, S],
         concrete=["", "", "", "[1, 1]", "[0, 0]", "[2, 2]", "False", "[0, 0]", "2"],
         flops=2 * 288 * (2 * 3 * 3) + 288, bytes=(400 + 8 * 2 * 3 * 3 + 288 + 8) * 4,
         expect={"roof": "fp32"}),
    # transposed: out = (5-1)*2 - 0 + 1*(3-1) + 0 + 1 = 11; each input element feeds
    # C_out/groups * prod(kernel) outputs
    Case("conv_transpose", "aten::cudnn_convolution_transpose", [[1, 8, 5, 5], [8, 4, 3, 3]] + [[]] * 8,
         [FP16, FP16, SL, SL, SL, SL, S, S, S, S],
         concrete=["", "", "[0, 0]", "[0, 0]", "[2, 2]", "[1, 1]", "1", "False", "False", "True"],
         flops=2 * (1 * 8 * 5 * 5) * (4 * 3 * 3), bytes=(200 + 8 * 4 * 9 + 4 * 11 * 11) * 2),
    # backward: grad_input and grad_weight each cost the forward's 2*numel(out)*27, the bias
    # gradient numel(out)
    Case("conv_bwd", "aten::convolution_backward",
         [[2, 16, 16, 16], [2, 3, 32, 32], [16, 3, 3, 3]] + [[]] * 8,
         [BF16, BF16, BF16, SL, SL, SL, SL, S, SL, S, SL],
         concrete=["", "", "", "[16]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1",
                   "[True, True, True]"],
         flops=2 * (2 * (2 * 16 * 16 * 16) * 27) + 2 * 16 * 16 * 16,
         bytes=(8192 + (432 + 6144) + (6144 + 432) + 16) * 2, expect={"family": "conv_bwd"}),
    # ------------------------------------------------------------------ normalisation
    # E = 4*10*768 = 30720 elements in 40 rows: 6 FLOPs per element + weight + bias
    Case("layer_norm", "aten::native_layer_norm", [[4, 10, 768], [], [768], [768], []],
         [BF16, SL, BF16, BF16, S], concrete=["", "[768]", "", "", "1e-05"],
         flops=8 * 30720, bytes=2 * 30720 * 2 + 2 * 768 * 2 + 2 * 4 * 40,
         expect={"family": "norm", "roof": "vector"}),
    Case("layer_norm_plain", "aten::layer_norm", [[4, 10, 768], [], [], [], [], []],
         [BF16, SL, N, N, S, S], concrete=["", "[768]", "", "", "1e-05", "True"],
         flops=6 * 30720, bytes=2 * 30720 * 2 + 2 * 4 * 40),
    # no Concrete Inputs: normalized_shape from the weight
    Case("layer_norm_weight_shape", "aten::native_layer_norm", [[4, 10, 768], [], [768], [768], []],
         [BF16, SL, BF16, BF16, S], flops=8 * 30720),
    # layer norm backward as the real traces record it (trace_diff control, A100): no Concrete
    # Inputs, so all three gradients; [1024, 512] fp32 in 1024 rows of C = 512 (the weight):
    # dx 10 FLOPs per element (x_hat 2, g*w 1, two row sums 3, dx 4), dweight 2, dbias 1;
    # read grad, input, mean + rstd (fp32 per row), weight; write dx, dweight, dbias
    Case("layer_norm_bwd", "aten::native_layer_norm_backward",
         [[1024, 512], [1024, 512], [], [1024, 1], [1024, 1], [512], [512], []],
         [FP32, FP32, N, FP32, FP32, FP32, FP32, N],
         flops=(10 + 2 + 1) * 1024 * 512,
         bytes=(2 * 1024 * 512 + 2 * 1024 + 512 + 1024 * 512 + 512 + 512) * 4,
         expect={"family": "norm_bwd", "roof": "vector", "params": "layer_norm_backward rows=1024 C=512 dx dweight dbias"}),
    # only dx asked for (output_mask), no affine: C from E / numel(mean), bf16 data, fp32 stats
    Case("layer_norm_bwd_dx", "aten::native_layer_norm_backward",
         [[4, 10, 768], [4, 10, 768], [], [4, 10, 1], [4, 10, 1], [], [], []],
         [BF16, BF16, N, FP32, FP32, N, N, N], concrete=["", "", "[768]", "", "", "", "", "[True, False, False]"],
         flops=9 * 30720, bytes=3 * 30720 * 2 + 2 * 40 * 4),
    Case("rms_norm", "aten::rms_norm", [[8, 512], [], [512], []], [FP32, SL, FP32, S],
         concrete=["", "[512]", "", "1e-06"], flops=4096 * (3 + 1), bytes=2 * 4096 * 4 + 512 * 4),
    # E = 2*32*8*8 = 4096, 8 groups: mean and rstd (fp32) per (sample, group)
    Case("group_norm", "aten::native_group_norm", [[2, 32, 8, 8], [32], [32], [], [], [], [], []],
         [FP16, FP16, FP16, S, S, S, S, S], concrete=["", "", "", "2", "32", "64", "8", "1e-05"],
         flops=4096 * 8, bytes=2 * 4096 * 2 + 32 * 2 * 2 + 2 * 4 * 2 * 8),
    # inference: y = x*scale + shift with per-channel constants; running stats read
    Case("batch_norm_eval", "aten::native_batch_norm", [[4, 16, 8, 8], [16], [16], [16], [16], [], [], []],
         [BF16, BF16, BF16, BF16, BF16, S, S, S], concrete=["", "", "", "", "", "False", "0.1", "1e-05"],
         flops=2 * 4096, bytes=2 * 4096 * 2 + 16 * 2 * 2 + 2 * 16 * 2),
    # ------------------------------------------------------------------ softmax
    Case("softmax_half_to_float", "aten::_softmax", [[4, 128, 128], [], []], [BF16, S, S],
         concrete=["", "-1", "True"], flops=5 * 65536, bytes=65536 * 2 + 65536 * 4,
         expect={"family": "softmax"}),
    Case("softmax_bwd", "aten::_softmax_backward_data", [[4, 128], [4, 128], [], []], [FP16, FP16, S, S],
         concrete=["", "", "-1", "5"], flops=4 * 512, bytes=2 * 512 * 2 + 512 * 2),
    # ------------------------------------------------------------------ pointwise
    # [4, 1, 8] + [3, 1] broadcasts to [4, 3, 8] = 96 elements; alpha is a Scalar
    Case("add_broadcast", "aten::add", [[4, 1, 8], [3, 1], []], [BF16, BF16, S],
         concrete=["", "", "1"], flops=96, bytes=(32 + 3) * 2 + 96 * 2,
         expect={"family": "pointwise", "roof": "vector"}),
    Case("mul_scalar", "aten::mul", [[16, 16], []], [FP32, S], flops=256, bytes=256 * 4 + 256 * 4),
    Case("eq_bool_out", "aten::eq", [[10], []], [I64, S], flops=10, bytes=10 * 8 + 10 * 1),
    Case("add_inplace", "aten::add_", [[8, 8], [8], []], [BF16, BF16, S],
         flops=64, bytes=(64 + 8) * 2 + 64 * 2),
    # the condition is not a value input; a 0-dim tensor does not promote the dtype
    Case("where", "aten::where", [[5, 5], [5, 5], []], ["bool", FP16, FP16],
         flops=25, bytes=25 * 1 + 25 * 2 + 1 * 2 + 25 * 2),
    # only 0-dim tensors (real traces: index arithmetic): one element of the first one's dtype
    Case("mul_0dim", "aten::mul", [[], []], [I64, I64], flops=1, bytes=8 + 8 + 8),
    # `where` of a condition and two Python scalars: the output dtype is not in the trace
    Case("where_scalars", "aten::where", [[1024], [], []], ["bool", S, S],
         note="pointwise inputs not recognised"),
    Case("gelu", "aten::gelu", [[100], []], [FP32, N], flops=100, bytes=100 * 4 * 2),
    Case("fill", "aten::fill_", [[50], []], [BF16, S], flops=0, bytes=50 * 2),
    # out= variants (issue 30): the out tensor is written once and never read
    Case("mul_out", "aten::mul", [[16, 16], [], [16, 16]], [FP32, S, FP32], flops=256,
         bytes=256 * 4 + 256 * 4, expect={"params": "elements=256 inputs=1 out-variant"}),
    Case("add_out", "aten::add", [[8, 8], [8], [], [8, 8]], [BF16, BF16, S, BF16],
         flops=64, bytes=(64 + 8) * 2 + 64 * 2),
    Case("gelu_out", "aten::gelu", [[100], [], [100]], [FP32, N, FP32], flops=100, bytes=100 * 4 * 2),
    Case("div_mode_out", "aten::div", [[10], [10], [], [10]], [FP32, FP32, "str", FP32],
         flops=10, bytes=10 * 4 * 3),
    Case("div_mode", "aten::div", [[10], [10], []], [FP32, FP32, "str"], flops=10, bytes=10 * 4 * 3),
    Case("mul_two_tensors", "aten::mul", [[16], [16]], [FP32, FP32], flops=16, bytes=16 * 4 * 3,
         expect={"params": "elements=16 inputs=2"}),
    # in-place: self is read and written (the other input read)
    Case("mul_inplace", "aten::mul_", [[16, 16], []], [FP32, S], flops=256, bytes=256 * 4 * 2,
         expect={"params": "elements=256 inputs=1 in-place"}),
    Case("add_transposed_input", "aten::add", [[4, 8], [4, 8], []], [FP32, FP32, S],
         strides=[[1, 4], [8, 1], []], expect={"non_contiguous": True}),
    Case("add_expanded_input", "aten::add", [[4, 8], [4, 8], []], [FP32, FP32, S],
         strides=[[0, 1], [8, 1], []], expect={"non_contiguous": False}),
    # ------------------------------------------------------------------ reductions
    Case("sum_dim", "aten::sum", [[4, 8, 16], [], [], []], [BF16, SL, S, N],
         concrete=["", "[1]", "False", ""], flops=512, bytes=512 * 2 + 64 * 2,
         expect={"family": "reduction"}),
    Case("mean_all", "aten::mean", [[10, 10], []], [FP32, N], concrete=["", ""],
         flops=100, bytes=100 * 4 + 1 * 4),
    Case("amax_last_dim", "aten::amax", [[6, 7], [], []], [FP16, SL, S],
         concrete=["", "[-1]", "True"], flops=42, bytes=42 * 2 + 6 * 2),
    # max.dim returns values and int64 indices
    Case("max_dim", "aten::max", [[6, 7], [], []], [FP32, S, S], concrete=["", "1", "False"],
         flops=42, bytes=42 * 4 + 6 * 4 + 6 * 8),
    # ------------------------------------------------------------------ copies, casts, gathers
    Case("copy_cast", "aten::copy_", [[32, 32], [32, 32], []], [BF16, FP32, S],
         concrete=["", "", "False"], flops=0, bytes=1024 * 4 + 1024 * 2,
         expect={"family": "copy", "dtype": "fp32", "params": "elements=1024 cast fp32->bf16"}),
    # clone of a transposed [1, 768, 8] view (H100 trace): the 768-dim has stride 1 but the
    # 8-dim after it stride 768, not 1: a layout change, not a plain copy
    Case("clone_transposed", "aten::clone", [[1, 768, 8], []], [BF16, S], concrete=["", "0"],
         strides=[[6144, 1, 768], []], flops=0, bytes=6144 * 2 * 2,
         expect={"non_contiguous": True}),
    Case("clone_dense", "aten::clone", [[1, 768, 8], []], [BF16, S], concrete=["", "0"],
         strides=[[6144, 8, 1], []], flops=0, bytes=6144 * 2 * 2,
         expect={"non_contiguous": False}),
    Case("to_copy", "aten::_to_copy", [[10]] + [[]] * 6, [FP32, S, N, N, N, S, N],
         concrete=["", "15", "", "", "", "False", ""], flops=0, bytes=10 * 4 + 10 * 2),
    # 5 rows of 16 gathered: indices read, rows read, rows written
    Case("index_select", "aten::index_select", [[100, 16], [], [5]], [BF16, S, I64],
         concrete=["", "0", ""], flops=0, bytes=5 * 8 + 2 * 80 * 2),
    Case("embedding", "aten::embedding", [[1000, 64], [2, 7], [], [], []], [BF16, I64, S, S, S],
         concrete=["", "", "-1", "False", "False"], flops=0, bytes=14 * 8 + 2 * (2 * 7 * 64) * 2,
         expect={"family": "embedding"}),
    # ------------------------------------------------------------------ no model
    Case("cat", "aten::cat", [[[2, 3], [2, 3]], []], ["TensorList", S], note="TensorList"),
    Case("unknown", "aten::foo", [[2, 3]], [FP32], note="no perf model"),
    Case("no_dims", "aten::mm", None, None, note="record_shapes"),  # type: ignore[arg-type]
]

#: dtype label and bytes per element of each "Input type" spelling (a neg over 10 elements
#: reads and writes 10 of them).
DTYPES = [
    (BF16, "bf16", 2), (FP16, "fp16", 2), (FP32, "fp32", 4), ("double", "fp64", 8),
    (FP8, "fp8_e4m3fn", 1), ("c10::Float8_e5m2", "fp8_e5m2", 1),
    ("c10::Float8_e4m3fnuz", "fp8_e4m3fnuz", 1), ("c10::Float8_e5m2fnuz", "fp8_e5m2fnuz", 1),
    ("signed char", "int8", 1), ("unsigned char", "uint8", 1), ("int", "int32", 4), (I64, "int64", 8),
]


def _event(case_id: str, name: str, dims: Any, types: Any, concrete: Any, strides: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"External id": 1, "Ev Idx": 0}
    for key, value in (("Input Dims", dims), ("Input type", types), ("Concrete Inputs", concrete),
                       ("Input Strides", strides)):
        if value is not None:
            args[key] = value
    return {"run_id": case_id, "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts_ns": 1000,
            "dur_ns": 500, "args_json": json.dumps(args)}


@pytest.fixture(scope="module")
def work() -> dict[str, dict[str, Any]]:
    events = [_event(c.id, c.name, c.dims, c.types, c.concrete, c.strides) for c in CASES]
    events += [_event(f"dtype-{label}", "aten::neg", [[10]], [t], None, None) for t, label, _ in DTYPES]
    con = warehouse(events=events)
    runs = [e["run_id"] for e in events]
    df = query(con, "SELECT * FROM op_work(?)", [runs])
    assert df.height == len(events)  # one signature per case
    return {r["run_id"]: r for r in df.iter_rows(named=True)}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_op_work_matches_the_hand_formula(work: dict[str, dict[str, Any]], case: Case) -> None:
    row = work[case.id]
    if case.note is not None:
        assert row["flops"] is None and row["bytes"] is None
        assert case.note in (row["note"] or ""), row["note"]
        return
    assert row["note"] is None
    if case.flops is not None:
        assert row["flops"] == pytest.approx(case.flops, rel=1e-12)
    if case.bytes is not None:
        assert row["bytes"] == pytest.approx(case.bytes, rel=1e-12)
    for key, value in case.expect.items():
        assert row[key] == value, (key, row)


@pytest.mark.parametrize(("type_name", "label", "size"), DTYPES, ids=[d[1] for d in DTYPES])
def test_dtype_sizes_from_input_type(work: dict[str, dict[str, Any]], type_name: str, label: str,
                                     size: int) -> None:
    row = work[f"dtype-{label}"]
    assert row["dtype"] == label
    assert row["bytes"] == 10 * size * 2  # read and write 10 elements
    assert row["flops"] == 10


def test_strides_unknown_leave_contiguity_unknown(work: dict[str, dict[str, Any]]) -> None:
    assert work["mm"]["non_contiguous"] is None  # the case records no Input Strides
