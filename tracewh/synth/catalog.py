"""What a synthetic denoising step is made of: ops, runtime calls, kernels, per flavor.

The model is a DiT-like diffusion transformer run with tensor parallelism: each
step is a host-bound scheduler prologue (tiny kernels, an input copy, a memset),
``layers`` transformer blocks (layer norm, GEMMs, flash attention, cross attention
with softmax, GELU, residual adds, two NCCL all-reduces), and an epilogue with a
reduction, a CUDA-graph replay (one correlation, several kernels), a device copy
and a blocking device-to-host copy that ends the step.

:mod:`tracewh.synth.flavors` holds the parts (:class:`Gpu`, :class:`Call`, :class:`Op`) and the
two flavors (:data:`CUDA`, :data:`ROCM`); their names are importable from here too.
"""

from __future__ import annotations

from tracewh.synth.flavors import (
    ADD,
    BMM,
    COPY,
    CUDA,
    FILL,
    GELU,
    LAYER_NORM,
    MAX_FRACTION,
    MUL,
    PLAUSIBLE_FRACTION,
    REDUCE,
    ROCM,
    SOFTMAX,
    Call,
    FlavorSpec,
    Gpu,
    Op,
    Role,
    floor_us,
)

__all__ = [
    "ADD", "BMM", "COMPILED_REGION", "COPY", "CUDA", "FILL", "GELU", "GRAPH_CAPTURE_OPS", "LAYER_NORM",
    "MAX_FRACTION", "MUL", "PLAUSIBLE_FRACTION", "REDUCE", "ROCM", "SOFTMAX", "Call", "FlavorSpec",
    "Gpu", "Op", "Role", "T", "capture_program", "floor_us", "step_program",
]

T = "[8, 1024, 1152]"
_E = 8 * 1024 * 1152  # elements of T
_SM = 8 * 16 * 1024 * 77  # elements of the cross-attention scores


def _k(name: str, us: float, grid: int, block: int = 128, regs: int = 32, smem: int = 0, *,
       flops: float = 0.0, work_bytes: float = 0.0, roof: str = "vector") -> Gpu:
    return Gpu("kernel", name, "compute", us, (grid, 1, 1), (block, 1, 1), regs, smem,
               flops=flops, work_bytes=work_bytes, roof=roof)


def _launch(f: FlavorSpec, *gpu: Gpu, gemm: bool = False) -> Call:
    return Call(f.gemm_launch if gemm else f.launch, 7.5 if gemm else 5.5, gpu)


