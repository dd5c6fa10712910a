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

from tracewh.core.errors import BackendError, NotKinetoTraceError, TraceFormatError
from tracewh.ingest.files import HashingFile, open_regular
from tracewh.ingest.rows import clip_depth
from tracewh.ingest.strings import CAP as STRING_CAP
from tracewh.ingest.strings import StringCapper

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
    """Hex sha256 and size of a file's bytes as stored (regular files only, see ``open_regular``)."""
    h = hashlib.sha256()
    size = 0
    with open_regular(path) as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _open_decompressed(path: Path) -> tuple[IO[bytes], HashingFile]:
    """The decompressed document (gzip or plain) and the hashing reader of the file under it."""
    raw = HashingFile(open_regular(path))
    buffered = io.BufferedReader(raw, buffer_size=_CHUNK)
    try:
        if buffered.peek(2)[:2] == b"\x1f\x8b":
            return gzip.GzipFile(fileobj=buffered, mode="rb"), raw  # type: ignore[return-value]
    except BaseException:
        raw.close()
        raise
    return buffered, raw


# An event separator at the top level of ``traceEvents``: ``}`` ``,`` ``{`` with
# some whitespace. A match found by byte search may also sit inside a string or
# a nested object; the parse of the part that ends there proves it does not.
_SEP = re.compile(rb"\}[ \t\r\n]{0,64},[ \t\r\n]{0,64}\{")
_SEP_MAX = 131  # longest possible match
PART_PREFIX = b'{"traceEvents":['
PART_SUFFIX = b"]}"


_EVENTS_KEY = b'"traceEvents"'


def duplicate_events_keys(path: Path) -> int:
    """How many top-level ``traceEvents`` keys the document at ``path`` has (a full parse).

    Run only when the bytes ``"traceEvents"`` occur more than once (:attr:`_Tee.key_hits`):
    an event or a value may hold that string; a second top-level key is an error.
    """
    count = 0
    try:
        inner, _ = _open_decompressed(path)
        with inner:
            for prefix, event, value in c_backend().parse(inner, use_float=False):
                if prefix == "" and event == "map_key" and value == "traceEvents":
                    count += 1
    except (OSError, ValueError, EOFError, ijson.JSONError, zlib.error):
        pass  # a damaged document: the parse of the events says what is wrong
    return count


