"""How the schema grew: tables and columns added after warehouses were first written.

A warehouse written by an older version lacks them; :meth:`tracewh.storage.store.Store.require`
brings it up to date. Declared apart from the Arrow schemas (:mod:`tracewh.schema.arrow`,
which re-exports these names) so that ``SCHEMA_KEY`` needs no pyarrow.
"""

from __future__ import annotations

import hashlib
import json

__all__ = ["ADDED_COLUMNS", "ADDED_TABLES", "EVOLVED_PROPERTY", "SCHEMA_KEY"]

#: Tables added after warehouses were first written: one written before gets them (empty)
#: the next time it is opened (:meth:`tracewh.storage.store.Store.require`).
ADDED_TABLES: tuple[str, ...] = (
    "flow_args", "module_spans", "fingerprints", "annotation_spans", "graph_nodes", "collectives",
    "run_series",
)

#: Columns added to existing tables after warehouses were first written (append-only): a
#: table written before lacks them in its files. :meth:`tracewh.storage.store.Store.create` adds them
#: to the table's Delta schema (nullable) and marks the table (``EVOLVED_PROPERTY``); readers
#: then read its files by column name, old files giving NULL (:mod:`tracewh.query.db`).
ADDED_COLUMNS: dict[str, tuple[str, ...]] = {
    "gpu_ops": ("annotation_path", "launch_kind", "graph_position"),
    "runs": ("step_marker", "kind"),
}

#: Delta table property set on a table whose schema got :data:`ADDED_COLUMNS`.
EVOLVED_PROPERTY = "tracewh.columns_added"

#: What a warehouse must have for this schema (its added tables and columns), hashed: a
#: warehouse whose schema marker (``<root>/_schema.json``) has another key is brought up to
#: date by :meth:`tracewh.storage.store.Store.require` (the prepared SQL catalog stores this key).
SCHEMA_KEY = hashlib.sha256(
    json.dumps([ADDED_TABLES, sorted((t, list(c)) for t, c in ADDED_COLUMNS.items())]).encode()
).hexdigest()[:16]
