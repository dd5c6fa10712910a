"""The decompressed bytes of a trace file, or of a part of it, with the head and tail kept.

:func:`open_decompressed` opens a plain, gzip or zlib file once (hashing the stored bytes);
:class:`Tee` is the read-only view the parser reads: the whole document, or one part of it
between two event separators (the parts of a file split across processes), remembering the
bytes before the first event (the header) and the last ones (the trailer) for
:mod:`tracewh.ingest.reader`.
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from tracewh.core.errors import TraceFormatError
from tracewh.ingest.files import HashingFile, open_regular
from tracewh.ingest.strings import CAP as STRING_CAP
from tracewh.ingest.strings import StringCapper, count_bytes

_HEAD_CAP = 16 << 20  # header bytes we are willing to keep before the first event
_TAIL_KEEP = 1 << 20  # trailing bytes kept to find the trailer
_CHUNK = 1 << 16



def open_decompressed(path: Path) -> tuple[IO[bytes], HashingFile]:
    """The decompressed document (gzip or plain) and the hashing reader of the file under it."""
    raw = HashingFile(open_regular(path))
    buffered = io.BufferedReader(raw, buffer_size=_CHUNK)
    try:
        if buffered.peek(2)[:2] == b"\x1f\x8b":
            return GzipMembers(buffered), raw  # type: ignore[return-value]
    except BaseException:
        raw.close()
        raise
    return buffered, raw


_GZIP_IN = 1 << 15  # compressed bytes fed to the inflater at a time
_EOF_MESSAGE = "Compressed file ended before the end-of-stream marker was reached"
_TRAILER_ERRORS = (  # the trailer's checks as the inflaters word them, and as gzip does
    ("incorrect data check", "CRC check failed (the member's CRC-32 does not match its data)"),
    ("incorrect length check", "Incorrect length of data produced"),
    ("Incorrect checksum found",  # ISA-L: the trailer's CRC-32 or size, or the header's CRC
     "CRC or size check failed (the member does not match its checksums)"),
)


def _inflater() -> tuple[str, Callable[..., Any], tuple[type[Exception], ...]]:
    """What inflates gzip members: ISA-L's ``decompressobj`` where the ``fast`` extra
    (python-isal) is installed (~3x zlib's rate, the same header and trailer checks),
    else zlib's; its name and the errors it raises."""
    try:
        from isal import isal_zlib
    except ImportError:
        return "zlib", zlib.decompressobj, (zlib.error,)
    isal_error: type[Exception] = isal_zlib.error  # type: ignore[assignment]  # typed an instance
    return "isal", isal_zlib.decompressobj, (zlib.error, isal_error)


#: ``"isal"`` (the ``fast`` extra) or ``"zlib"``: see :func:`_inflater`.
INFLATER, _DECOMPRESSOBJ, _INFLATE_ERRORS = _inflater()


class GzipMembers(io.RawIOBase):
    """The decompressed bytes of a gzip file, as :class:`gzip.GzipFile` reads them, faster.

    The inflater (zlib, or ISA-L with the ``fast`` extra: :data:`INFLATER`) reads each
    member's header and checks its CRC-32 and size itself (``wbits`` 31): ``GzipFile``
    does both in Python around a raw inflate (~0.25 s more per GB of JSON). Like
    ``GzipFile``: members one after the other, zero bytes between or after them skipped,
    anything else after a member or a wrong CRC-32 or size ``BadGzipFile``, a file ending
    inside a member ``EOFError``, damaged data ``zlib.error`` (whichever inflater; zlib
    also refuses a header whose own CRC is wrong or that sets reserved flags, which ``gzip``
    reads past). A read returns at most ``size`` bytes (``read(0)`` none, ``read()`` all), and memory stays bounded (the inflater's output is
    capped, so a highly compressed member never comes out whole). ``decompressobj``:
    another inflater's (tests).
    """

    def __init__(self, inner: IO[bytes], decompressobj: Callable[..., Any] | None = None) -> None:
        self._inner = inner
        self._new = decompressobj or _DECOMPRESSOBJ
        self._zlib = self._new(31)
        self._input = b""  # compressed bytes read and not yet fed (a next member's start)
        self._done = False

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return self.readall()  # RawIOBase's: read() and read(-1) read everything
        if size == 0:
            return b""  # ijson asks read(0) first to learn the stream's type
        want = size
        while not self._done:
            if self._zlib.eof and not self._next_member():
                self._done = True
                break
            data = self._zlib.unconsumed_tail or self._input or self._inner.read(_GZIP_IN)
            self._input = b""
            try:
                out: bytes = self._zlib.decompress(data, want)
            except _INFLATE_ERRORS as exc:  # the trailer's checks in gzip's words
                for says, gzip_says in _TRAILER_ERRORS:
                    if says in str(exc):
                        raise gzip.BadGzipFile(gzip_says) from exc
                if isinstance(exc, zlib.error):
                    raise
                raise zlib.error(str(exc)) from exc  # one error type, whichever inflater
            if out:
                return out
            if not data and not self._zlib.eof:
                raise EOFError(_EOF_MESSAGE)
        return b""

    def readinto(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        return b"".join(iter(lambda: self.read(_CHUNK), b""))

    def _next_member(self) -> bool:
        """After a member: whether another one follows (then zlib is set to read it)."""
        rest = self._zlib.unused_data.lstrip(b"\0")
        while not rest:
            more = self._inner.read(_GZIP_IN)
            if not more:
                return False
            rest = more.lstrip(b"\0")
        while len(rest) < 2 and (more := self._inner.read(_GZIP_IN)):
            rest += more
        if rest[:2] != b"\x1f\x8b":
            raise gzip.BadGzipFile(f"Not a gzipped file ({rest[:2]!r})")
        self._zlib, self._input = self._new(31), rest
        return True

    def close(self) -> None:
        self._inner.close()
        super().close()


# An event separator at the top level of ``traceEvents``: ``}`` ``,`` ``{`` with
# some whitespace. A match found by byte search may also sit inside a string or
# a nested object; the parse of the part that ends there proves it does not.
_SEP = re.compile(rb"\}[ \t\r\n]{0,64},[ \t\r\n]{0,64}\{")
_SEP_MAX = 131  # longest possible match
PART_PREFIX = b'{"traceEvents":['
PART_SUFFIX = b"]}"


_EVENTS_KEY = b'"traceEvents"'


class Tee(io.RawIOBase):
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
        # a key split across two reads is counted once: in the carried bytes and the start
        # of these (too short to hold a whole key either of them)
        keep = len(_EVENTS_KEY) - 1
        carry = self._key_carry + data[:keep]
        self.key_hits += count_bytes(carry, _EVENTS_KEY) + count_bytes(data, _EVENTS_KEY)
        self._key_carry = carry[-keep:] if len(data) < keep else data[-keep:]
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
        """The next bytes: at most ``size`` of them, or (no ``size``) the next chunk as
        decompressed (the C scanner's reads), never more than one chunk."""
        if size == 0:
            return b""
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


