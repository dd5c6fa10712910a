"""The report's "time per layer" section: GPU time per nn.Module of the model's repeated layers.

Every number comes from ``Warehouse.modules`` (``module_tree`` of ``sql/55_modules.sql``);
this module picks the tree's *layer* depth and draws it. The layers are the model's repeated
blocks: of the groups of two or more modules of one class under one parent
(``BertLayer_0``, ``BertLayer_1``, ... under ``BertEncoder_0``; ``DiTBlock_<i>`` under
``DiT_0``), the group holding the most GPU time (then the shallowest). Without repeated blocks, every module of the first
depth with more than one module is drawn (else the roots).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import polars as pl

from tracewh.core.errors import TracewhError
from tracewh.report import vlspec as alt
from tracewh.report.charts import LABEL_LIMIT, WIDTH, AnyChart, Chart, middle_trim, values
from tracewh.report.tables import Column, Section, table

#: Vega expression: the last part of a module path (the layer's own name).
LAST_SEGMENT = "split(datum.label, '/')[length(split(datum.label, '/')) - 1]"

#: Bars drawn at most (the layers in order; the rest are in the table).
MAX_LAYERS = 64

_INSTANCE = re.compile(r"_(\d+)$")


@dataclass(frozen=True)
class ModuleData:
    """A run's module tree (every node, depth first) and where its layers are."""

    tree: pl.DataFrame
    depth: int | None  # depth of the layers (None: no modules)
    parent: str | None = None  # the module holding them (None: every node at ``depth``)
    cls: str | None = None  # their class (None: any)
    graph_note: str = ""  # how the run's graph replays map to captures (match quality)


def layer_group(tree: pl.DataFrame) -> tuple[int, str | None, str | None] | None:
    """Where the model's repeated layers are in a ``module_tree`` frame: (depth, parent, class).

    Of the groups of two or more children of one class (the name without its ``_<n>``
    instance suffix) under one parent, the one with the most GPU time (then the shallowest); else every
    node of the first depth with two or more nodes (parent and class None); else the roots.
    None without modules.
    """
    nodes = tree.filter(pl.col("module_path").is_not_null())
    if nodes.is_empty():
        return None
    keyed = nodes.select(
        "depth", "gpu_ns",
        pl.col("module_path").str.replace(r"/?[^/]*$", "").alias("parent"),
        pl.col("name").str.replace(r"_\d+$", "").alias("cls"),
    )
    groups = (keyed.group_by("depth", "parent", "cls")
              .agg(pl.len().alias("n"), pl.col("gpu_ns").sum())
              .filter(pl.col("n") >= 2)
              # the repeated blocks that hold the most GPU time (a compiled SD3.5 run's 24
              # transformer blocks, not its small CLIP encoders' layers at a shallower depth);
              # a group nested in a block holds less than the blocks' group, so it loses
              .sort(["gpu_ns", "depth", "parent", "cls"], descending=[True, False, False, False]))
    if not groups.is_empty():
        g = groups.row(0, named=True)
        return int(g["depth"]), str(g["parent"]), str(g["cls"])
    wide = nodes.group_by("depth").len().filter(pl.col("len") >= 2)
    return (int(wide["depth"].min()) if not wide.is_empty() else 1), None, None  # type: ignore[arg-type]


def collect_modules(wh: Any, run_id: Any, *, note: str | None = None) -> ModuleData | None:
    """The module tree of ``run_id`` (or a RunRef); ``None`` without a ``modules`` method.

    ``note``: the run's :func:`graph_note`, where the caller has it already (else asked here).
    """
    method = getattr(wh, "modules", None)
    if method is None:
        return None
    try:
        tree: pl.DataFrame = method(run_id)
    except TracewhError:
        return None
    if note is None:
        note = graph_note(wh, run_id)
    group = layer_group(tree)
    if group is None:
        return ModuleData(tree, None, graph_note=note)
    return ModuleData(tree, *group, graph_note=note)


def graph_note(wh: Any, run_id: Any) -> str:
    """The match-quality line of the run's graph replays (``Warehouse.graph_match``), or ""."""
    method = getattr(wh, "graph_match", None)
    if method is None:
        return ""
    from tracewh.query.graphalign import match_note

    try:
        return match_note(method(run_id)) or ""
    except TracewhError:
        return ""


def _order(name: str) -> tuple[str, int]:
    """Natural order of module names: class, then instance number (``Layer_2`` before ``_10``)."""
    m = _INSTANCE.search(name)
    return (name[: m.start()], int(m.group(1))) if m else (name, -1)


