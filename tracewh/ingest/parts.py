"""Stage a whole trace, in one part or in several processes in parallel.

Splitting one file: every part decompresses the file from its start
(decompression is an order of magnitude faster than parsing) and parses only
its share. Part ``k`` starts after the first event separator (``}`` ``,`` ``{``)
found at or after its cut and stops after the first one found at or after the
next cut (``size`` split evenly, except that part 0, parsed in this process
while the others start, gets a slightly larger share); the two parts sharing a
boundary find the same separator because they scan the same bytes. A byte search may find a
separator inside a string or a nested object; the part that ends there then
fails to parse (its document ``... }]}`` is invalid), and so does a cut in the
header or trailer (checked against where ``traceEvents`` ends). On any failure
the whole file is staged again in one part, so errors are always reported as
the plain sequential parse reports them. ``size`` comes from the gzip trailer
(ISIZE, the size modulo 2**32) or the file size; when unsure, no split.
"""

from __future__ import annotations

import itertools
import shutil
import struct
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tracewh.core.errors import TraceFormatError
from tracewh.ingest import fast
from tracewh.ingest.decompress import open_decompressed
from tracewh.ingest.fast import KeptWriter
from tracewh.ingest.files import open_regular
from tracewh.ingest.schemafiles import copy_schema_files
from tracewh.ingest.shred import (
    PartResult,
    StageConnections,
    Stager,
    stage_part,
)
from tracewh.ingest.workers import worker_pool

#: Files smaller than this (decompressed) are never split. With the direct scanner one
#: process stages ~75 MB of JSON per CPU-second (a 90 MB pretty-printed real trace: 1.2 s
#: of CPU), and a second process costs ~0.5 s of CPU to start (Python, DuckDB, pyarrow)
#: plus decompressing the bytes it skips: below ~100 MB a split only adds that.
MIN_SPLIT_BYTES = 128 << 20
#: The first part's extra share of a split file: a fraction (the other part decompresses
#: the bytes before its start only to skip them, at ~6-7x the scan's rate), plus bytes for
#: the other process's start (~0.5 s, ~40 MB of scanning shared between the two). From
#: the balance x / r = t0 + x / r_gz + (size - x) / r with r ~ 75 MB/s, r_gz ~ 500 MB/s and
#: t0 ~ 0.5 s (CPU rates measured on this machine, see docs/performance.md): 0.56 of a 1 GB trace,
#: 0.62 of 250 MB.
SKEW = 0.04
SKEW_BYTES = 20 << 20


@dataclass
class Staged:
    """A staged trace: part databases with their event-index offsets."""

    parts: list[tuple[str, int]]  # (folder of its staged Parquet files, offset of its first event)
    events: int
    anomalies: Counter[str] = field(default_factory=Counter)
    metadata: dict[str, Any] = field(default_factory=dict)
    decompressed_bytes: int = 0
    file_sha256: str | None = None  # of the bytes the parse read, when one part read them all
    file_bytes: int = 0
    #: the one part's chunks held in memory in place of its folder's files (see
    #: ``shred.PartResult.held``); :func:`write_held` writes them when files are needed
    held: fast.Held | None = None


def decompressed_size(path: Path) -> int | None:
    """Size of the decompressed document, or None when it cannot be known cheaply."""
    with open_regular(path) as f:
        magic = f.read(2)
        if magic != b"\x1f\x8b":
            return path.stat().st_size
        size = f.seek(0, 2)
        if size < 18:
            return None
        f.seek(size - 4)
        isize = int(struct.unpack("<I", f.read(4))[0])
    # ISIZE is the size modulo 2**32: a larger document only makes the parts unequal
    # (every cut still lies in the document, or the last part ends at EOF); a
    # value below the compressed size means it wrapped: do not guess.
    return isize if isize >= size else None


def _splittable(path: Path) -> bool:
    """Whether the document is an object (the only layout parts know how to cut)."""
    try:
        inner, raw = open_decompressed(path)
    except (OSError, TraceFormatError):
        return False
    try:
        return inner.read(4096).lstrip()[:1] == b"{"
    except (OSError, EOFError, zlib.error):  # damaged: the sequential parse says what is wrong
        return False
    finally:
        inner.close()
        raw.close()


def _boundaries(path: Path, parts: int, min_bytes: int) -> list[int] | None:
    if parts <= 1:
        return None
    size = decompressed_size(path)
    if size is None or size < max(min_bytes, 1) or not _splittable(path):
        return None
    # part 0 is parsed in this process while the others start a process and decompress
    # the bytes before their start only to skip them: give it a larger share
    # (documents below MIN_SPLIT_BYTES are only split when a caller lowers the minimum,
    # as tests do: even cuts there, so a test can place a cut exactly)
    skew = SKEW + SKEW_BYTES / size if size >= MIN_SPLIT_BYTES else 0.0
    first = min(1 / parts + skew, 1.5 / parts)
    rest = (1 - first) / (parts - 1)
    return [int(size * (first + rest * (k - 1))) for k in range(1, parts)]


