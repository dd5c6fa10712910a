"""Attribution commands: `tracewh modules` (GPU time per nn.Module) and `tracewh annotations`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tracewh.cli.common import (
    app,
    check_format,
    format_option,
    graph_notes,
    handle_errors,
    open_warehouse,
    out_option,
    run_option,
    selector,
    top_option,
    warehouse_option,
)
from tracewh.cli.output import show, write_out
from tracewh.query.options import AnnotationsOptions, ModulesOptions
from tracewh.query.runsel import RunRef

if TYPE_CHECKING:
    import polars as pl


def tree_view(df: pl.DataFrame, *, column: str, none_label: str) -> pl.DataFrame:
    """``df`` (depth-first tree rows) with ``column`` shown as an indented last name.

    The full path column and ``name`` make way for one indented column, so the table
    reads as a tree; rows without a path show ``none_label``.
    """
    import polars as pl

    if df.is_empty():
        return df
    label = (
        pl.when(pl.col(column).is_null())
        .then(pl.lit(none_label))
        # clipped: Polars (2.2) evaluates the branch on every row, the no-path one's depth 0 too
        .otherwise(pl.lit("  ").repeat_by((pl.col("depth") - 1).clip(lower_bound=0)).list.join("")
                   + pl.col("name"))
    )
    return df.select(label.alias(column), pl.exclude(column, "name"))


def _emit_tree(df: pl.DataFrame, fmt: str, out: Path | None, *, title: str, column: str,
               none_label: str, run: RunRef, empty: str | None = None,
               notes: list[str] | None = None) -> None:
    """Show a tree (indented in tables); ``--out`` gets the full paths."""
    if out is not None:
        write_out(df, out)
    shown = tree_view(df, column=column, none_label=none_label) if fmt in ("table", "markdown") else df
    show(shown, fmt, title=title, run=run, empty=empty, notes=notes or ())


@app.command()
def modules(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option(),
    depth: int | None = typer.Option(ModulesOptions.depth, "--depth", metavar="N", help="Cut module paths after N names (default: full paths)."),
    top: int | None = top_option(ModulesOptions.top, "Show the N heaviest nodes of the tree (with their ancestors; 0: all)."),
    fmt: str = format_option(),
    out: Path | None = out_option(),
) -> None:
    """GPU time per nn.Module: the module tree, each node with its calls, kernels and GPU time.

    Module paths come from the `nn.Module: X` spans (with_modules / with_stack traces)
    enclosing each kernel's launch. gpu_ns is inclusive (the node and what is below it);
    self_gpu_ns counts the kernels launched directly in the node.

    Example: tracewh modules --depth 3 --top 30
    """
    with handle_errors():
        check_format(fmt)
        wh = open_warehouse(warehouse)
        ref = wh.resolve_run(selector(run))
        df = wh.modules(ref, depth=depth, top=top or None)
        _emit_tree(df, fmt, out, title="GPU time by module", column="module_path",
                   none_label="(no module)", run=ref, notes=graph_notes(wh, ref),
                   empty=f"run {ref.short_id} has no GPU ops with a duration")


@app.command("annotations")
def annotations_cmd(
    warehouse: str = warehouse_option(),
    run: list[str] | None = run_option(),
    gpu: bool = typer.Option(AnnotationsOptions.gpu, "--gpu", help="gpu_user_annotation spans (GPU side, by time on each kernel's track) instead of user_annotation (CPU side, by launch)."),
    depth: int | None = typer.Option(AnnotationsOptions.depth, "--depth", metavar="N", help="Cut annotation paths after N names (default: full paths)."),
    top: int | None = top_option(AnnotationsOptions.top, "Show the N heaviest nodes of the tree (with their ancestors; 0: all)."),
    fmt: str = format_option(),
    out: Path | None = out_option(),
) -> None:
    """GPU time per user annotation (record_function), as a tree of nested annotations.

    A kernel belongs to the user_annotation spans enclosing its launch call (ProfilerStep#N
    left out); with --gpu, to the gpu_user_annotation spans enclosing it on the GPU.
    `tracewh ops` is apart: it attributes kernels to the innermost aten cpu_op only.

    Example: tracewh annotations --depth 2
    """
    with handle_errors():
        check_format(fmt)
        wh = open_warehouse(warehouse)
        ref = wh.resolve_run(selector(run))
        df = wh.annotations(ref, gpu=gpu, depth=depth, top=top or None)
        _emit_tree(df, fmt, out, title="GPU time by annotation" + (" (GPU side)" if gpu else ""),
                   column="annotation_path", none_label="(no annotation)", run=ref,
                   notes=graph_notes(wh, ref), empty=f"run {ref.short_id} has no GPU ops with a duration")
