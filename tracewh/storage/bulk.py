"""Insert Python rows into a DuckDB table in one statement.

``executemany`` runs its statement once per row: ~1.5 ms a row of ``runs`` (48 columns), the
most of a batch commit's fixed cost (its ``runs`` rows, its ``ingest_log`` rows and the
``run_series`` input: three times per batch, ~0.1 s for 60 runs each). :func:`insert_rows`
passes each column as one list parameter and unnests them side by side: one statement
whatever the rows (60 rows of ``runs``: 8 ms; 500: 36 ms), the same values, cast to the
columns' declared types as ``executemany``'s parameters are.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["insert_rows"]


def insert_rows(
    con: Any, table: str, columns: Sequence[tuple[str, str]], rows: Sequence[Mapping[str, Any]]
) -> None:
    """Insert ``rows`` (``{column: value}``; a missing column is NULL) into ``table``.

    ``columns`` are the table's ``(name, DuckDB type)`` in its column order. A column's
    values go to DuckDB as one list, converted as a whole: they should share one Python type
    (ints and floats mixed become DOUBLE first, so an int above 2**53 would lose digits; naive
    and aware datetimes mixed are read alike as UTC), as every caller's rows do.
    """
    if not rows:
        return
    select = ", ".join(f"unnest($c{i}::{kind}[])" for i, (_, kind) in enumerate(columns))
    params = {f"c{i}": [row.get(name) for row in rows] for i, (name, _) in enumerate(columns)}
    con.execute(f"INSERT INTO {table} SELECT {select}", params)