def layers(data: ModuleData) -> pl.DataFrame:
    """The nodes at the layer depth in natural order: module_path, name, calls, kernels, gpu_ns, pct."""
    if data.depth is None:
        return pl.DataFrame()
    rows = data.tree.filter(pl.col("depth") == data.depth, pl.col("module_path").is_not_null())
    if data.parent is not None:
        rows = rows.filter(pl.col("module_path").str.replace(r"/?[^/]*$", "") == data.parent)
    if data.cls is not None:
        rows = rows.filter(pl.col("name").str.replace(r"_\d+$", "") == data.cls)
    keys = [(_order(str(p).rsplit("/", 1)[0]), _order(str(n))) for p, n in
            zip(rows["module_path"], rows["name"], strict=True)]
    order = sorted(range(rows.height), key=lambda i: keys[i])
    return rows[order]


def layer_chart(data: ModuleData) -> AnyChart | None:
    """Bars: GPU time of each layer (inclusive), in model order."""
    df = layers(data).head(MAX_LAYERS)
    if df.is_empty():
        return None
    df = df.with_row_index("k").select(
        "k", "module_path", "name", "calls", "kernels",
        (pl.col("gpu_ns") / 1e6).alias("gpu_ms"), pl.col("pct").round(2),
    )
    return (
        Chart(values(df))
        .mark_bar(color="#54a24b")
        .encode(
            x=alt.X("gpu_ms:Q", title="GPU time (ms)"),
            y=alt.Y("module_path:N", sort=alt.EncodingSortField(field="k", order="ascending"),
                    title=None, axis=alt.Axis(labelExpr=middle_trim(LAST_SEGMENT))),
            tooltip=[alt.Tooltip("module_path:N", title="module"), alt.Tooltip("calls:Q"),
                     alt.Tooltip("kernels:Q"),
                     alt.Tooltip("gpu_ms:Q", title="GPU time (ms)", format=",.3f"),
                     alt.Tooltip("pct:Q", title="share of GPU time (%)")],
        )
        .properties(
            title=alt.TitleParams("Time per layer", anchor="start", fontSize=14,
                                  subtitle="GPU time of each repeated block (inclusive), "
                                           "in model order"),
            width=WIDTH - LABEL_LIMIT,
        )
    )


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def layer_sentence(rows: pl.DataFrame, data: ModuleData) -> str:
    """What the layer view shows, in one sentence: how many layers, of what, the share of the
    GPU time they hold together, and the slowest one."""
    n = rows.height
    if data.cls:
        where = f" of {data.parent}" if data.parent else " at the top level"
        what = f"{n} {data.cls} module{'s' if n != 1 else ''}{where}"
    else:
        what = f"{n} module{'s' if n != 1 else ''} at depth {data.depth}"
    share = float(rows["pct"].fill_null(0).sum())
    slowest = rows.sort("gpu_ns", descending=True).row(0, named=True)
    verb = "holds" if n == 1 else "hold"
    together = "" if n == 1 else " together"
    return (f"{what} {verb} {share:.1f}% of the GPU time{together}; the slowest, "
            f"{slowest['module_path']}, takes {slowest['gpu_ns'] / 1e6:,.3f} ms "
            f"({float(slowest['pct'] or 0):.1f}%).")


def modules_section(data: ModuleData | None, *, prefix: str = "") -> Section:
    """The "time per layer" section of a run's report (or why there is none)."""
    key = f"{prefix}modules"
    empty = "no nn.Module spans in this trace (record with with_stack=True, with_modules=True)"
    if data is None or data.depth is None:
        return Section(key, "Time per layer", None, empty)
    rows = layers(data)
    text = ""
    if rows.height:
        text = layer_sentence(rows, data)
    if data.graph_note:
        text = f"{text} {_cap(data.graph_note)}." if text else f"{_cap(data.graph_note)}."
    tree = data.tree.with_columns(
        pl.when(pl.col("module_path").is_null()).then(pl.lit("(no module)"))
        .otherwise(pl.lit("· ").repeat_by((pl.col("depth") - 1).clip(lower_bound=0)).list.join("")
                   + pl.col("name"))
        .alias("module")
    ).filter(pl.col("depth") <= data.depth)
    return Section(key, "Time per layer", layer_chart(data), empty, text=text, tables=[
        table("Module tree (down to the layers; inclusive GPU time)", tree, [
            Column("module", "module"), Column("calls", "calls"), Column("kernels", "kernels"),
            Column("gpu_ns", "GPU", "ms"), Column("self_gpu_ns", "self", "ms"),
            Column("pct", "share of GPU time", "pct"),
        ], limit=60)])


__all__ = ["ModuleData", "collect_modules", "graph_note", "layer_chart", "layer_group", "layer_sentence", "layers",
           "modules_section"]
