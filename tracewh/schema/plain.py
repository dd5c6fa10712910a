"""The warehouse schema as plain data, for the writers that must not import pyarrow.

:mod:`tracewh.schema.arrow` declares every table once, as Arrow schemas. An ingest
into a local warehouse writes Parquet with DuckDB and commits with
:mod:`tracewh.storage.deltalog`: it needs each table's DuckDB column types, partition
columns and Delta ``schemaString``, not Arrow. They are derived here from the
Arrow schemas and cached as JSON in the user's temp folder
(``tracewh-<uid>/schema-<hash>.json``, the hash covering ``schema.py`` and this
file), so only the first process after a change of the schema imports pyarrow;
the prepared query catalog (:mod:`tracewh.query.db`) is cached the same way.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["PlainTable", "SchemaInfo", "delta_schema", "duck_type", "info", "tables"]

_SOURCES = (Path(__file__).with_name("arrow.py"), Path(__file__).with_name("evolution.py"), Path(__file__))


@dataclass(frozen=True)
class PlainTable:
    """One table of :data:`tracewh.schema.arrow.TABLES`, without Arrow."""

    name: str
    columns: tuple[tuple[str, str], ...]  # (name, DuckDB type), partition columns included
    partition_by: tuple[str, ...]
    run_child: bool
    doc: str
    schema_string: str  # the Delta schemaString (JSON) of the table's metaData

    def select_list(self, *, partitions: bool = False) -> str:
        """``CAST("c" AS T) AS "c", ...`` of the columns (partition columns only if asked)."""
        out = []
        for name, sql_type in self.columns:
            if name in self.partition_by and not partitions:
                continue
            ident = '"' + name.replace('"', '""') + '"'
            out.append(f"CAST({ident} AS {sql_type}) AS {ident}")
        return ", ".join(out)

    def column_defs(self, *, partitions: bool = False) -> str:
        """``"c" T, ...`` for a ``CREATE TABLE`` of the columns."""
        return ", ".join(
            '"' + name.replace('"', '""') + f'" {sql_type}'
            for name, sql_type in self.columns
            if partitions or name not in self.partition_by
        )


def _delta_type(t: pa.DataType) -> Any:
    """The Delta (Spark) type of an Arrow type, as delta-rs writes it in ``schemaString``."""
    import pyarrow as pa

    simple = {
        pa.string(): "string", pa.large_string(): "string", pa.int64(): "long",
        pa.int32(): "integer", pa.int16(): "short", pa.int8(): "byte",
        pa.float64(): "double", pa.float32(): "float", pa.bool_(): "boolean",
        pa.date32(): "date", pa.binary(): "binary",
    }
    if t in simple:
        return simple[t]
    if pa.types.is_timestamp(t):
        if t.tz is None:
            raise TypeError(f"{t}: timestamp_ntz needs a Delta table feature; not written here")
        return "timestamp"
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"type": "array", "elementType": _delta_type(t.value_type),
                "containsNull": bool(t.value_field.nullable)}
    raise TypeError(f"no Delta type for {t}")


def delta_schema(schema: pa.Schema) -> str:
    """The Delta ``schemaString`` of an Arrow schema (field order, nullability, no metadata)."""
    fields = [
        {"name": f.name, "type": _delta_type(f.type), "nullable": bool(f.nullable), "metadata": {}}
        for f in schema
    ]
    return json.dumps({"type": "struct", "fields": fields}, separators=(",", ":"))


def duck_type(t: pa.DataType) -> str:
    """The DuckDB type of an Arrow type of the schema."""
    import pyarrow as pa

    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "VARCHAR"
    if pa.types.is_int64(t):
        return "BIGINT"
    if pa.types.is_int32(t):
        return "INTEGER"
    if pa.types.is_float64(t):
        return "DOUBLE"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_date32(t):
        return "DATE"
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ" if t.tz else "TIMESTAMP"
    if pa.types.is_list(t):
        return f"{duck_type(t.value_type)}[]"
    raise TypeError(f"no DuckDB type for {t}")


def _build() -> dict[str, Any]:
    from tracewh.schema.arrow import ADDED_COLUMNS, SCHEMA_KEY, TABLES

    return {"schema_key": SCHEMA_KEY, "added_columns": {k: list(v) for k, v in ADDED_COLUMNS.items()},
            "tables": _build_tables(TABLES)}


def _build_tables(specs: Any) -> dict[str, dict[str, Any]]:
    return {
        name: {
            "columns": [[f.name, duck_type(f.type)] for f in spec.schema],
            "partition_by": list(spec.partition_by),
            "run_child": spec.is_run_child,
            "doc": spec.doc,
            "schema_string": delta_schema(spec.schema),
        }
        for name, spec in specs.items()
    }


def _cache_path() -> Path | None:
    """Where the cache lives: the user's private cache folder (:mod:`tracewh.core.cache`), or None.

    The cached types decide what an ingest writes: like the prepared catalog, the cache
    lives only in a folder this user alone can write.
    """
    from tracewh.core.cache import cache_folder

    folder = cache_folder()
    if folder is None:
        return None
    h = hashlib.sha256()
    for source in _SOURCES:
        h.update(source.read_bytes())
    return folder / f"schema-{h.hexdigest()[:16]}.json"


@dataclass(frozen=True)
class SchemaInfo:
    """The plain schema: its tables, :data:`~tracewh.schema.arrow.SCHEMA_KEY` and added columns."""

    tables: dict[str, PlainTable]
    schema_key: str
    added_columns: dict[str, tuple[str, ...]]


def info() -> SchemaInfo:
    """The plain schema.

    Derived from :mod:`tracewh.schema.arrow` where that is imported already (so what a
    process declares, or a test patches in, is what is written), else read from the
    JSON cache (built, importing the schema, on first use). A module another thread is
    still importing counts as not imported (its names may not be defined yet).
    """
    schema = sys.modules.get("tracewh.schema.arrow")
    if schema is None or getattr(getattr(schema, "__spec__", None), "_initializing", False):
        return _cached()
    key = (schema.SCHEMA_KEY, tuple((n, id(t)) for n, t in schema.TABLES.items()),
           tuple((n, tuple(c)) for n, c in schema.ADDED_COLUMNS.items()))
    return _derived(key)


@functools.lru_cache(maxsize=4)
def _derived(key: Any) -> SchemaInfo:  # key: what of tracewh.schema.arrow the result depends on
    return _info(_build())


@functools.lru_cache(maxsize=1)
def _cached() -> SchemaInfo:
    from tracewh.core.cache import own_file, write_private

    path = _cache_path()
    data: Any = None
    if path is not None and own_file(path):
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            data = None
    if not isinstance(data, dict) or "tables" not in data:
        data = _build()
        if path is not None:  # best effort: a cache not written only costs the next process
            with contextlib.suppress(OSError):
                write_private(path, json.dumps(data).encode())
    return _info(data)


def _info(data: dict[str, Any]) -> SchemaInfo:
    return SchemaInfo(
        tables={
            name: PlainTable(
                name=name,
                columns=tuple((str(c), str(t)) for c, t in d["columns"]),
                partition_by=tuple(d["partition_by"]),
                run_child=bool(d["run_child"]),
                doc=str(d["doc"]),
                schema_string=str(d["schema_string"]),
            )
            for name, d in data["tables"].items()
        },
        schema_key=str(data["schema_key"]),
        added_columns={str(k): tuple(v) for k, v in data["added_columns"].items()},
    )


def tables() -> dict[str, PlainTable]:
    """Every table of the schema, in schema order."""
    return info().tables
