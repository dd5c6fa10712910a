"""Stream a Kineto trace: events one by one, plus its header and trailer keys.

One decompression pass feeds ijson's C backend (``yajl2_c``), which yields the
elements of ``traceEvents`` one at a time. The same pass records the bytes
before the first event (the header) and the last bytes of the document (the
trailer), which are parsed once the events are exhausted, so keys written
before *and* after ``traceEvents`` (``traceName``, ``distributedInfo``,
``baseTimeNanoseconds``...) are both captured without reading the file twice.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

import ijson

from tracewh.errors import BackendError, NotKinetoTraceError, TraceFormatError

_HEAD_CAP = 16 << 20  # header bytes we are willing to keep before the first event
_TAIL_KEEP = 1 << 20  # trailing bytes kept to find the trailer
_CHUNK = 1 << 16


def c_backend() -> Any:
    """ijson's C backend; :class:`BackendError` when only pure Python is available."""
    try:
        return ijson.get_backend("yajl2_c")
    except Exception as exc:  # ImportError or ijson's own error types
        raise BackendError(
            "ijson's C backend (yajl2_c) is not available: reinstall ijson from a wheel "
            "(pip install --force-reinstall ijson); the pure-Python parser is ~30x slower"
        ) from exc


def sha256_file(path: Path) -> tuple[str, int]:
    """Hex sha256 and size of a file's bytes as stored."""
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _open_decompressed(path: Path) -> IO[bytes]:
    with path.open("rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")  # closes its file when closed (GzipFile(fileobj=) won't)
    return path.open("rb")


class _Tee(io.RawIOBase):
    """A read-only stream that remembers its head (until told) and its tail."""

    def __init__(self, inner: IO[bytes], path: Path) -> None:
        self._inner = inner
        self._path = path
        self.head = bytearray()
        self.recording_head = True
        self._tail: list[bytes] = []
        self._tail_len = 0
        self.offset = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        try:
            data = self._inner.read(size if size and size > 0 else _CHUNK)
        except EOFError as exc:
            raise TraceFormatError(
                self._path, "truncated gzip stream (file ends before the compressed data does)",
                offset=self.offset,
            ) from exc
        except (gzip.BadGzipFile, zlib.error, OSError) as exc:
            raise TraceFormatError(
                self._path, f"corrupt gzip data: {exc}", offset=self.offset
            ) from exc
        if not data:
            return b""
        self.offset += len(data)
        if self.recording_head:
            self.head += data
            if len(self.head) > _HEAD_CAP:
                self.recording_head = False
        self._tail.append(data)
        self._tail_len += len(data)
        while self._tail_len - len(self._tail[0]) >= _TAIL_KEEP:
            self._tail_len -= len(self._tail.pop(0))
        return data

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        n = len(data)
        b[:n] = data
        return n

    def tail(self) -> bytes:
        return b"".join(self._tail)

    def close(self) -> None:
        self._inner.close()
        super().close()


@dataclass
class TraceStream:
    """The result of :func:`open_trace`: iterate :attr:`events`, then read :attr:`metadata`.

    ``metadata`` (header and trailer keys, ``traceEvents`` excluded) is complete
    only after ``events`` has been exhausted.
    """

    path: Path
    events: Iterator[Any]
    metadata: dict[str, Any] = field(default_factory=dict)
    header_keys: list[str] = field(default_factory=list)
    trailer_keys: list[str] = field(default_factory=list)
    decompressed_bytes: int = 0


def _parse_header(path: Path, head: bytes, backend: Any) -> tuple[dict[str, Any], bool]:
    """Top-level keys before ``traceEvents``: (metadata, whether traceEvents was found)."""
    meta: dict[str, Any] = {}
    if head.lstrip()[:1] != b"{":
        raise NotKinetoTraceError(path, "not a Kineto trace: the document is not a JSON object")
    builder: Any = None
    key = ""
    depth = 0
    try:
        for prefix, event, value in backend.parse(io.BytesIO(head), use_float=False):
            if builder is None:
                if prefix == "" and event == "map_key":
                    if value == "traceEvents":
                        return meta, True
                    key = value
                    builder = ijson.ObjectBuilder()
                continue
            builder.event(event, value)
            if event in ("start_map", "start_array"):
                depth += 1
            elif event in ("end_map", "end_array"):
                depth -= 1
            if depth == 0 and event != "map_key":
                meta[key] = builder.value
                builder = None
    except ijson.JSONError:
        pass
    return meta, False


