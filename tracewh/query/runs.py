"""The runs of a snapshot: run selectors resolved to runs, label values, why nothing matched.

Functions of a DuckDB connection whose ``runs`` view is the snapshot's (see
:meth:`tracewh.query.session.Session.conn`); the grammar of selectors is
:mod:`tracewh.query.runsel` and ``run_matches`` of ``sql/02_runs.sql``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from tracewh.core.errors import EmptyWarehouseError, RunNotFoundError, UsageError
from tracewh.query.fetch import fetch_rows
from tracewh.query.runsel import (
    RUN_FIELDS,
    RunRef,
    RunSelector,
    Term,
    canonical,
    has_prefix,
    parse_selector,
    sql_selector,
)

__all__ = ["LATEST_FIRST", "label_values", "resolve", "run_row", "top_values_query"]

#: The "latest first" order of runs (as ``run_matches`` in ``sql/02_runs.sql``).
LATEST_FIRST = "ingested_at DESC NULLS LAST, start_ns DESC NULLS LAST, rank NULLS LAST, run_id"

#: The columns of a run that a :class:`RunRef` is made of, in :func:`resolve`'s order.
_REF_COLUMNS = "run_id, day, job, rank, world_size, file_name, start_ns, device_name, labels_json"


def resolve(con: duckdb.DuckDBPyConnection, selector: RunSelector, *, root: Path | str) -> RunRef:
    """Resolve a run selector to one run, on a connection whose ``runs`` is the snapshot's.

    ``latest``, a run_id prefix, ``KEY=VALUE`` (label or run field), or several terms
    (``"model=x,rank=0"`` or a list), all of which the run must match. Several matches
    resolve to the latest of them (latest ingest, then latest trace start, then lowest
    rank); the returned :class:`RunRef` says how many matched (``matched``) and which
    (``others``). A run_id prefix matching several runs is an error (ambiguous). A
    :class:`RunRef` is returned as it is.

    Raises
    ------
    RunNotFoundError
        Nothing matches (the message lists the values the selector's keys have), or an
        ambiguous run_id prefix.
    EmptyWarehouseError
        The warehouse (``root``) has no run.
    UsageError
        A malformed selector term.
    """
    if isinstance(selector, RunRef):
        return selector
    terms = parse_selector(selector)
    text = canonical(selector)
    if all(t.kind == "latest" for t in terms):
        # every run matches, latest first: run_matches' order without planning its term
        # filters (~10 ms of every per-run call, which mostly asks for `latest`); the six
        # first rows are all the RunRef keeps, with the count of every run
        rows = fetch_rows(
            con, f"SELECT {_REF_COLUMNS}, count(*) OVER () FROM runs ORDER BY {LATEST_FIRST} LIMIT 6"
        ).rows
        found = [r[:-1] for r in rows]
        matched = int(rows[0][-1]) if rows else 0
    else:
        found = fetch_rows(
            con, f"SELECT {_REF_COLUMNS} FROM run_matches($sel) ORDER BY pos",
            {"sel": sql_selector(selector)},
        ).rows
        matched = len(found)
    if not found:
        if not terms or all(t.kind == "latest" for t in terms):
            raise EmptyWarehouseError(root)
        raise RunNotFoundError(text, _no_match_reason(con, terms))
    ids = [str(r[0]) for r in found]
    if len(ids) > 1 and has_prefix(terms):
        raise RunNotFoundError(
            text, f"is ambiguous: matches {len(ids)} runs ({', '.join(ids[:5])})"
        )
    run_id, day, job, rank, world_size, file_name, start_ns, device, labels_json = found[0]
    try:
        labels = json.loads(labels_json) if labels_json else {}
    except ValueError:
        labels = {}
    return RunRef(
        run_id, day, job, rank, file_name=file_name, start_ns=start_ns,
        labels=labels if isinstance(labels, dict) else {}, device_name=device or None,
        world_size=world_size, selector=text, matched=matched, others=tuple(ids[1:6]),
    )  # fmt: skip


def _no_match_reason(con: duckdb.DuckDBPyConnection, terms: Sequence[Term]) -> str:
    """Why a selector matched nothing: the values its keys have."""
    hints: list[str] = []
    for t in [t for t in terms if t.kind == "key"][:3]:
        values = label_values(con, t.key or "")
        if values:
            more = ", ..." if len(values) > 8 else ""
            hints.append(f"{t.key} has {', '.join(repr(v) for v in values[:8])}{more}")
        else:
            hints.append(f"no run has a label or field {t.key!r}")
    return "matches no run" + (f" ({'; '.join(hints)})" if hints else "")


def label_values(con: duckdb.DuckDBPyConnection, key: str) -> list[str]:
    """The distinct values of label or run field ``key`` in ``runs`` on ``con``, sorted."""
    field = f"CAST({key} AS VARCHAR)" if key in RUN_FIELDS else "NULL"
    got = fetch_rows(
        con,
        f"SELECT DISTINCT coalesce({field}, json_extract_string(labels_json, $p)) AS v "
        "FROM runs WHERE v IS NOT NULL ORDER BY v",
        {"p": '$."' + key.replace('"', '\\"') + '"'},
    )
    return [str(r[0]) for r in got.rows]


def run_row(con: duckdb.DuckDBPyConnection, run: RunSelector, *, root: Path | str) -> dict[str, Any]:
    """The ``runs`` row of a run (all columns but ``metadata_json``) as a dict."""
    ref = resolve(con, run, root=root)
    got = fetch_rows(
        con, "SELECT * EXCLUDE (metadata_json) FROM runs WHERE run_id = $id", {"id": ref.run_id}
    )
    return dict(zip(got.columns, got.rows[0], strict=True)) if got.rows else {"run_id": ref.run_id}


def top_values_query(table: str, column: str, *, limit: int) -> str:
    """The query of the most frequent values of ``table.column`` in run ``$id``, with row counts.

    What a filter could have matched, for saying so when it matched nothing (``--cat
    Kernel`` when the run's GPU ops have ``kernel``).
    """
    from tracewh.schema.arrow import TABLES

    spec = TABLES.get(table)
    if spec is None or not spec.is_run_child or column not in spec.schema.names:
        raise UsageError(f"no column {column!r} in a run table {table!r}")
    return (f'SELECT "{column}" AS value, count(*) AS rows FROM {table} WHERE run_id = $id '
            f"GROUP BY 1 ORDER BY rows DESC, value NULLS LAST LIMIT {int(limit)}")
