"""Attribution commands: `tracewh modules` (GPU time per nn.Module) and `tracewh annotations`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tracewh.api import Warehouse
from tracewh.cli.common import app, format_option, handle_errors, run_option, warehouse_option
from tracewh.cli.output import emit, write_out

if TYPE_CHECKING:  # Polars is imported by the commands that draw a tree, not by every command
    import polars as pl

_OUT_HELP = "Also write the result to FILE (.csv, .json or .parquet)."


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
        .otherwise(pl.lit("  ").repeat_by(pl.col("depth") - 1).list.join("") + pl.col("name"))
    )
    return df.select(label.alias(column), pl.exclude(column, "name"))


def _emit_tree(df: pl.DataFrame, fmt: str, out: Path | None, *, title: str, column: str,
               none_label: str) -> None:
    if out is not None:
        write_out(df, out)
    emit(tree_view(df, column=column, none_label=none_label) if fmt == "table" else df, fmt, title=title)


@app.command()
def modules(
    warehouse: str = warehouse_option(),
    run: str = run_option(),
    depth: int | None = typer.Option(None, "--depth", help="Cut module paths after N names (default: full paths)."),
    top: int | None = typer.Option(20, "--top", "-n", help="Show the N heaviest nodes of the tree (with their ancestors)."),
    fmt: str = format_option(),
    out: Path | None = typer.Option(None, "--out", "-o", help=_OUT_HELP),
) -> None:
    """GPU time per nn.Module: the module tree, each node with its calls, kernels and GPU time.

    Module paths come from the `nn.Module: X` spans (with_modules / with_stack traces)
    enclosing each kernel's launch. gpu_ns is inclusive (the node and what is below it);
    self_gpu_ns counts the kernels launched directly in the node.

    Example: tracewh modules --depth 3 --top 30
    """
    with handle_errors():
        df = Warehouse(warehouse).modules(run, depth=depth, top=top)
        _emit_tree(df, fmt, out, title="GPU time by module", column="module_path",
                   none_label="(no module)")