def _linear(f: FlavorSpec, n_in: int, n_out: int, us: float, tile: int, mod: str) -> Op:
    dims = f"[[8, 1024, {n_in}], [{n_out}, {n_in}], [{n_out}]]"
    m = 8192  # addmm(bias [n_out], x [m, n_in], w^T [n_in, n_out]) in fp32
    gemm = Gpu("kernel", f.gemm[tile], "compute", us, (n_out // 128, 64, 1), (256, 1, 1), 230, 73728,
               flops=2.0 * m * n_in * n_out + m * n_out,
               work_bytes=4.0 * (n_out + m * n_in + n_in * n_out + m * n_out), roof="fp32")
    addmm = Op(
        "aten::addmm",
        14.0,
        (_launch(f, gemm, gemm=True),),
        dims=f"[[{n_out}], [8192, {n_in}], [{n_in}, {n_out}], [], []]",
        types='["float", "float", "float", "Scalar", "Scalar"]',
        alloc=8192 * n_out * 4,
    )
    return Op("aten::linear", 9.0, (Op("aten::t", 4.0), addmm), dims=dims,
              types='["float", "float", "float"]', module=mod)


def _ew(f: FlavorSpec, name: str, kernel: str, us: float, n: int = 2, *, small: bool = False) -> Op:
    shape = "[8, 4, 128, 128]" if small else T
    dims = ", ".join([shape] * n)
    types = ", ".join(['"float"'] * n)
    grid = 512 if small else 9216
    nbytes = 8 * 4 * 128 * 128 * 4 if small else 8192 * 1152 * 4
    work = _k(kernel, us, grid, 128, 16, flops=nbytes / 4, work_bytes=(n + 1) * nbytes)
    return Op(name, 11.0, (_launch(f, work),), dims=f"[{dims}]",
              types=f"[{types}]", alloc=nbytes)


def _layer_norm(f: FlavorSpec) -> Op:
    # E*(6 + weight + bias) FLOPs; input, output, weight, bias and the fp32 mean/rstd
    kernel = _k(LAYER_NORM, 45.0, 8192, 256, 30, flops=8.0 * _E,
                work_bytes=4.0 * (2 * _E + 2 * 1152 + 2 * 8192))
    inner = Op("aten::native_layer_norm", 12.0, (_launch(f, kernel),),
               dims=f"[{T}, [], [1152], [1152], []]", types='["float", "ScalarList", "float", "float", "Scalar"]',
               alloc=8192 * 1152 * 4)
    return Op("aten::layer_norm", 6.0, (inner,), dims=f"[{T}, [], [1152], [1152], [], []]",
              types='["float", "ScalarList", "float", "float", "Scalar", "Scalar"]', module="LayerNorm")


def _allreduce(f: FlavorSpec, us: float) -> Op:
    nccl = Gpu("kernel", f.nccl, "comm", us, (16, 1, 1), (640, 1, 1), 96, 87568)
    rpc = Op("record_param_comms", 18.0, (Call(f.comm_launch, 9.0, (nccl,)),), dims=f"[{T}]", types='["float"]')
    return Op("c10d::allreduce_", 8.0, (rpc,), dims=f"[{T}]", types='["float"]')


def _block(f: FlavorSpec) -> Op:
    # 4*B*H*S_q*S_kv*D FLOPs; Q, K, V, O read or written once (bf16)
    flash = Gpu("kernel", f.flash, "compute", 700.0, (8, 128, 16), (128, 1, 1), 255, 49152,
                flops=4.0 * 8 * 16 * 1024 * 1024 * 72, work_bytes=4.0 * 8 * 1024 * 16 * 72 * 2, roof="bf16")
    q_bhsd, q_bshd, bf16 = "[8, 16, 1024, 72]", "[8, 1024, 16, 72]", '"c10::BFloat16"'
    attn = Op(
        "aten::scaled_dot_product_attention", 10.0,
        (Op("aten::_scaled_dot_product_flash_attention", 8.0,
            (Op("aten::_flash_attention_forward", 12.0, (_launch(f, flash),),
                dims=f"[{q_bshd}, {q_bshd}, {q_bshd}" + ", []" * 12 + "]",
                types=f"[{bf16}, {bf16}, {bf16}, " + ", ".join(['""'] * 2 + ['"Scalar"'] * 6 + ['""'] * 4) + "]",
                concrete='["", "", "", "", "", "1024", "1024", "0.", "False", "False", "", "", "", "", ""]'),),
            dims=f"[{q_bhsd}, {q_bhsd}, {q_bhsd}, [], [], [], []]",
            types=f"[{bf16}, {bf16}, {bf16}, \"Scalar\", \"Scalar\", \"Scalar\", \"\"]",
            concrete='["", "", "", "0.", "False", "False", ""]'),),
        dims=f"[{q_bhsd}, {q_bhsd}, {q_bhsd}, [], [], [], [], []]",
        types=f"[{bf16}, {bf16}, {bf16}, \"\", \"Scalar\", \"Scalar\", \"\", \"Scalar\"]",
        concrete='["", "", "", "", "0.", "False", "", "False"]', module="Attention")
    bmm = Gpu("kernel", BMM if not f.rocm else f.gemm[2], "compute", 40.0, (64, 8, 16), (128, 1, 1), 122, 16384,
              flops=2.0 * 128 * 1024 * 77 * 72, work_bytes=4.0 * 128 * (1024 * 72 + 72 * 77 + 1024 * 77),
              roof="fp32")
    cross: list[Op | Call] = []
    for name in ("aten::matmul", "aten::softmax", "aten::matmul"):
        if name == "aten::softmax":
            cross.append(Op(name, 7.0, (Op("aten::_softmax", 10.0, (_launch(f, _k(SOFTMAX, 35.0, 4096, flops=5.0 * _SM,
                                                                                      work_bytes=8.0 * _SM)),),
                                           dims="[[8, 16, 1024, 77], [], []]", types='["float", "Scalar", "Scalar"]'),),
                            dims="[[8, 16, 1024, 77], [], []]", types='["float", "Scalar", "ScalarType"]'))
        else:
            cross.append(Op(name, 8.0, (Op("aten::bmm", 12.0, (_launch(f, bmm, gemm=True),),
                                           dims="[[128, 1024, 72], [128, 72, 77]]", types='["float", "float"]'),),
                            dims="[[8, 16, 1024, 72], [8, 16, 72, 77]]", types='["float", "float"]'))
    body: tuple[Op | Call, ...] = (
        _layer_norm(f),
        _linear(f, 1152, 3456, 420.0, 0, "Linear"),
        attn,
        Op("aten::_unsafe_view", 3.0),
        *cross,
        _linear(f, 1152, 1152, 150.0, 1, "Linear"),
        _allreduce(f, 300.0),
        _ew(f, "aten::add", ADD, 60.0),
        _layer_norm(f),
        _linear(f, 1152, 4608, 560.0, 0, "Linear"),
        _ew(f, "aten::gelu", GELU, 90.0, 1),
        _linear(f, 4608, 1152, 560.0, 1, "Linear"),
        _allreduce(f, 300.0),
        _ew(f, "aten::add", ADD, 60.0),
    )
    return Op("DiTBlock", 0.0, body, cat="python", module="DiTBlock")


def _graph_kernels(f: FlavorSpec) -> tuple[Gpu, ...]:
    """The kernels of the step's CUDA/HIP graph, in the order its capture launched them."""
    return (
        _k(LAYER_NORM, 30.0, 8192, 256, 30),
        Gpu("kernel", f.gemm[1], "compute", 120.0, (32, 64, 1), (256, 1, 1), 230, 73728),
        _k(MUL, 8.0, 9216, 128, 16),
        _k(ADD, 9.0, 9216, 128, 16),
    )


#: What recorded each graph kernel during the capture: (module, operator), in launch order.
GRAPH_CAPTURE_OPS: tuple[tuple[str, str], ...] = (
    ("LayerNorm", "aten::native_layer_norm"),
    ("Linear", "aten::addmm"),
    ("Modulate", "aten::mul"),
    ("Modulate", "aten::add"),
)


def capture_program(f: FlavorSpec) -> tuple[Op, ...]:
    """The one-time capture of the step's graph (``torch.cuda.graph``), before the loop.

    ``cudaStreamBeginCapture``, then each graph kernel's launch (captured: no GPU work) inside
    its operator and module (:data:`GRAPH_CAPTURE_OPS`, all inside a ``GraphBlock`` module),
    ``cudaStreamEndCapture`` and ``cudaGraphInstantiate``, in a ``CUDAGraph.capture``
    annotation.
    """
    pre = "hip" if f.rocm else "cuda"
    body: list[Op | Call] = []
    for (module, op), kernel in zip(GRAPH_CAPTURE_OPS, _graph_kernels(f), strict=True):
        launch = Call(f.gemm_launch if op == "aten::addmm" else f.launch, 6.0, (kernel,),
                      captured=True)
        body.append(Op(op, 10.0, (launch,), dims=f"[{T}]", types='["float"]', module=module))
    calls: tuple[Op | Call, ...] = (
        Call(f"{pre}StreamBeginCapture", 3.0),
        Op("GraphBlock", 0.0, tuple(body), cat="python", module="GraphBlock"),
        Call(f"{pre}StreamEndCapture", 6.0),
        Call(f"{pre}GraphInstantiate", 400.0),
    )
    return (Op("CUDAGraph.capture", 20.0, calls, cat="user_annotation"),)


#: The cpu_op torch.compile wraps a compiled graph's call in (frame 0, recompile 0).
COMPILED_REGION = "Torch-Compiled Region: 0/0"


def step_program(
    f: FlavorSpec, layers: int, *, leak_bytes: int = 0, compiled: bool = False
) -> tuple[Op, ...]:
    """The ops of one denoising step, in launch order (the step span wraps them).

    With ``leak_bytes``, the epilogue ends with an ``aten::clone`` whose output (that
    many bytes) is kept forever, as a list of per-step tensors would be: a leak. With
    ``compiled``, the transformer's blocks run inside a :data:`COMPILED_REGION` cpu_op
    (``torch.compile``), once per step, inside the ``DiT`` module call.
    """
    small = [
        _ew(f, "aten::mul", MUL, 2.4, 1, small=True),
        _ew(f, "aten::add", ADD, 2.6, small=True),
        _ew(f, "aten::mul", MUL, 2.3, 1, small=True),
    ]
    latents = 8 * 4 * 128 * 128 * 4
    htod = Gpu("gpu_memcpy", f.htod, "compute", 95.0, nbytes=latents)
    prefetch = Gpu("gpu_memcpy", f.htod.replace("Pageable", "Pinned"), "copy", 40.0, nbytes=latents)
    memset = Gpu("gpu_memset", "Memset (Device)", "compute", 6.0, nbytes=8192 * 1152 * 4,
                 work_bytes=8192 * 1152 * 4)
    prologue: list[Op] = [
        Op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 900.0, cat="user_annotation"),
        Op("aten::to", 6.0, (Op("aten::_to_copy", 9.0, (Op("aten::copy_", 12.0, (Call(f.memcpy, 22.0, (htod,)),),
                                                          dims="[[8, 4, 128, 128], [8, 4, 128, 128], []]",
                                                          types='["float", "float", "Scalar"]'),),
                                 dims="[[8, 4, 128, 128], [], [], [], [], [], []]",
                                 types='["float", "Scalar", "", "", "", "Scalar", ""]'),),
           dims="[[8, 4, 128, 128], [], [], [], [], [], [], []]",
           types='["float", "", "", "", "", "Scalar", "Scalar", ""]', alloc=latents),
        Op("aten::copy_", 10.0, (Call(f.memcpy, 8.0, (prefetch,)),), dims="[[8, 4, 128, 128], [8, 4, 128, 128], []]",
           types='["float", "float", "Scalar"]'),
        Op("aten::zeros", 7.0, (Op("aten::zero_", 6.0, (Call(f.memset, 6.0, (memset,)),), dims=f"[{T}]",
                                   types='["float"]'),), dims="[[], [], [], [], []]", types='["ScalarList", "Scalar", "", "", ""]'),
        *[Op(o.name, 180.0, o.body, dims=o.dims, types=o.types, concrete=o.concrete, alloc=o.alloc)
          for o in small],
    ]
    # the transformer: one nn.Module (DiT) around its blocks (spans only with --python)
    body: tuple[Op | Call, ...] = tuple(_block(f) for _ in range(layers))
    if compiled:
        body = (Op(COMPILED_REGION, 25.0, body),)
    blocks = [Op("DiT", 0.0, body, cat="python", module="DiT")]
    graph_kernels = _graph_kernels(f)
    dtod = Gpu("gpu_memcpy", "Memcpy DtoD (Device -> Device)", "compute", 14.0, nbytes=latents,
               work_bytes=2 * latents)
    dtoh = Gpu("gpu_memcpy", f.dtoh, "compute", 3.0, nbytes=4)
    epilogue: list[Op] = [
        Op("aten::mean", 14.0, (_launch(f, _k(REDUCE, 18.0, 216, 512, 40, flops=_E, work_bytes=4.0 * (_E + 8 * 1152))),), dims=f"[{T}, [], [], []]",
           types='["float", "ScalarList", "Scalar", ""]', alloc=512),
        Op("CUDAGraph.replay", 12.0, (Call(f.graph, 16.0, graph_kernels),), cat="user_annotation"),
        Op("aten::copy_", 9.0, (Call(f.memcpy, 7.0, (dtod,)),), dims="[[8, 4, 128, 128], [8, 4, 128, 128], []]",
           types='["float", "float", "Scalar"]'),
        Op("aten::item", 5.0, (Op("aten::_local_scalar_dense", 9.0,
                                  (Call(f.memcpy, 7.0, (dtoh,)), Call(f.sync, 4.0, sync=True)),
                                  dims="[[]]", types='["float"]'),), dims="[[]]", types='["float"]'),
    ]
    if leak_bytes:
        epilogue.append(Op("aten::clone", 8.0, dims="[[8, 4, 128, 128], []]", types='["float", ""]',
                           alloc=leak_bytes, leak=True))
    return (*prologue, *blocks, *epilogue)
