"""Simulate one denoising step and pre-render it as a text template.

The simulation walks the step program on one CPU thread, launching GPU work onto
per-role streams: a GPU activity starts after its runtime call starts plus a
launch latency and after the previous activity on its stream ends (so kernels on
a stream never overlap and the GPU can lag behind the CPU); NCCL kernels wait for
the compute stream and the compute stream waits for them; the step ends with a
blocking device-to-host copy. The result is rendered once into a ``%``-format
string whose integer slots (timestamps in whole µs, External ids, correlations,
step number, Python ids) are shifted per repeated step with one C-level ``%``.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import add

from tracewh.synth.flavors import MAX_FRACTION, Call, FlavorSpec, Gpu, Op, floor_us

TIME, EXT, CORR, STEP, PYID, MEM, ADDR = range(7)
"""Slot kinds: what a slot's value is shifted by when a step is repeated (MEM: the bytes
leaked by the earlier steps; ADDR: the step's own address range of leaked blocks)."""

LEAK_BASE_ADDR = 0x7E0000000000
"""Address of the first step's leaked block; step k's is ``LEAK_BASE_ADDR + k * LEAK_ADDR_STRIDE``."""
LEAK_ADDR_STRIDE = 0x1000000000
"""Address distance between the leaked blocks of consecutive steps (64 GiB)."""


@dataclass(frozen=True)
class Scales:
    """Duration multipliers of one trace (night noise, regressions, straggler)."""

    kernel: Callable[[str], float]
    compute_slowdown: float = 0.0
    comm_wait: float = 0.0


@dataclass(frozen=True)
class StepTemplate:
    """One pre-rendered step: ``fmt % values`` is its events' text (each ending in ``,``)."""

    fmt: str
    base: tuple[int, ...]
    kinds: tuple[int, ...]
    span_us: int
    ids: tuple[int, int, int]
    counts: Mapping[str, int]
    size: int
    leak: int = 0

    def render(self, t_us: int, ext: int, corr: int, step: int, pyid: int) -> str:
        """The step's text with its timeline starting at ``t_us`` and ids after the given ones.

        ``step`` is also the number of earlier steps: their leaked bytes (``leak`` each)
        raise the step's Total Allocated and Total Reserved.
        """
        offs = (t_us, ext, corr, step, pyid, step * self.leak, step * LEAK_ADDR_STRIDE)
        return self.fmt % tuple(map(add, self.base, map(offs.__getitem__, self.kinds)))


