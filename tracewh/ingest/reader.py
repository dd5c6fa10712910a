"""Stream a Kineto trace: events one by one, plus its header and trailer keys.

One decompression pass feeds ijson's C backend (``yajl2_c``), which yields the
elements of ``traceEvents`` one at a time. The same pass records the bytes
before the first event (the header) and the last bytes of the document (the
trailer), which are parsed once the events are exhausted, so keys written
before *and* after ``traceEvents`` (``traceName``, ``distributedInfo``,
``baseTimeNanoseconds``...) are both captured without reading the file twice.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import ijson

from tracewh.core.errors import BackendError, NotKinetoTraceError, TraceFormatError
from tracewh.ingest.decompress import Tee, open_decompressed
from tracewh.ingest.files import open_regular
from tracewh.ingest.rows import clip_depth
from tracewh.ingest.strings import CAP as STRING_CAP

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


def duplicate_events_keys(path: Path) -> int:
    """How many top-level ``traceEvents`` keys the document at ``path`` has (a full parse).

    Run only when the bytes ``"traceEvents"`` occur more than once (:attr:`~tracewh.ingest.decompress.Tee.key_hits`):
    an event or a value may hold that string; a second top-level key is an error.
    """
    count = 0
    try:
        inner, _ = open_decompressed(path)
        with inner:
            for prefix, event, value in c_backend().parse(inner, use_float=False):
                if prefix == "" and event == "map_key" and value == "traceEvents":
                    count += 1
    except (OSError, ValueError, EOFError, ijson.JSONError, zlib.error):
        pass  # a damaged document: the parse of the events says what is wrong
    return count


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


#: One decoder for every candidate of the trailer search (it holds no state; making one per
#: candidate was ~5 ms of a small trace's ingest: thousands of candidates in its last MiB).
_DECODER = json.JSONDecoder(parse_float=Decimal)


def _members_json(text: str, pos: int) -> dict[str, Any] | None:
    decoder = _DECODER
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


def _trailer_at(tail: bytes, at: int) -> tuple[dict[str, Any], int] | None:
    """The keys after the ``]`` at ``tail[at]`` (known to close ``traceEvents``) and the
    bytes from it to the end, as :func:`_parse_trailer` finds them; None when ``at`` is
    not such a ``]`` of the tail (the search then runs)."""
    if not 0 <= at < len(tail) or tail[at : at + 1] != b"]":
        return None
    text = tail[at + 1 :].decode("utf-8", errors="replace")
    pos = _WS.match(text).end()  # type: ignore[union-attr]
    if pos >= len(text):
        return None
    if text[pos] == "}":
        if text[pos + 1 :].strip():
            return None
        return {}, len(tail) - at
    if text[pos] != ",":
        return None
    found = _members(text.rstrip(), pos + 1)
    if found is None or "traceEvents" in found:
        return None
    return found, len(tail) - at


def open_trace(
    path: Path, *, start_at: int | None = None, stop_at: int | None = None,
    string_cap: int = STRING_CAP,
) -> tuple[TraceStream, Tee]:
    """Open a trace (or one part of it) for streaming; see :class:`TraceStream`.

    With ``start_at``/``stop_at`` (decompressed offsets), only the events
    between the first event separators found at or after them are read (see
    :class:`Tee`); a part that does not start at 0 has no header, one that
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
        inner, raw = open_decompressed(path)
    except OSError as exc:
        raise TraceFormatError(path, f"cannot open: {exc.strerror or exc}") from exc
    tee = Tee(inner, path, start_at=start_at, stop_at=stop_at, raw=raw, string_cap=string_cap)
    stream = TraceStream(path=path, events=iter(()))
    stream.events = _events(path, tee, backend, stream)
    return stream, tee


def _events(path: Path, tee: Tee, backend: Any, stream: TraceStream) -> Iterator[Any]:
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


def close_stream(stream: TraceStream, tee: Tee) -> None:
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
    path: Path, tee: Tee, stream: TraceStream, n: int, *, is_array: bool, backend: Any = None,
    events_end: int | None = None,
) -> None:
    """After the last event: the header and trailer keys into ``stream.metadata``.

    ``n`` is the number of events read, ``is_array`` whether the document is a bare
    array, ``events_end`` (from the direct scanner, for a whole document) the offset of
    the ``]`` closing ``traceEvents``: the trailer is parsed from there, without the
    search of :func:`_parse_trailer`. Raises :class:`NotKinetoTraceError` when the
    header has no ``traceEvents``.
    """
    if is_array:
        return
    # every part counts the array's own key: a later part decompresses (and counts) the
    # bytes before its start too, the header among them; so only a second occurrence in
    # this part's bytes asks for the full parse (a later part took that parse for its own
    # header's key: a second full parse of the file, ~30 s of a 1 GB split ingest)
    if tee.key_hits > 1:
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
        tail = tee.tail()
        known = None
        if events_end is not None and tee.start_at is None and tee.stop_at is None:
            known = _trailer_at(tail, events_end - (tee.offset - len(tail)))
        trailer, size = known if known is not None else _parse_trailer(tail)
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
