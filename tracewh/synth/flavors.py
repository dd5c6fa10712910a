"""The parts a synthetic step is made of, and the two GPU stacks it is written for.

:class:`Gpu` (a kernel, memcpy or memset), :class:`Call` (a runtime call launching them),
:class:`Op` (a CPU operator making calls); :class:`FlavorSpec` names one vendor's runtime
calls, streams, kernels and device facts (:data:`CUDA`: an A100, :data:`ROCM`: an MI250X);
:func:`floor_us` is the shortest physically plausible duration of a kernel's work on it.
:mod:`tracewh.synth.catalog` assembles a step's program from these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Role = Literal["compute", "comm", "copy"]


@dataclass(frozen=True)
class Gpu:
    """One GPU activity: a kernel, memcpy or memset (durations in µs before noise)."""

    cat: str
    name: str
    role: Role
    dur_us: float
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (128, 1, 1)
    regs: int = 32
    smem: int = 0
    nbytes: int = 0
    #: the work of one call as the roofline models it (FLOPs, bytes each tensor read or
    #: written once) and the roof it is compared with: with the device's peaks they give the
    #: shortest physically plausible duration (:func:`floor_us`); 0: no floor
    flops: float = 0.0
    work_bytes: float = 0.0
    roof: str = "vector"


@dataclass(frozen=True)
class Call:
    """A runtime call (``cudaLaunchKernel``...) and the GPU activities it enqueues."""

    name: str
    cpu_us: float
    gpu: tuple[Gpu, ...] = ()
    sync: bool = False
    captured: bool = False  # recorded into a CUDA/HIP graph: no GPU activity now


@dataclass(frozen=True)
class Op:
    """A CPU-side span (``cpu_op`` or ``user_annotation``) with nested ops and calls."""

    name: str
    cpu_us: float
    body: tuple[Op | Call, ...] = ()
    cat: str = "cpu_op"
    dims: str = "[]"
    types: str = "[]"
    concrete: str | None = None  # "Concrete Inputs" (JSON text), where the op records them
    module: str | None = None
    alloc: int = 0
    leak: bool = False  # its allocation is never freed (a new address every step)


@dataclass(frozen=True)
class FlavorSpec:
    """Names and device facts of one GPU vendor's stack."""

    launch: str
    gemm_launch: str
    comm_launch: str
    memcpy: str
    memset: str
    graph: str
    sync: str
    compute_stream: int
    comm_stream: int
    copy_stream: int
    device_name: str
    device_mem: int
    num_sms: int
    warp_size: int
    compute_major: int
    compute_minor: int
    speed: float
    gemm: tuple[str, str, str]
    flash: str
    htod: str
    dtoh: str
    nccl: str
    rocm: bool
    #: the device's compute peaks in TFLOP/s by roof label (as ``sql/77_device_peaks.sql``
    #: has them for ``device_name``) and its HBM bandwidth in TB/s
    peaks_tflops: tuple[tuple[str, float], ...] = ()
    hbm_tbs: float = 0.0


#: the highest fraction of a peak a synthetic kernel reaches before noise and regressions
#: (real tuned GEMMs and attention reach 60-80 %, streaming kernels 80-90 % of HBM)
PLAUSIBLE_FRACTION = 0.7
#: the hard ceiling after noise and regressions: no synthetic figure goes above it
MAX_FRACTION = 0.9

_TF32_KERNEL = re.compile(r"tf32|xf32|tensorop_s[0-9]", re.IGNORECASE)


def floor_us(g: Gpu, f: FlavorSpec, *, fraction: float = PLAUSIBLE_FRACTION) -> float:
    """The shortest duration (µs) in which ``g``'s work runs at ``fraction`` of the peaks.

    The roof is the kernel's ``roof`` (an FP32 matrix kernel whose name says TF32 uses the
    tf32 roof, as ``tw_tf32_kernel`` of ``sql/78_roofline.sql`` does); 0 without work or
    peaks. TFLOP/s x 1e6 is FLOP per µs; TB/s x 1e6 bytes per µs.
    """
    peaks = dict(f.peaks_tflops)
    roof = "tf32" if g.roof == "fp32" and _TF32_KERNEL.search(g.name) and "tf32" in peaks else g.roof
    t_compute = g.flops / (fraction * peaks[roof] * 1e6) if g.flops and peaks.get(roof) else 0.0
    t_memory = g.work_bytes / (fraction * f.hbm_tbs * 1e6) if g.work_bytes and f.hbm_tbs else 0.0
    return max(t_compute, t_memory)


_AT = "at::native::"
_ARR = "at::detail::Array<char*, {n}>"


def _vec(functor: str, n: int) -> str:
    arr = _ARR.format(n=n)
    return f"void {_AT}vectorized_elementwise_kernel<4, {functor}, {arr} >(int, {functor}, {arr})"