class Text:
    """Accumulates one event's template text and its integer slots."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.base: list[int] = []
        self.kinds: list[int] = []

    def lit(self, text: str) -> None:
        self.parts.append(text.replace("%", "%%"))

    def slot(self, value: int, kind: int) -> None:
        self.parts.append("%d")
        self.base.append(value)
        self.kinds.append(kind)

    def ts(self, ns: int) -> None:
        self.slot(ns // 1000, TIME)
        self.parts.append(f".{ns % 1000:03d}")


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


Emit = Callable[[Text], None]


@dataclass
class Sim:
    """Mutable state of one step simulation (local to :func:`build_step`)."""

    f: FlavorSpec
    rng: random.Random
    scales: Scales
    pid: int
    device: int
    python: bool
    memory: bool
    t: int = 20_000
    ext: int = 0
    corr: int = 0
    pyid: int = 0
    free: dict[str, int] = field(default_factory=dict)
    compute_since_comm: float = 0.0
    allocated: int = 2_000_000_000
    peak: int = 2_000_000_000
    leaked: int = 0
    live: list[tuple[int, int]] = field(default_factory=list)
    pystack: list[int] = field(default_factory=list)
    instances: dict[str, int] = field(default_factory=dict)
    cpu: list[tuple[int, int, Emit]] = field(default_factory=list)
    gpu: list[tuple[int, int, Emit]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)

    def jit(self, sd: float) -> float:
        return max(0.5, 1.0 + self.rng.gauss(0.0, sd))

    def add(self, bucket: list[tuple[int, int, Emit]], ts: int, cat: str, emit: Emit) -> None:
        bucket.append((ts, len(bucket), emit))
        self.counts[cat] = self.counts.get(cat, 0) + 1

    # ---- CPU side -------------------------------------------------------------
    def x_event(self, cat: str, name_parts: Emit, ts: int, dur: int, args: Emit | None) -> Emit:
        pid = self.pid

        def emit(o: Text) -> None:
            o.lit(f'\n  {{\n    "ph": "X", "cat": "{cat}", "name": ')
            name_parts(o)
            o.lit(f', "pid": {pid}, "tid": {pid},\n    "ts": ')
            o.ts(ts)
            o.lit(f', "dur": {_us(dur)}')
            if args is not None:
                o.lit(',\n    "args": {\n      ')
                args(o)
                o.lit("\n    }")
            o.lit("\n  },")

        return emit

    def memory_event(self, ts: int, addr: int, nbytes: int, *, leaked: bool = False) -> None:
        if not self.memory:
            return
        self.allocated += nbytes
        self.peak = max(self.peak, self.allocated)
        total, pid, dev = self.allocated, self.pid, self.device
        head = (
            f'\n  {{\n    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",'
            f'\n    "pid": {pid}, "tid": {pid},\n    "ts": '
        )
        addr_head = f',\n    "args": {{\n      "Device Type": 1, "Device Id": {dev}, "Addr": '

        def emit(o: Text) -> None:
            o.lit(head)
            o.ts(ts)
            o.lit(addr_head)
            if leaked:
                o.slot(addr, ADDR)
            else:
                o.lit(str(addr))
            o.lit(f', "Bytes": {nbytes}, "Total Allocated": ')
            o.slot(total, MEM)
            o.lit(', "Total Reserved": ')
            o.slot(self.reserved(), MEM)
            o.lit("\n    }\n  },")

        self.add(self.cpu, ts, "cpu_instant_event", emit)

    def reserved(self) -> int:
        """The caching allocator's reserve: the step's peak in 20 MiB segments plus 512 MiB cached.

        Known once the step is simulated (templates are rendered after that); constant over
        the step, and raised by the earlier steps' leaks through the MEM slot.
        """
        seg = 20 << 20
        return -(-self.peak // seg) * seg + (512 << 20)

    def free_live(self) -> None:
        while self.live:
            addr, nbytes = self.live.pop()
            self.t += 300
            self.memory_event(self.t, addr, -nbytes)

    def run_op(self, op: Op) -> None:
        if self.python and op.module is not None:
            self.run_python(op)
        elif op.cat == "python":
            self.run_body(op)
            self.free_live()
        else:
            self.run_cpu_op(op)

    def run_python(self, op: Op) -> None:
        """An nn.Module call as ``torch.profiler(with_stack=True, with_modules=True)`` records it.

        ``.../module.py: _call_impl`` (a plain python_function frame) encloses the
        ``nn.Module: <Class>_<n>`` span, which encloses the module's ``forward`` frame; ``n``
        numbers the instances of each class in call order (the same every step, as each
        module instance runs once per step).
        """
        n = self.instances.get(op.module or "", 0)
        self.instances[op.module or ""] = n + 1
        cls = op.module or ""
        frames = (
            ("torch/nn/modules/module.py(1784): _call_impl", 900),
            (f"nn.Module: {cls}_{n}", 1_100),
            (f"models/dit.py({200 + len(cls)}): forward", 700),
        )
        opened: list[tuple[int, int, str, int]] = []  # (pyid, parent, label, start)
        for label, pre in frames:
            self.pyid += 1
            parent = self.pystack[-1] if self.pystack else 0
            self.pystack.append(self.pyid)
            opened.append((self.pyid, parent, label, self.t))
            self.t += int(pre * self.jit(0.1))
        if op.cat == "python":
            self.run_body(op)
            self.free_live()
        else:
            self.run_cpu_op(op)
        for pyid, parent, label, start in reversed(opened):
            self.pystack.pop()
            self.t += int(500 * self.jit(0.1))
            self.python_event(pyid, parent, label, start)

    def python_event(self, pyid: int, parent: int, label: str, start: int) -> None:
        text = json.dumps(label)

        def name(o: Text) -> None:
            o.lit(text)

        def args(o: Text) -> None:
            o.lit('"Python parent id": ')
            if parent:
                o.slot(parent, PYID)
            else:
                o.lit("0")
            o.lit(', "Python id": ')
            o.slot(pyid, PYID)
            o.lit(', "Python module id": 0, "Python thread": 0')

        self.add(self.cpu, start, "python_function",
                 self.x_event("python_function", name, start, self.t - start, args))

    def run_body(self, op: Op) -> None:
        for item in op.body:
            if isinstance(item, Op):
                self.run_op(item)
            else:
                self.run_call(item, self.ext)

    def run_cpu_op(self, op: Op) -> None:
        self.ext += 1
        ext, start = self.ext, self.t
        own = op.cpu_us * 1000 * self.jit(0.08)
        self.t += int(own * 0.6)
        if op.alloc and op.leak:
            self.memory_event(self.t, LEAK_BASE_ADDR, op.alloc, leaked=True)
            self.leaked += op.alloc
        elif op.alloc:
            addr = 0x7F3A00000000 + (ext % 4096) * 0x200000
            self.memory_event(self.t, addr, op.alloc)
            self.live.append((addr, op.alloc))
        self.run_body(op)
        self.t += int(own * 0.4) + 300
        label = json.dumps(op.name)
        rest = f', "Input Dims": {op.dims}, "Input type": {op.types}' if op.cat == "cpu_op" else ""
        if op.cat == "cpu_op" and op.concrete is not None:
            rest += f', "Concrete Inputs": {op.concrete}'

        def name(o: Text) -> None:
            o.lit(label)

        def args(o: Text) -> None:
            o.lit('"External id": ')
            o.slot(ext, EXT)
            o.lit(rest)

        self.add(self.cpu, start, op.cat, self.x_event(op.cat, name, start, self.t - start, args))

    # ---- runtime calls and GPU side --------------------------------------------
    def run_call(self, call: Call, ext: int) -> None:
        self.corr += 1
        corr, start = self.corr, self.t
        dur = int(call.cpu_us * 1000 * self.jit(0.1))
        earliest = start + int(dur * 0.8) + 2_000
        for g in call.gpu if not call.captured else ():
            earliest = self.run_gpu(g, earliest, ext, corr)
        if call.sync:
            dur = max(dur, self.free.get("compute", 0) - start + 2_500)
        self.t = start + dur + 400
        launch = next((g for g in call.gpu if g.cat == "kernel"), None)
        rest = self.runtime_args(call, launch)

        def name(o: Text) -> None:
            o.lit(f'"{call.name}"')

        def args(o: Text) -> None:
            o.lit('"External id": ')
            o.slot(ext, EXT)
            o.lit(rest[0])
            o.slot(corr, CORR)
            o.lit(rest[1])

        self.add(self.cpu, start, "cuda_runtime", self.x_event("cuda_runtime", name, start, dur, args))
        if call.gpu and not call.captured:
            self.add(self.cpu, start, "ac2g", self.flow("s", start, self.pid, corr))

    def runtime_args(self, call: Call, kernel: Gpu | None) -> tuple[str, str]:
        f = self.f
        if not f.rocm:
            cbid = {"cudaLaunchKernel": 211, "cudaLaunchKernelExC": 430, "cudaMemcpyAsync": 41,
                    "cudaMemsetAsync": 51, "cudaGraphLaunch": 311, "cudaStreamSynchronize": 131}
            return f', "cbid": {cbid.get(call.name, 0)}, "correlation": ', ""
        cid = {"hipLaunchKernel": 107, "hipExtModuleLaunchKernel": 65, "hipExtLaunchKernel": 105,
               "hipMemcpyAsync": 132, "hipMemsetAsync": 145, "hipGraphLaunch": 366, "hipStreamSynchronize": 41}
        tail = ""
        if kernel is not None and call.name != f.graph:
            tail = (f', "kernel": {json.dumps(kernel.name)}, "stream": "0x0", "grid": {list(kernel.grid)},'
                    f' "block": {list(kernel.block)}, "shared memory": {kernel.smem}')
        return f', "cid": {cid.get(call.name, 0)}, "correlation": ', tail

    def scale(self, g: Gpu) -> float:
        s = self.f.speed * self.jit(0.01)
        if g.cat == "kernel":
            s *= self.scales.kernel(g.name)
        if g.role == "compute":
            s *= 1.0 + self.scales.compute_slowdown
        return s

    def run_gpu(self, g: Gpu, earliest: int, ext: int, corr: int) -> int:
        # physically plausible for the device named: never faster than PLAUSIBLE_FRACTION of
        # its peaks before noise and regressions, nor MAX_FRACTION after them
        dur_us = max(max(g.dur_us, floor_us(g, self.f)) * self.scale(g),
                     floor_us(g, self.f, fraction=MAX_FRACTION))
        start = max(earliest, self.free.get(g.role, 0))
        if g.role == "comm":
            start = max(start, self.free.get("compute", 0) + 1_500)
            dur_us += self.scales.comm_wait * self.compute_since_comm
            self.compute_since_comm = 0.0
        elif g.role == "compute":
            self.compute_since_comm += dur_us
        dur = max(1_000, int(dur_us * 1000))
        end = start + dur
        self.free[g.role] = end
        if g.role == "comm":
            self.free["compute"] = max(self.free.get("compute", 0), end + 1_000)
        stream = {"compute": self.f.compute_stream, "comm": self.f.comm_stream, "copy": self.f.copy_stream}[g.role]
        rest = self.gpu_args(g, stream, dur)
        label = json.dumps(g.name)

        def name(o: Text) -> None:
            o.lit(label)

        def args(o: Text) -> None:
            o.lit('"External id": ')
            o.slot(ext, EXT)
            o.lit(rest[0])
            o.slot(corr, CORR)
            o.lit(rest[1])

        dev = self.device

        def emit(o: Text) -> None:
            o.lit(f'\n  {{\n    "ph": "X", "cat": "{g.cat}", "name": ')
            name(o)
            o.lit(f', "pid": {dev}, "tid": {stream},\n    "ts": ')
            o.ts(start)
            o.lit(f', "dur": {_us(dur)},\n    "args": {{\n      ')
            args(o)
            o.lit("\n    }\n  },")

        self.add(self.gpu, start, g.cat, emit)
        self.add(self.gpu, start, "ac2g", self.flow("f", start, dev, corr, stream))
        return end + 800

    def gpu_args(self, g: Gpu, stream: int, dur: int) -> tuple[str, str]:
        f, dev = self.f, self.device
        ctx = "" if f.rocm else ', "context": 1'
        head = f', "device": {dev}{ctx}, "stream": {stream}, "correlation": '
        if g.cat != "kernel":
            word = g.name.split()[1] if g.cat == "gpu_memcpy" else "Memset"
            kind = f', "kind": "{word}"' if f.rocm else ""
            return head, f'{kind}, "bytes": {g.nbytes}, "memory bandwidth (GB/s)": {g.nbytes / dur!r}'
        if f.rocm:
            return head, f', "kind": "Dispatch Kernel", "grid": {list(g.grid)}, "block": {list(g.block)}'
        blocks = g.grid[0] * g.grid[1] * g.grid[2] / f.num_sms
        warps = blocks * math.ceil(g.block[0] * g.block[1] * g.block[2] / f.warp_size)
        occ = min(100, int(100 * min(warps, 64.0) / 64.0))
        return (
            ', "queued": 0' + head,
            f', "registers per thread": {g.regs}, "shared memory": {g.smem}, "blocks per SM": {blocks:.6f},'
            f' "warps per SM": {warps:.6f}, "grid": {list(g.grid)}, "block": {list(g.block)},'
            f' "est. achieved occupancy %": {occ}',
        )

    @staticmethod
    def flow(ph: str, ts: int, pid: int, corr: int, tid: int | None = None) -> Emit:
        thread = pid if tid is None else tid
        end = ', "bp": "e"' if ph == "f" else ""

        def emit(o: Text) -> None:
            o.lit(f'\n  {{\n    "ph": "{ph}", "id": ')
            o.slot(corr, CORR)
            o.lit(f', "pid": {pid}, "tid": {thread}, "ts": ')
            o.ts(ts)
            o.lit(f',\n    "cat": "ac2g", "name": "ac2g"{end}\n  }},')

        return emit
