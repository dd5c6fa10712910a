"""What the many-run analyses need from a warehouse, without importing the API.

:mod:`tracewh.history` and :mod:`tracewh.alerts` take a :class:`Source` (structurally: any
object with these methods; :class:`tracewh.api.Warehouse` is one) and compose SQL with the
pure analyses; the API composes them. ``KEY=VALUE`` run filters are defined here once.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # Polars is imported where a frame is filtered (not by `import tracewh.cli`)
    import polars as pl

#: Run fields a ``KEY=VALUE`` selector may name (besides labels).
RUN_FIELDS = (
    "run_id", "day", "host", "rank", "world_size", "device_name", "backend", "job",
    "file_name", "source_path", "trace_name", "trace_id", "dist_backend", "sha256",
)  # fmt: skip


@dataclass(frozen=True)
class RunRef:
    """A resolved run: its id, partition day, job and rank."""

    run_id: str
    day: Any
    job: str | None
    rank: int | None


class Source(Protocol):
    """The queries the many-run analyses run (a :class:`tracewh.api.Warehouse`)."""

    def sql(
        self,
        query: str,
        params: Sequence[Any] | Mapping[str, Any] | None = None,
        *,
        days: Collection[date] | None = None,
        since: date | None = None,
    ) -> pl.DataFrame:
        """A SQL query over the views (``days``/``since`` restrict the partitions)."""
        ...

    def resolve_run(self, selector: str = "latest") -> RunRef:
        """A run selector resolved to one run."""
        ...

    def run_table(self) -> pl.DataFrame:
        """Every visible run with its fingerprint's ``minhash`` (NULL without one)."""
        ...


def where_clause(where: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    """SQL condition (and its parameters) matching runs whose label or field ``key`` is ``value``.

    A key names a label (``labels_json``) or one of the run fields in :data:`RUN_FIELDS`;
    values compare as text.
    """
    clauses = ["true"]
    params: dict[str, Any] = {}
    for i, (key, value) in enumerate(where.items()):
        params[f"p{i}"] = '$."' + key.replace('"', '\\"') + '"'
        params[f"v{i}"] = value
        label = f"json_extract_string(labels_json, $p{i}) = $v{i}"
        if key in RUN_FIELDS:
            clauses.append(f"(CAST({key} AS VARCHAR) = $v{i} OR {label})")
        else:
            clauses.append(f"coalesce({label}, false)")
    return " AND ".join(clauses), params


def where_frame(runs: pl.DataFrame, where: Mapping[str, str]) -> pl.DataFrame:
    """The rows of ``runs`` matching every ``KEY=VALUE`` of ``where`` (as :func:`where_clause`)."""
    import polars as pl

    out = runs
    for key, value in where.items():
        label = pl.col("labels_json").str.json_path_match(
            '$."' + key.replace('"', '\\"') + '"'
        )
        cond = label == value
        if key in RUN_FIELDS and key in runs.columns:
            cond = (pl.col(key).cast(pl.String) == value) | cond.fill_null(False)
        out = out.filter(cond.fill_null(False))
    return out