def _stage_worker(kwargs: dict[str, Any]) -> PartResult:
    """Process-pool entry: stage one part; errors come back as text, never raised."""
    try:
        return stage_part(**kwargs)
    except Exception as exc:  # any failure means: fall back to the sequential parse
        return PartResult(part=kwargs["part"], db="", error=f"{type(exc).__name__}: {exc}")


def _consistent(results: list[PartResult], cuts: list[int]) -> bool:
    """Every part parsed, and every cut lies inside ``traceEvents``."""
    if any(r.error for r in results):
        return False
    last = next((r for r in results if r.reached_eof), None)
    if last is None or results[0].events == 0:
        return False
    for r, nxt in itertools.pairwise(results):
        if r.cut_offset is None:
            # stopped at EOF: every later part must be empty
            return all(x.events == 0 for x in results[r.part + 1 :])
        if last.trailer_offset is not None and r.cut_offset >= last.trailer_offset:
            return False
        if nxt.start_offset is None or not 0 < nxt.start_offset - r.cut_offset < 256:
            return False  # the next part did not start at the separator this one stopped at
    return True


def stage_file(
    path: Path,
    folder: Path,
    *,
    parts: int = 1,
    skip_python: bool = False,
    memory_limit: str = "128MB",
    min_split_bytes: int = MIN_SPLIT_BYTES,
    stager: Stager,
    connections: StageConnections | None = None,
) -> Staged:
    """Stage ``path`` into ``folder`` with ``stager`` (see the module docstring).

    Raises :class:`~tracewh.core.errors.TraceFormatError` for an unreadable trace.
    ``connections``: a staging connection kept between the files of a batch (one part).
    """
    cuts = _boundaries(path, parts, min_split_bytes)
    if cuts is not None:
        staged = _stage_parallel(path, folder, cuts, skip_python, memory_limit, stager)
        if staged is not None:
            return staged
    seq = folder / "seq"
    seq.mkdir()
    r = stage_part(
        path, seq, stager=stager, skip_python=skip_python, memory_limit=memory_limit,
        connections=connections,
    )
    return Staged(
        parts=[(r.db, 0)],
        events=r.events,
        anomalies=Counter(r.anomalies),
        metadata=r.metadata,
        decompressed_bytes=r.decompressed_bytes,
        file_sha256=r.file_sha256,
        file_bytes=r.file_bytes,
        held=r.held,
    )


def write_held(staged: Staged, kept: KeptWriter | None = None) -> None:
    """Write a held part's chunks into its folder (as the staging writer does), and the
    schema files of the tables it has none of: from then on it is read from files."""
    if staged.held is None:
        return
    folder = Path(staged.parts[0][0])
    fast.write_held(folder, staged.held, kept)
    copy_schema_files(folder)
    staged.held = None


def _stage_parallel(
    path: Path, folder: Path, cuts: list[int], skip_python: bool, memory_limit: str,
    stager: Stager,
) -> Staged | None:
    n = len(cuts) + 1
    bounds = [None, *cuts, None]
    jobs: list[dict[str, Any]] = []
    for k in range(n):
        sub = folder / f"p{k}"
        sub.mkdir()
        jobs.append(
            dict(path=path, folder=sub, part=k, start_at=bounds[k], stop_at=bounds[k + 1],
                 skip_python=skip_python, memory_limit=memory_limit, stager=stager)
        )
    with worker_pool(n - 1) as pool:  # killed, not awaited, when this process stops early
        futures = [pool.submit(_stage_worker, job) for job in jobs[1:]]
        first = _stage_worker(jobs[0])  # this process parses the first part meanwhile
        try:
            results = [first, *(f.result() for f in futures)]
        except Exception:  # a worker died (killed, out of memory): parse sequentially
            results = []
    if not results or not _consistent(results, cuts):
        for k in range(n):
            shutil.rmtree(folder / f"p{k}", ignore_errors=True)
        return None
    offsets, total = [], 0
    anomalies: Counter[str] = Counter()
    for r in results:
        offsets.append((r.db, total))
        total += r.events
        anomalies.update(r.anomalies)
    meta = dict(results[0].metadata)
    last = next(r for r in results if r.reached_eof)
    meta.update(last.metadata)
    return Staged(
        parts=offsets, events=total, anomalies=anomalies, metadata=meta,
        decompressed_bytes=last.decompressed_bytes,
        file_sha256=last.file_sha256, file_bytes=last.file_bytes,
    )
