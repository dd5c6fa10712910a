"""Type stub of the C extension ``tracewh.ingest._fastshred`` (see ``_fastshred.c``)."""

from collections.abc import Callable, Iterator
from typing import Any

# (column, kind, rows, nulls, validity bitmap, data, int64 offsets or None); kind:
# 0 int64, 1 float64, 2 string; the buffers are read-only memoryviews owning their bytes
ColumnBuffers = tuple[str, int, int, int, memoryview, memoryview, memoryview | None]

class ArrowChunk:
    """One table's staged rows (Arrow PyCapsule interface: DuckDB and pyarrow read it)."""

    num_rows: int
    column_names: tuple[str, ...]
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...

class Shredder:
    pending: int
    pending_bytes: int
    is_array: bool
    events_end: int | None
    index: int
    skipped_python: int
    fast: int
    def __init__(
        self,
        decimal_type: type,
        gpu_categories: frozenset[str],
        python_category: str,
        skip_python: bool = False,
    ) -> None: ...
    def shred(self, events: Iterator[Any], limit: int, slow: list[tuple[int, Any]]) -> int: ...
    def scan(
        self, read: Callable[[], bytes], limit: int, slow: list[tuple[int, bytes]]
    ) -> int: ...
    def take(self) -> dict[str, list[ColumnBuffers]]: ...
    def take_arrow(self) -> dict[str, ArrowChunk]: ...

def columns() -> dict[str, list[tuple[str, int]]]: ...
def ns_of_text(text: str) -> int | None: ...
def trim() -> bool: ...
def minhash(tokens: list[str], slots: int) -> list[int]: ...
def count(buffer: bytes | bytearray | memoryview, needle: bytes, start: int = 0, /) -> int: ...