class _Tee(io.RawIOBase):
    """A read-only view of the decompressed bytes [start, stop) that remembers head and tail.

    Without ``start_at``/``stop_at`` it is the whole document. With
    ``start_at``, everything before the first event separator at or after that
    offset is skipped and :data:`PART_PREFIX` is put in front of the next
    event; with ``stop_at``, the stream ends after the ``}`` of the first
    separator at or after that offset, followed by :data:`PART_SUFFIX`. Two
    parts that share a boundary offset find the same separator, since both
    scan the same bytes. ``offset`` counts decompressed bytes read; ``head``
    keeps the first bytes (up to the first event) and ``tail()`` the last ones.
    """

    def __init__(
        self,
        inner: IO[bytes],
        path: Path,
        *,
        start_at: int | None = None,
        stop_at: int | None = None,
        raw: HashingFile | None = None,
        string_cap: int = STRING_CAP,
    ) -> None:
        self._inner = inner
        self._raw_file = raw
        self._path = path
        self.capper = StringCapper(string_cap)
        self.decompressed = 0  # decompressed bytes read (``offset`` counts them after the cap)
        self.head = bytearray()
        self.recording_head = start_at is None
        self._tail: list[bytes] = []
        self._tail_len = 0
        self.offset = 0
        self.start_at = start_at
        self.stop_at = stop_at
        self.start_offset: int | None = 0 if start_at is None else None  # where events begin
        self.cut_offset: int | None = None  # offset of the ``}`` we stopped after
        self.reached_eof = False
        self._out = self._output()
        self._left = b""
        #: how often the bytes ``"traceEvents"`` were read (a second top-level key is found
        #: exactly by :func:`duplicate_events_keys` only when this is more than one)
        self.key_hits = 0
        self._key_carry = b""

    def readable(self) -> bool:
        return True

    def _raw(self) -> bytes:
        """The next decompressed bytes, long strings capped (:mod:`tracewh.ingest.strings`)."""
        while True:
            try:
                got = self._inner.read(_CHUNK)
            except EOFError as exc:
                raise TraceFormatError(
                    self._path, "truncated gzip stream (file ends before the compressed data does)",
                    offset=self.offset,
                ) from exc
            except (gzip.BadGzipFile, zlib.error, OSError) as exc:
                raise TraceFormatError(
                    self._path, f"corrupt gzip data: {exc}", offset=self.offset
                ) from exc
            if not got:
                self.reached_eof = True
                return b""
            self.decompressed += len(got)
            data = self.capper.feed(got)
            if data:
                break
        self.offset += len(data)
        window = self._key_carry + data  # a key split across two reads is counted once
        self.key_hits += window.count(_EVENTS_KEY)
        self._key_carry = window[-(len(_EVENTS_KEY) - 1):]
        if self.recording_head:
            self.head += data
            if len(self.head) > _HEAD_CAP:
                self.recording_head = False
        self._tail.append(data)
        self._tail_len += len(data)
        while self._tail_len - len(self._tail[0]) >= _TAIL_KEEP:
            self._tail_len -= len(self._tail.pop(0))
        return data

    def _output(self) -> Iterator[bytes]:
        buf = b""
        pos = 0  # offset of buf[0]
        if self.start_at is not None:
            scan = self.start_at
            while True:
                chunk = self._raw()
                if not chunk:
                    return  # no separator after start_at: this part is empty
                buf += chunk
                m = _SEP.search(buf, max(scan - pos, 0)) if pos + len(buf) > scan else None
                if m is not None:
                    begin = m.end() - 1
                    buf, pos = buf[begin:], pos + begin
                    self.start_offset = pos
                    break
                drop = min(max(scan - pos, len(buf) - _SEP_MAX, 0), len(buf))
                buf, pos = buf[drop:], pos + drop
                scan = max(scan, pos)
            yield PART_PREFIX
        stop = self.stop_at
        while True:
            if stop is None:
                if buf:
                    yield buf
                pos += len(buf)
                buf = b""
            else:
                m = _SEP.search(buf, max(stop - pos, 0)) if pos + len(buf) > stop else None
                if m is not None:
                    yield buf[: m.start() + 1]
                    yield PART_SUFFIX
                    self.cut_offset = pos + m.start()
                    return
                keep = min(max(stop - pos, len(buf) - _SEP_MAX, 0), len(buf))
                if keep:
                    yield buf[:keep]
                buf, pos = buf[keep:], pos + keep
                stop = max(stop, pos)
            chunk = self._raw()
            if not chunk:
                if buf:
                    yield buf
                return
            buf += chunk

    def read(self, size: int = -1) -> bytes:
        if self._left:
            data, self._left = self._left, b""
        else:
            data = next(self._out, b"")
        if size is not None and 0 < size < len(data):
            data, self._left = data[:size], data[size:]
        return data

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        n = len(data)
        b[:n] = data
        return n

    def tail(self) -> bytes:
        return b"".join(self._tail)

    def file_sha256(self) -> tuple[str, int] | None:
        """sha256 and size of the whole file as read, when this part read it to its end."""
        if self._raw_file is None or not self.reached_eof:
            return None
        self._raw_file.drain()
        return self._raw_file.sha.hexdigest(), self._raw_file.n

    def truncated_strings(self) -> int:
        """Strings cut by the cap within this part's share of the document."""
        lo = self.start_offset or 0
        hi = self.cut_offset if self.cut_offset is not None else self.offset + 1
        return sum(1 for c in self.capper.cuts if lo <= c < hi)

    def close(self) -> None:
        self._inner.close()
        if self._raw_file is not None:
            self._raw_file.close()
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
    trailer_offset: int | None = None  # where the ``]`` closing traceEvents is, if found
    anomalies: dict[str, int] = field(default_factory=dict)  # oddities of header/trailer
    file_sha256: str | None = None  # of the bytes read, when the part read the file to its end
    file_bytes: int = 0


_KINDS = {
    "start_array": "a list", "start_map": "an object", "number": "a number",
    "integer": "a number", "double": "a number", "string": "a string",
    "boolean": "a boolean", "null": "null",
}


def _parse_header(
    path: Path, head: bytes, backend: Any
) -> tuple[dict[str, Any], bool, str | None]:
    """Top-level keys before ``traceEvents``.

    Returns (metadata, whether traceEvents was found, what its value is:
    ``"a list"``, ``"an object"``, ... or None when not in ``head``).
    """
    meta: dict[str, Any] = {}
    if head.lstrip()[:1] != b"{":
        raise NotKinetoTraceError(path, "not a Kineto trace: the document is not a JSON object")
    builder: Any = None
    key = ""
    depth = 0
    found = False
    try:
        for prefix, event, value in backend.parse(io.BytesIO(head), use_float=False):
            if found:
                return meta, True, _KINDS.get(event, event)
            if builder is None:
                if prefix == "" and event == "map_key":
                    if value == "traceEvents":
                        found = True
                        continue
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
    return meta, found, None