_CANDIDATE = re.compile(r"\]\s*([,}])")
_WS = re.compile(r"\s*")


def _members(text: str, pos: int) -> dict[str, Any] | None:
    """Parse ``"k": v, ... }`` from ``pos`` to the end of ``text``; None if it is not that."""
    decoder = json.JSONDecoder(parse_float=Decimal)
    out: dict[str, Any] = {}
    n = len(text)
    while True:
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= n or text[pos] != '"':
            return None
        try:
            key, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return None
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if pos >= n or text[pos] != ":":
            return None
        pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
        try:
            value, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return None
        out[key] = value
        pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
        if pos < n and text[pos] == ",":
            pos += 1
            continue
        if pos < n and text[pos] == "}" and not text[pos + 1 :].strip():
            return out
        return None


def _parse_trailer(tail: bytes) -> dict[str, Any]:
    """Keys after the ``traceEvents`` array, found in the document's last bytes.

    Candidates are the ``]`` of the kept tail, tried in order: the first one
    followed by ``}`` (end of document) or by ``, "key": value, ... }`` closes
    ``traceEvents``. An earlier ``]`` sits inside an event and fails at that
    event's end; a later one would close an array inside the trailer. Each
    attempt stops at its first mismatch, so the scan is linear in practice.
    """
    text = tail.decode("utf-8", errors="replace").rstrip()
    if not text.endswith("}"):
        return {}
    for match in _CANDIDATE.finditer(text):
        if match.group(1) == "}":
            if match.end() == len(text):
                return {}
            continue
        found = _members(text, match.end())
        if found is not None and "traceEvents" not in found:  # else: a header-side "]"
            return found
    return {}


def open_trace(path: Path) -> tuple[TraceStream, _Tee]:
    """Open a trace for streaming; see :class:`TraceStream`.

    Raises
    ------
    BackendError
        ijson's C backend is missing.
    TraceFormatError
        (while iterating) the file is not a readable Kineto trace.
    """
    backend = c_backend()
    try:
        inner = _open_decompressed(path)
    except OSError as exc:
        raise TraceFormatError(path, f"cannot open: {exc.strerror or exc}") from exc
    tee = _Tee(inner, path)
    stream = TraceStream(path=path, events=iter(()))
    stream.events = _events(path, tee, backend, stream)
    return stream, tee


def _events(path: Path, tee: _Tee, backend: Any, stream: TraceStream) -> Iterator[Any]:
    buffered = io.BufferedReader(tee, buffer_size=_CHUNK)
    # Peek at the first bytes: a top-level array is the bare Chrome "JSON Array Format".
    first = buffered.peek(64)
    if not first.strip():
        if tee.offset == 0:
            raise TraceFormatError(path, "empty file")
    is_array = first.lstrip()[:1] == b"["
    prefix = "item" if is_array else "traceEvents.item"
    n = 0
    try:
        for item in backend.items(buffered, prefix, use_float=False):
            if n == 0 and tee.recording_head:
                tee.recording_head = False
            n += 1
            yield item
    except TraceFormatError:
        raise
    except ijson.IncompleteJSONError as exc:
        raise TraceFormatError(
            path, f"truncated or incomplete JSON: {_clean(exc)}", offset=tee.offset, event_index=n
        ) from exc
    except ijson.JSONError as exc:
        raise TraceFormatError(
            path, f"corrupt JSON: {_clean(exc)}", offset=tee.offset, event_index=n
        ) from exc
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, f"invalid UTF-8: {exc.reason}", event_index=n) from exc
    except (ValueError, RecursionError) as exc:
        raise TraceFormatError(path, f"unreadable JSON value: {exc}", event_index=n) from exc
    finally:
        stream.decompressed_bytes = tee.offset
        tee.close()
    if is_array:
        return
    meta, found = _parse_header(path, bytes(tee.head), backend)
    stream.header_keys = list(meta)
    if not found:
        keys = ", ".join(list(meta)[:8]) or "none"
        raise NotKinetoTraceError(
            path, f"not a Kineto trace: no traceEvents array (top-level keys: {keys})"
        )
    trailer = _parse_trailer(tee.tail()) if n else {}
    stream.trailer_keys = list(trailer)
    meta.update(trailer)
    stream.metadata = meta


def _clean(exc: Exception) -> str:
    text = str(exc).strip().replace("\n", " ")
    return text[:300]
