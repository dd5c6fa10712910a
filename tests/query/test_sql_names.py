"""Kernel naming and classification rules (sql/05_names.sql), on hand-checked and real names."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from tracewh.query.db import connect_tables
from tracewh.schema.arrow import GPU_OP_CATEGORIES

CATEGORIES = {
    "gemm", "attention", "conv", "norm", "elementwise", "reduction", "communication",
    "memcpy_HtoD", "memcpy_DtoH", "memcpy_DtoD", "memcpy_PtoP", "memset", "triton", "other",
}  # fmt: skip

# (cat, real name from ../shared/traces, expected category, expected short name); checked by hand
HAND_CHECKED: list[tuple[str, str, str, str]] = [
    ("kernel", "volta_sgemm_128x32_nn", "gemm", "volta_sgemm_128x32_nn"),
    ("kernel", "ampere_sgemm_64x64_nn", "gemm", "ampere_sgemm_64x64_nn"),
    ("kernel", "ampere_gcgemm_64x64_nt", "gemm", "ampere_gcgemm_64x64_nt"),
    ("kernel", "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>(cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4::Params)", "gemm", "cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4"),
    ("Kernel", "void cutlass::Kernel<cutlass_70_wmma_tensorop_f16_s161616gemm_f16_32x32_64x2_tn_align8>(cutlass_70_wmma_tensorop_f16_s161616gemm_f16_32x32_64x2_tn_align8::Params)", "gemm", "cutlass_70_wmma_tensorop_f16_s161616gemm_f16_32x32_64x2_tn_align8"),
    ("kernel", "void splitKreduce_kernel<float, float, float, float, true, false, false>(cublasSplitKParams<float>, float const*, float const*, float*, float const*, float const*, float const*, float const*, float*, void*, long, float*, int*)", "gemm", "splitKreduce_kernel"),
    ("kernel", "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 2, 2, false, false, cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>, float, float)", "gemm", "gemv2T_kernel_val"),
    ("kernel", "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, float, float, false, true, false, false, 7, cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float> >(cublasGemvParams<cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>)", "gemm", "gemvx::kernel"),
    ("kernel", "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_EPS0_GRVWA2_GRVWB2_GSUAMB_ISA90a_IU1_K1", "gemm", "Cijk_Alik_Bljk_SB_MT64x16x32"),
    ("mtia_ccp_events", "fc-dtype_Float", "gemm", "fc"),
    ("mtia_ccp_events", "batch_matmul-dtype_Float", "gemm", "batch_matmul"),
    ("kernel", "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer", "conv", "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer"),
    ("kernel", "cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1", "conv", "cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1"),
    ("kernel", "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(cudnn::winograd_nonfused::WinogradDataParams<float, float>)", "conv", "winogradForwardData4x4"),
    ("kernel", "_ZN19cutlass_cudnn_train6KernelINS_4conv6kernel23ImplicitGemmConvolutionINS1_11threadblock22ImplicitGemmMultistageINS_4gemm9GemmShapeILi128ELi128ELi32EEE", "conv", "ImplicitGemmConvolution"),
    ("kernel", "void wgrad_alg0_engine<float, 128, 5, 5, 3, 3, 3, false, 512>(int, int, int, float const*, int, float*, float const*, kernel_grad_params, unsigned long long, int, float, int, int, int, int)", "conv", "wgrad_alg0_engine"),
    ("kernel", "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 128, true, 1, true>(cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, float const*, float, float, float*, float*, float*, float*, float, float)", "norm", "bn_fw_tr_1C11_kernel_NCHW"),
    ("kernel", "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>(int, float, float const*, float const*, float const*, float*, float*, float*)", "norm", "vectorized_layer_norm_kernel"),
    ("kernel", "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<float, float>(long, long, float const*, float const*, float const*, float const*, float*, float*)", "norm", "GammaBetaBackwardCUDAKernel"),
    ("kernel", "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)", "elementwise", "vectorized_elementwise_kernel"),
    ("kernel", "void at::native::unrolled_elementwise_kernel<at::native::FillFunctor<float>, at::detail::Array<char*, 1>, TrivialOffsetCalculator<0, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>, TrivialOffsetCalculator<0, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)", "elementwise", "unrolled_elementwise_kernel"),
    ("kernel", "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 1, 128, 1>(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)", "elementwise", "CatArrayBatchedCopy"),
    ("mtia_ccp_events", "aten::mul.out-dtype_Float", "elementwise", "mul.out"),
    ("kernel", "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)", "reduction", "reduce_kernel"),
    ("kernel", "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>(float*, float const*, int, int, int, bool const*, int, bool)", "reduction", "softmax_warp_forward"),
    ("mtia_ccp_events", "reduce_sum-dtype_Float", "reduction", "reduce_sum"),
    ("kernel", "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "communication", "ncclKernel_AllReduce_RING_LL_Sum_float"),
    ("kernel", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)", "communication", "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"),
    ("kernel", "triton_poi_fused_add_cos_sin_0", "triton", "triton_poi_fused_add_cos_sin_0"),
    ("kernel", "triton__0d1d2d3d", "triton", "triton__0d1d2d3d"),
    ("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", "memcpy_HtoD", "Memcpy HtoD"),
    ("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", "memcpy_DtoH", "Memcpy DtoH"),
    ("gpu_memcpy", "Memcpy DtoD (Device -> Device)", "memcpy_DtoD", "Memcpy DtoD"),
    ("gpu_memset", "Memset (Device)", "memset", "Memset"),
    ("kernel", "at::cuda::(anonymous namespace)::spin_kernel(long)", "other", "spin_kernel"),
    ("kernel", "void cub::DeviceRadixSortOnesweepKernel<cub::DeviceRadixSortPolicy<long, int, int>::Policy800, false, long, int, int, int>(int*, int*, int*, int const*, long*, long const*, int*, int const*, int, int, int)", "other", "DeviceRadixSortOnesweepKernel"),
]  # fmt: skip

# names not in the shared traces: ROCm/MIOpen, attention, PtoP, legacy cats, made up but realistic
SYNTHETIC: list[tuple[str, str, str]] = [
    ("kernel", "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 32, 4, false, false, cutlass::half_t> >(Flash_fwd_params)", "attention"),
    ("kernel", "fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)", "attention"),
    ("kernel", "naive_conv_fwd_nchw_float_double_float", "conv"),
    ("kernel", "MIOpenBatchNormFwdTrainSpatial", "norm"),
    ("kernel", "Custom_Cijk_Alik_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB1", "gemm"),
    ("kernel", "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
    ("kernel", "rcclGenericKernel<1, false>(ncclDevComm*, unsigned long, ncclWork*)", "communication"),
    ("kernel", "triton_red_fused__softmax_0", "triton"),
    ("kernel", "triton_per_fused_native_layer_norm_1", "triton"),
    ("gpu_memcpy", "Memcpy PtoP (Device -> Device)", "memcpy_PtoP"),
    ("Memcpy", "Memcpy HtoD (Pageable -> Device)", "memcpy_HtoD"),
    ("Memset", "Memset (Device)", "memset"),
    ("kernel", "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", "gemm"),
    ("kernel", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", "gemm"),
]  # fmt: skip

GEMM_LOOKING = re.compile(r"gemm|gemv|matmul|cutlass|cublas|Cijk_", re.IGNORECASE)


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    return connect_tables({})


def _classify(
    con: duckdb.DuckDBPyConnection, rows: list[tuple[str, str]]
) -> list[tuple[str, str, str, str, str | None]]:
    t = pa.table({"cat": [c for c, _ in rows], "name": [n for _, n in rows]})
    con.register("names_in", t)
    try:
        return [
            tuple(r)  # type: ignore[misc]
            for r in con.execute(
                "SELECT cat, name, tw_category(name, cat), tw_short_name(name), "
                "tw_op_kind(cat, name) FROM names_in"
            ).fetchall()
        ]
    finally:
        con.unregister("names_in")


@pytest.mark.parametrize(("cat", "name", "category", "short"), HAND_CHECKED)
def test_hand_checked_real_names(
    con: duckdb.DuckDBPyConnection, cat: str, name: str, category: str, short: str
) -> None:
    got_cat, got_short = con.execute(
        "SELECT tw_category(?, ?), tw_short_name(?)", [name, cat, name]
    ).fetchall()[0]
    assert (got_cat, got_short) == (category, short)


@pytest.mark.parametrize(("cat", "name", "category"), SYNTHETIC)
def test_rocm_attention_and_legacy_names(
    con: duckdb.DuckDBPyConnection, cat: str, name: str, category: str
) -> None:
    row = con.execute("SELECT tw_category(?, ?), tw_short_name(?)", [name, cat, name]).fetchall()[0]
    assert row[0] == category
    assert row[1] and "<" not in row[1] and "(" not in row[1]


def test_issue_example_and_nulls(con: duckdb.DuckDBPyConnection) -> None:
    name = "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&)::{lambda()#1}>(int)"
    assert con.execute("SELECT tw_short_name(?)", [name]).fetchall()[0] == (
        "vectorized_elementwise_kernel",
    )
    assert con.execute("SELECT tw_short_name(NULL), tw_memcpy_kind(NULL)").fetchall()[0] == (
        None,
        None,
    )


@pytest.mark.parametrize(
    ("cat", "name", "op_kind", "memcpy_kind"),
    [
        ("kernel", "volta_sgemm_128x32_nn", "kernel", None),
        ("Kernel", "volta_sgemm_128x32_nn", "kernel", None),
        ("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", "memcpy", "DtoH"),
        ("Memcpy", "Memcpy HtoD (Pinned -> Device)", "memcpy", "HtoD"),
        ("gpu_memcpy", "Memcpy PtoP (Device -> Device)", "memcpy", "PtoP"),
        ("gpu_memset", "Memset (Device)", "memset", None),
        ("Memset", "Memset (Unknown)", "memset", None),
        ("mtia_ccp_events", "aten::mul.out-dtype_Float", "kernel", None),
        ("mtia_ccp_events", "dma_request", "memcpy", None),
        ("mtia_ccp_events", "event_wait", "other", None),
    ],
)
def test_op_kind_and_memcpy_kind(
    con: duckdb.DuckDBPyConnection, cat: str, name: str, op_kind: str, memcpy_kind: str | None
) -> None:
    assert con.execute("SELECT tw_op_kind(?, ?), tw_memcpy_kind(?)", [cat, name, name]).fetchall()[
        0
    ] == (
        op_kind,
        memcpy_kind,
    )


def _real_gpu_names(folder: Path) -> set[tuple[str, str]]:
    names: set[tuple[str, str]] = set()
    for path in sorted(folder.glob("*.json*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            doc = json.load(f)
        if not isinstance(doc, dict):
            continue
        for e in doc.get("traceEvents", []):
            if e.get("ph") == "X" and e.get("cat") in GPU_OP_CATEGORIES and e.get("name"):
                names.add((e["cat"], e["name"]))
    return names


@pytest.fixture(scope="module")
def real_names(shared_traces: Path) -> set[tuple[str, str]]:
    return _real_gpu_names(shared_traces)


def test_every_real_name_gets_a_clean_short_name_and_a_known_category(
    con: duckdb.DuckDBPyConnection, real_names: set[tuple[str, str]]
) -> None:
    rows = _classify(con, sorted(real_names))
    assert len(rows) > 400
    for cat, name, category, short, op_kind in rows:
        assert category in CATEGORIES, name
        assert short, name
        assert "<" not in short and "(" not in short and ">" not in short, (name, short)
        assert not short.startswith("void "), short
        assert op_kind in {"kernel", "memcpy", "memset", "other"}
        if cat in ("kernel", "Kernel"):
            assert op_kind == "kernel"
        if cat in ("gpu_memcpy", "Memcpy"):
            assert category.startswith("memcpy_"), name


def test_no_gemm_looking_real_name_is_other(
    con: duckdb.DuckDBPyConnection, real_names: set[tuple[str, str]]
) -> None:
    rows = _classify(con, sorted(real_names))
    gemm_like = [r for r in rows if GEMM_LOOKING.search(r[1]) and "fbgemm" not in r[1]]
    assert len(gemm_like) > 50
    for _cat, name, category, _short, _kind in gemm_like:
        assert category != "other", name
        assert category in {"gemm", "conv", "elementwise", "reduction", "norm"}, name
    assert sum(1 for r in gemm_like if r[2] == "gemm") > 50


def test_real_names_cover_the_main_categories(
    con: duckdb.DuckDBPyConnection, real_names: set[tuple[str, str]]
) -> None:
    found = {r[2] for r in _classify(con, sorted(real_names))}
    assert {"gemm", "conv", "norm", "elementwise", "reduction", "communication", "triton",
            "memcpy_HtoD", "memcpy_DtoH", "memcpy_DtoD", "memset"} <= found  # fmt: skip