_CANDIDATE = re.compile(r"\]\s*([,}])")
_WS = re.compile(r"\s*")


def _members(text: str, pos: int) -> dict[str, Any] | None:
    """Parse ``"k": v, ... }`` from ``pos`` to the end of ``text``; None if it is not that."""
    try:
        return _members_json(text, pos)
    except RecursionError:  # nested too deeply for json: ijson's C parser has no limit
        data = ("{" + text[pos:]).encode("utf-8", "surrogatepass")
        try:
            found = list(c_backend().items(io.BytesIO(data), "", use_float=False))
        except (ijson.JSONError, UnicodeDecodeError, ValueError):
            return None
        return found[0] if len(found) == 1 and isinstance(found[0], dict) else None


def _members_json(text: str, pos: int) -> dict[str, Any] | None:
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
        # the rest is whitespace (a match, not a copy of the rest: this runs for every
        # candidate "]" of the tail, and copying made the trailer search quadratic)
        if pos < n and text[pos] == "}" and _WS.match(text, pos + 1).end() == n:  # type: ignore[union-attr]
            return out
        return None


def _parse_trailer(tail: bytes) -> tuple[dict[str, Any], int | None]:
    """Keys after the ``traceEvents`` array, found in the document's last bytes.

    Returns the keys and how many bytes from the ``]`` that closes
    ``traceEvents`` to the end of the document (None when not found).
    Candidates are the ``]`` of the kept tail, tried in order: the first one
    followed by ``}`` (end of document) or by ``, "key": value, ... }`` closes
    ``traceEvents``. An earlier ``]`` sits inside an event and fails at that
    event's end; a later one would close an array inside the trailer. Each
    attempt stops at its first mismatch, so the scan is linear in practice.
    """
    while tail and 0x80 <= tail[0] < 0xC0:  # start at a character boundary
        tail = tail[1:]
    text = tail.decode("utf-8", errors="replace").rstrip()
    if not text.endswith("}"):
        return {}, None
    trailing_ws = len(tail) - len(tail.rstrip())
    for match in _CANDIDATE.finditer(text):
        # the size is counted only for the candidate that closes traceEvents (counting it
        # for every "]" of the 1 MiB tail made the search quadratic: 3.7 s on a 73 KB trace)
        if match.group(1) == "}":
            if match.end() == len(text):
                return {}, len(text[match.start() :].encode("utf-8")) + trailing_ws
            continue
        found = _members(text, match.end())
        if found is not None and "traceEvents" not in found:  # else: a header-side "]"
            return found, len(text[match.start() :].encode("utf-8")) + trailing_ws
    return {}, None


def open_trace(
    path: Path, *, start_at: int | None = None, stop_at: int | None = None,
    string_cap: int = STRING_CAP,
) -> tuple[TraceStream, _Tee]:
    """Open a trace (or one part of it) for streaming; see :class:`TraceStream`.

    With ``start_at``/``stop_at`` (decompressed offsets), only the events
    between the first event separators found at or after them are read (see
    :class:`_Tee`); a part that does not start at 0 has no header, one that
    stops early has no trailer. Strings longer than ``string_cap`` bytes are cut
    to a prefix before the parser sees them (``truncated_strings`` anomaly).

    Raises
    ------
    BackendError
        ijson's C backend is missing.
    TraceFormatError
        (while iterating) the file is not a readable Kineto trace.
    """
    backend = c_backend()
    try:
        inner, raw = _open_decompressed(path)
    except OSError as exc:
        raise TraceFormatError(path, f"cannot open: {exc.strerror or exc}") from exc
    tee = _Tee(inner, path, start_at=start_at, stop_at=stop_at, raw=raw, string_cap=string_cap)
    stream = TraceStream(path=path, events=iter(()))
    stream.events = _events(path, tee, backend, stream)
    return stream, tee


