"""Cap very long JSON strings in the byte stream, before the parser's buffers see them.

yajl (ijson's C backend) keeps a string that spans its input buffers in one
growing buffer and scans it again with every new chunk: a 200 MB string in
``args`` took 169 s and 2.3 GB. :class:`StringCapper` sits between the
decompressor and the parser. It keeps about the first :data:`CAP` bytes of
every string (of its JSON text between the quotes, escapes included) and drops
the rest, so the parse stays linear in time and bounded in memory; the reader
records each cut as a ``truncated_strings`` anomaly.

It tracks only what it must: whether the stream is inside a string (a quote not
escaped by a backslash opens or closes one) and how long the current string is.
Each chunk costs a few C-speed ``bytes`` operations: escape pairs are masked
with ``bytes.replace`` (only in chunks holding a backslash), quotes are counted
(:func:`count_bytes`: the C extension's SSE2 count where it is built) and found
with ``find``/``rfind``. Only the piece where a string is cut is
walked byte by byte, to put the cut where it splits no escape sequence
(``\\n``, ``\\u00e9``), no surrogate pair written as two escapes and no UTF-8
character: the document stays valid JSON, and the kept prefix is at most a few
bytes longer than the cap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tracewh.ingest.fast import native

#: Bytes of JSON text kept of each string (between its quotes).
CAP = 1 << 20


_NATIVE = native()

#: ``count_bytes(data, needle, start=0)`` is ``data.count(needle, start)``: the C
#: extension's (sixteen bytes at a time, ~4x faster) where it is built, else
#: ``bytes.count`` (the same numbers). Every decompressed byte of a trace passes two
#: counts (quotes here, keys in :mod:`tracewh.ingest.decompress`).
count_bytes: Callable[..., int] = (
    _NATIVE.count if _NATIVE is not None else lambda data, needle, start=0: data.count(needle, start)
)

_BACKSLASH, _U = 0x5C, 0x75


def _mask(piece: bytes, escaped_first: bool) -> tuple[bytes, bool]:
    """``piece`` with escaped backslashes and escaped quotes (both bytes of each) set to NUL.

    What is left of the mask tells where strings open and close: a ``"`` in it
    is an unescaped quote, and a backslash in it starts an escape other than
    ``\\\\`` or ``\\"``. ``escaped_first``: the piece's first byte ends an escape
    begun in the previous piece. Returns the mask (positions kept) and whether the
    piece ends with an unpaired backslash. ``bytes.replace`` pairs backslashes
    from the left, as JSON does, at memory speed (a regex took 0.4 µs per escape).
    """
    if escaped_first:
        rest, escaped_last = _mask(piece[1:], False)
        return b"\0" + rest, escaped_last
    if b"\\" not in piece:
        return piece, False
    masked = piece.replace(b"\\\\", b"\0\0").replace(b'\\"', b"\0\0")
    return masked, masked.endswith(b"\\")


def _is_high(digits: str) -> bool:
    """Whether four hex digits are a UTF-16 high surrogate (D800-DBFF)."""
    return len(digits) == 4 and digits[:1] in "dD" and digits[1:2] in "89abAB"


@dataclass
class _Escape:
    """Where a string stands at a byte boundary, as far as cutting there is concerned."""

    esc: bool = False  # the next byte is the one after a backslash
    digits: str | None = None  # hex digits read so far of a \\u escape (None: not in one)
    high: bool = False  # the last thing read was a high surrogate escape: its low half follows

    @property
    def clean(self) -> bool:
        return not self.esc and self.digits is None and not self.high


def _walk(seg: bytes, state: _Escape, stop_at: int | None) -> tuple[int | None, _Escape]:
    """Walk ``seg`` from ``state``; the first clean boundary >= ``stop_at`` (None: walk all).

    A boundary is clean when no escape is open, no high surrogate waits for its
    low half, and the next byte does not continue a UTF-8 character. Returns
    (that boundary or None, the state at the end of the walk).
    """
    st = _Escape(state.esc, state.digits, state.high)
    n = len(seg)
    for i in range(n + 1):
        if stop_at is not None and stop_at <= i < n and st.clean and seg[i] & 0xC0 != 0x80:
            return i, st
        if i == n:
            break
        b = seg[i]
        if st.digits is not None:
            st.digits += chr(b)
            if len(st.digits) == 4:
                st.high, st.digits = _is_high(st.digits), None
        elif st.esc:
            st.esc = False
            if b == _U:
                st.digits = ""
            else:
                st.high = False
        elif b == _BACKSLASH:
            st.esc = True
        else:
            st.high = False  # a character after a high surrogate: lone (invalid), not our concern
    return None, st


class StringCapper:
    """Feed decompressed chunks, get them back with every long string cut to about ``cap`` bytes.

    Parameters
    ----------
    cap
        Bytes of JSON text kept of each string (between its quotes).

    Attributes
    ----------
    cuts
        Offsets in the output stream at which a string was cut (one per cut string).
    dropped
        Bytes dropped.
    """

    def __init__(self, cap: int = CAP) -> None:
        if cap < 16:
            raise ValueError("cap must be at least 16 bytes")
        self.cap = cap
        self.cuts: list[int] = []
        self.dropped = 0
        self._out = 0  # bytes returned so far
        self._in_string = False
        self._run = 0  # bytes of the current string returned so far
        self._dropping = False  # the current string was cut: drop up to its closing quote
        self._escaped_first = False  # the next piece starts with the byte after a backslash
        self._state = _Escape()  # the current string's escape state at the end of the last piece

    def feed(self, chunk: bytes) -> bytes:
        """The capped bytes of ``chunk`` (empty when all of it is dropped)."""
        if len(chunk) <= self.cap:
            return self._piece(chunk)
        return b"".join(
            self._piece(chunk[i : i + self.cap]) for i in range(0, len(chunk), self.cap)
        )

    def _piece(self, piece: bytes) -> bytes:
        """One piece of at most ``cap`` bytes: no string can both open and overflow in it."""
        if self._dropping and b'"' not in piece:  # the rest of a cut string: nothing to mask
            run = len(piece) - len(piece.rstrip(b"\\"))
            if run == len(piece) and self._escaped_first:
                run -= 1  # the first byte is the escaped one
            self._escaped_first = run % 2 == 1
            self.dropped += len(piece)
            return b""
        mask, escaped_last = _mask(piece, self._escaped_first)
        self._escaped_first = escaped_last
        parts: list[bytes] = []
        start = 0
        if self._in_string:
            q = mask.find(b'"')
            if q < 0:
                out = self._string_part(piece, mask, escaped_last, closes=False)
                self._out += len(out)
                return out
            parts.append(self._string_part(piece[:q], mask[:q], False, closes=True))
            self._in_string, self._dropping, self._run = False, False, 0
            start = q  # the closing quote is kept
        opened = count_bytes(mask, b'"', start + 1 if parts else 0) % 2 == 1
        parts.append(piece[start:])
        if opened:
            last = mask.rfind(b'"')
            self._in_string = True
            self._run = len(piece) - last - 1
            self._state = _end_state(piece, mask, last + 1, _Escape(), escaped_last)
        out = b"".join(parts)
        self._out += len(out)
        return out

    def _string_part(self, seg: bytes, mask: bytes, esc_end: bool, *, closes: bool) -> bytes:
        """The kept bytes of the open string's part ``seg`` of a piece (up to its closing quote)."""
        if self._dropping:
            self.dropped += len(seg)
            return b""
        if self._run + len(seg) > self.cap:
            cut, state = _walk(seg, self._state, max(0, self.cap - self._run))
            if cut is not None:
                self.dropped += len(seg) - cut
                self.cuts.append(self._out + cut)
                self._dropping = True
                return seg[:cut]
            self._state = state  # no clean boundary in this part: kept whole, cut later
        elif not closes:
            self._state = _end_state(seg, mask, 0, self._state, esc_end)
        self._run += len(seg)
        return seg


def _end_state(piece: bytes, mask: bytes, start: int, state: _Escape, esc_end: bool) -> _Escape:
    """The escape state at the end of ``piece``, for a string whose bytes begin at ``start``.

    With at least 12 of the string's bytes in the piece (a \\u escape or a
    surrogate pair ends within them) it is read from the last bytes and the
    mask; otherwise ``piece[start:]`` is walked from ``state``. ``esc_end``: the
    piece ends with an unpaired backslash.
    """
    n = len(piece)
    if n - start < 12:
        return _walk(piece[start:], state, None)[1]
    st = _Escape(esc=esc_end)
    before = n - 1 if esc_end else n  # where the last complete thing before the end stops
    # a backslash left in the mask escapes the next byte: before a "u", a \\u escape begins
    for j in range(n - 1, n - 5, -1):
        if piece[j] == _U and mask[j - 1] == _BACKSLASH:
            st.digits = piece[j + 1 :].decode("ascii", "replace")
            before = j - 1
            break
    six = piece[before - 6 : before]
    if mask[before - 6] == _BACKSLASH and six[1] == _U:
        st.high = _is_high(six[2:].decode("ascii", "replace"))
    return st
