"""Type stub of the C extension ``tracewh.ingest._fastshred`` (see ``_fastshred.c``)."""

from collections.abc import Iterator
from typing import Any

# (column, kind, rows, nulls, validity bitmap, data, int64 offsets or None); kind:
# 0 int64, 1 float64, 2 string
ColumnBuffers = tuple[str, int, int, int, bytes, bytes, bytes | None]

class Shredder:
    pending: int
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
    def take(self) -> dict[str, list[ColumnBuffers]]: ...

def columns() -> dict[str, list[tuple[str, int]]]: ...
def ns_of_text(text: str) -> int | None: ...
def trim() -> bool: ...