_GELU_F = (
    f"{_AT}GeluCUDAKernelImpl(at::TensorIteratorBase&, {_AT}GeluType)::{{lambda()#2}}::operator()() const"
    "::{lambda()#2}::operator()() const::{lambda(float)#1}"
)
GELU = _vec(_GELU_F, 2)
ADD = _vec(f"{_AT}CUDAFunctor_add<float>", 3)
MUL = _vec(
    f"{_AT}AUnaryFunctor<float, float, float, {_AT}binary_internal::MulFunctor<float> >", 2
)
FILL = _vec(f"{_AT}FillFunctor<float>", 1)
LAYER_NORM = (
    f"void {_AT}(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"
    "(int, float, float const*, float const*, float const*, float*, float*, float*)"
)
SOFTMAX = (
    "void (anonymous namespace)::softmax_warp_forward<float, float, float, 8, false, false>"
    "(float*, float const*, int, int, int, bool const*, int, bool)"
)
_MEAN_OP = f"{_AT}ReduceOp<float, {_AT}MeanOps<float, float, float, float>, unsigned int, float, 4>"
REDUCE = f"void {_AT}reduce_kernel<512, 1, {_MEAN_OP} >({_MEAN_OP})"
_COPY_F = (
    f"{_AT}direct_copy_kernel_cuda(at::TensorIteratorBase&)::{{lambda()#3}}::operator()() const"
    "::{lambda()#7}::operator()() const::{lambda(float)#1}"
)
COPY = _vec(_COPY_F, 2)
BMM = "ampere_sgemm_128x64_tn"


def _cutlass(tile: str) -> str:
    k = f"cutlass_80_tensorop_s1688gemm_{tile}_tn_align4"
    return f"void cutlass::Kernel2<{k}>({k}::Params)"


def _tensile(tile: str) -> str:
    return (
        f"Cijk_Alik_Bljk_SB_MT{tile}_MI32x32x2x1_SN_1LDSB0_APM1_AF0EM8_AF1EM1_AMAS3_ASE_ASGT_ASLT"
        "_ASAE01_ASCE01_ASEM8_BL1_BS1_DTL0_DTVA0_EPS1_FL0_GRVW4_GSU1_GSUASB_GLS0_ISA90a_IU1_K1"
        "_KLA_LBSPP128_LPA0_LPB8_LDL1_LRVW4_LWPMn1_MIAV0_MDA2_NTA0_NTB0_NTC0_NTD0_NEPBS0_NLCA1"
        "_NLCB1_ONLL1_PGR1_PLR1_SIA1_SS1_SU32_SUM0_SUS256_SVW4_TT4_64_TLDS1_USFGROn1_VW4_WS64_WG32_8_1"
    )


CUDA = FlavorSpec(
    launch="cudaLaunchKernel",
    gemm_launch="cudaLaunchKernel",
    comm_launch="cudaLaunchKernelExC",
    memcpy="cudaMemcpyAsync",
    memset="cudaMemsetAsync",
    graph="cudaGraphLaunch",
    sync="cudaStreamSynchronize",
    compute_stream=7,
    comm_stream=40,
    copy_stream=25,
    device_name="NVIDIA A100-SXM4-80GB",
    device_mem=85097971712,
    num_sms=108,
    warp_size=32,
    compute_major=8,
    compute_minor=0,
    speed=1.0,
    gemm=(_cutlass("256x128_16x3"), _cutlass("128x128_16x5"), "ampere_sgemm_128x64_tn"),
    flash=(
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4,"
        " false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4,"
        " cutlass::bfloat16_t> >, false, false, false, false, true, true, false, false>"
        "(pytorch_flash::Flash_fwd_params)"
    ),
    htod="Memcpy HtoD (Pageable -> Device)",
    dtoh="Memcpy DtoH (Device -> Pinned)",
    nccl="ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    rocm=False,
    # A100 SXM4 80GB (NVIDIA datasheet, as in sql/77_device_peaks.sql)
    peaks_tflops=(("vector", 19.5), ("fp32", 19.5), ("tf32", 156.0), ("fp16", 312.0), ("bf16", 312.0)),
    hbm_tbs=2.039,
)

ROCM = FlavorSpec(
    launch="hipLaunchKernel",
    gemm_launch="hipExtModuleLaunchKernel",
    comm_launch="hipExtLaunchKernel",
    memcpy="hipMemcpyAsync",
    memset="hipMemsetAsync",
    graph="hipGraphLaunch",
    sync="hipStreamSynchronize",
    compute_stream=0,
    comm_stream=3,
    copy_stream=1,
    device_name="AMD Instinct MI250X",
    device_mem=68702699520,
    num_sms=110,
    warp_size=64,
    compute_major=9,
    compute_minor=0,
    speed=1.3,
    gemm=(_tensile("128x128x16"), _tensile("256x128x16"), _tensile("64x64x16")),
    flash=(
        "void ck_tile::kentry<256, 1, ck_tile::FmhaFwdKernel<ck_tile::BlockFmhaPipelineQRKSVSAsync"
        "<ck_tile::BlockFmhaPipelineProblem<ck_tile::bf16_t, ck_tile::bf16_t, ck_tile::bf16_t, float,"
        " float, ck_tile::bf16_t, unsigned short, float, ck_tile::bf16_t, ck_tile::bf16_t> >,"
        " ck_tile::Default2DEpilogue<ck_tile::Default2DEpilogueProblem<float, ck_tile::bf16_t,"
        " false, false, true> > > >(ck_tile::FmhaFwdKernel::Kargs)"
    ),
    htod="Memcpy HtoD (Host -> Device)",
    dtoh="Memcpy DtoH (Device -> Host)",
    nccl="ncclDevKernel_Generic_4(ncclDevKernelArgsStorage<4096ul>)",
    rocm=True,
    # MI250X, one GCD (AMD data sheet, as in sql/77_device_peaks.sql): no TF32
    peaks_tflops=(("vector", 23.95), ("fp32", 47.85), ("fp16", 191.5), ("bf16", 191.5)),
    hbm_tbs=1.6384,
)
