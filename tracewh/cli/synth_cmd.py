"""`tracewh synth`: realistic synthetic Kineto traces."""

from __future__ import annotations

import typer

from tracewh.cli.common import app, handle_errors
from tracewh.synth.options import SynthConfig

#: The defaults of `tracewh synth` are SynthConfig's (declared once, there).
_D = SynthConfig()


@app.command()
def synth(
    out: str = typer.Argument(..., metavar="PATH", help="A .json/.json.gz file, or a directory (ranks, history)."),
    flavor: str = typer.Option(_D.flavor, "--flavor", metavar="cuda|rocm", help="cuda (A100, CUDA runtime) or rocm (MI250X, HIP)."),
    steps: int = typer.Option(_D.steps, help="Denoising steps (ProfilerStep#N) per trace."),
    size: str | None = typer.Option(None, "--size", metavar="SIZE", help="Target uncompressed size per trace, e.g. 1GB (1000-based) or 1GiB; overrides --steps."),
    layers: int = typer.Option(_D.layers, help="Transformer blocks per step."),
    ranks: int = typer.Option(_D.ranks, help="Ranks: one rank-K.pt.trace.json.gz per rank."),
    straggler: str | None = typer.Option(None, "--straggler", metavar="RANK:PCT", help="RANK:PCT, e.g. 1:20% (that rank's compute kernels slower)."),
    seed: int = typer.Option(_D.seed, help="Random seed; same options give byte-identical files."),
    python: bool = typer.Option(_D.python, "--python/--no-python", help="Emit python_function events."),
    memory: bool = typer.Option(_D.memory, "--memory/--no-memory", help="Emit profile_memory allocation instant events."),
    leak: str | None = typer.Option(None, "--leak", metavar="SIZE", help="Bytes leaked per step, e.g. 64MB: an aten::clone output never freed (memory rises every step)."),
    profiler_steps: bool = typer.Option(_D.profiler_steps, "--profiler-steps/--no-profiler-steps", help="Wrap each step in a ProfilerStep#N span."),
    compiled: bool = typer.Option(_D.compiled, "--compiled", help="Run the transformer inside a 'Torch-Compiled Region: 0/0' cpu_op each step (torch.compile's marker)."),
    graph_capture: bool = typer.Option(_D.graph_capture, "--graph-capture", help="Begin with the capture of the CUDA/HIP graph the steps replay (cudaStreamBeginCapture ... EndCapture)."),
    model: str = typer.Option(_D.model, "--model", metavar="NAME", help="Model name (labels, trace name)."),
    gzip_level: int = typer.Option(_D.gzip_level, help="gzip compression level 1-9 (1 is fastest)."),
    runs: int | None = typer.Option(None, help="Write a nightly history of this many nights: OUT/YYYY-MM-DD/."),
    start: str | None = typer.Option(None, "--start", metavar="DATE", help="First night of --runs, YYYY-MM-DD (default 2025-01-01)."),
    regress: list[str] | None = typer.Option(None, "--regress", metavar="PAT:+PCT@DATE", help="KERNEL_PATTERN:+30%@YYYY-MM-DD (repeatable); glob if it has * or ?, else substring."),
    noise: float = typer.Option(_D.noise, help="Night-to-night multiplicative noise on kernel durations (std dev)."),
    trailer_distributed_info: bool = typer.Option(_D.distributed_info_in_trailer, help="Write distributedInfo after traceEvents."),
) -> None:
    """Write realistic synthetic Kineto traces (a diffusion denoising loop on 1..N ranks).

    Example: tracewh synth data/demo --runs 14 --ranks 2 --regress 'flash_fwd:+30%@2025-01-08'
    """
    from tracewh import synth as syn

    with handle_errors():
        config = syn.SynthConfig(
            flavor=syn.parse_flavor(flavor),
            steps=steps,
            size_bytes=syn.parse_size(size) if size is not None else None,
            layers=layers,
            ranks=ranks,
            straggler=syn.parse_straggler(straggler) if straggler is not None else None,
            seed=seed,
            python=python,
            memory=memory,
            leak_bytes=syn.parse_size(leak) if leak is not None else 0,
            profiler_steps=profiler_steps,
            compiled=compiled,
            graph_capture=graph_capture,
            model=model,
            gzip_level=gzip_level,
            distributed_info_in_trailer=trailer_distributed_info,
            noise=noise,
        )
        summaries = syn.synthesize(
            out,
            config,
            runs=runs,
            start=syn.parse_date(start) if start is not None else None,
            regressions=[syn.parse_regression(r) for r in regress or []],
        )
    raw = sum(s.uncompressed_bytes for s in summaries)
    disk = sum(s.file_bytes for s in summaries)
    kernels = sum(s.kernels for s in summaries)
    typer.echo(
        f"wrote {len(summaries)} trace file(s) under {out}: {kernels} kernels, "
        f"{raw / 1e6:.1f} MB JSON, {disk / 1e6:.1f} MB on disk"
    )