def _events(path: Path, tee: _Tee, backend: Any, stream: TraceStream) -> Iterator[Any]:
    buffered = io.BufferedReader(tee, buffer_size=_CHUNK)
    # Peek at the first bytes: a top-level array is the bare Chrome "JSON Array Format".
    first = buffered.peek(64)
    if not first.strip():
        if tee.start_at is not None:
            tee.close()
            return  # a part that starts after the last separator: no events
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
    except ijson.JSONError as exc:  # the C backend raises IncompleteJSONError for every error
        message = _clean(exc)
        what = "truncated JSON (the file ends early)" if "premature EOF" in message else "corrupt JSON"
        raise TraceFormatError(
            path, f"{what}: {message}", offset=tee.offset, event_index=n
        ) from exc
    except UnicodeDecodeError as exc:
        raise TraceFormatError(path, f"corrupt JSON: {_undecodable(exc)}", event_index=n) from exc
    except RecursionError as exc:
        raise TraceFormatError(path, "corrupt JSON: nested too deeply", event_index=n) from exc
    except ValueError as exc:
        raise TraceFormatError(
            path, f"corrupt JSON: unreadable value: {_clean(exc)}", event_index=n
        ) from exc
    finally:
        close_stream(stream, tee)
    finish(path, tee, stream, n, is_array=is_array, backend=backend)


def close_stream(stream: TraceStream, tee: _Tee) -> None:
    """Once the events are read (or failed): sizes, cut strings and the file's hash, then close."""
    stream.decompressed_bytes = tee.decompressed
    cut = tee.truncated_strings()
    if cut:
        stream.anomalies["truncated_strings"] = cut
    whole = tee.file_sha256()
    if whole is not None:
        stream.file_sha256, stream.file_bytes = whole
    tee.close()


def finish(
    path: Path, tee: _Tee, stream: TraceStream, n: int, *, is_array: bool, backend: Any = None
) -> None:
    """After the last event: the header and trailer keys into ``stream.metadata``.

    ``n`` is the number of events read, ``is_array`` whether the document is a bare
    array. Raises :class:`NotKinetoTraceError` when the header has no ``traceEvents``.
    """
    if is_array:
        return
    # the first part reads the array's own key; a later part (its prefix is not counted) none
    if tee.key_hits > (1 if tee.start_at is None else 0):
        found = duplicate_events_keys(path)
        if found > 1:  # json and ijson keep one or merge both: neither is right
            raise TraceFormatError(
                path, f"{found} top-level traceEvents arrays (a duplicate key): which holds the "
                "trace is ambiguous, so none is ingested")
    meta: dict[str, Any] = {}
    if tee.start_at is None:
        meta, found, kind = _parse_header(path, bytes(tee.head), backend or c_backend())
        stream.header_keys = list(meta)
        if not found:
            keys = ", ".join(list(meta)[:8]) or "none"
            raise NotKinetoTraceError(
                path, f"not a Kineto trace: no traceEvents array (top-level keys: {keys})"
            )
        if n == 0 and kind is not None and kind != "a list":
            raise TraceFormatError(path, f"traceEvents is not a list (found {kind})")
    trailer: dict[str, Any] = {}
    if n and tee.reached_eof:
        trailer, size = _parse_trailer(tee.tail())
        if size is not None:
            stream.trailer_offset = tee.offset - size
    stream.trailer_keys = list(trailer)
    meta.update(trailer)
    meta, deep = clip_depth(meta)
    if deep:
        stream.anomalies["deep_nesting"] = deep
    stream.metadata = meta


_SPACES = re.compile(r"\s+")
_SURROGATE = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]")
_REASON_CAP = 200


def _printable(text: str) -> str:
    text = _SPACES.sub(" ", text).strip()
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def _clean(exc: Exception) -> str:
    """yajl's message in one line: ``lexical error: ... (near: '<context>')``, capped.

    yajl writes the message, the bytes around the error and a ``(right here)
    ------^`` pointer on three lines; a message with invalid UTF-8 comes as bytes.
    """
    raw = exc.args[0] if exc.args else str(exc)
    text = raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else str(raw)
    first, _, rest = text.strip().partition("\n")
    message = _printable(first).rstrip(".") or type(exc).__name__
    context = _printable(rest.split("(right here)")[0]) if "(right here)" in rest else ""
    if context:
        message += f" (near: '{context[:80]}')"
    if len(message) > _REASON_CAP:
        message = message[: _REASON_CAP - 3] + "..."
    return message


def _undecodable(exc: UnicodeDecodeError) -> str:
    """Why a string could not be decoded, in words."""
    data = exc.object if isinstance(exc.object, bytes) else b""
    lone = _SURROGATE.search(data)
    if lone is not None:
        char = lone.group().decode("utf-8", "surrogatepass")
        return f"a string holds an escaped lone surrogate (\\u{ord(char):04x})"
    return f"invalid UTF-8 in a string ({exc.reason})"
