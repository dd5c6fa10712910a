"""The decompressed stream: gzip members read by zlib as ``gzip`` reads them, keys counted."""

from __future__ import annotations

import gzip
import io
import random
import zlib
from pathlib import Path
from typing import Any

import pytest

from tracewh.ingest import decompress
from tracewh.ingest.decompress import GzipMembers, Tee, open_decompressed
from tracewh.ingest.strings import count_bytes


@pytest.fixture(params=["zlib", "isal"])
def inflater(request: pytest.FixtureRequest) -> Any:
    """Each inflater GzipMembers can use: zlib's, ISA-L's (the ``fast`` extra, when installed)."""
    if request.param == "isal":
        return pytest.importorskip("isal.isal_zlib").decompressobj
    return zlib.decompressobj


def _doc(n: int, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    events = ",".join(
        f'{{"ph":"X","name":"op{i}","ts":{i * 7},"dur":{rng.randrange(9)},'
        f'"args":{{"s":"{"x" * rng.randrange(40)}"}}}}' for i in range(n)
    )
    return ('{"traceEvents":[' + events + "]}").encode()


def _read_all(stream: io.RawIOBase, size: int) -> bytes:
    out = []
    while chunk := stream.read(size):
        assert len(chunk) <= size
        out.append(chunk)
    return b"".join(out)


@pytest.mark.parametrize("size", [1, 7, 4096, 1 << 16])
def test_members_padding_and_headers_read_as_gzip_reads_them(size: int, inflater: Any) -> None:
    doc = _doc(3000)
    named = io.BytesIO()
    with gzip.GzipFile(filename="trace.json", mode="wb", fileobj=named, mtime=5) as gz:
        gz.write(doc[:100])  # FNAME in the header
    blob = named.getvalue() + b"\0" * 3 + gzip.compress(doc[100:5000]) + gzip.compress(b"") \
        + gzip.compress(doc[5000:], compresslevel=1) + b"\0" * 700
    expected = gzip.decompress(blob)
    assert expected == doc
    stream = GzipMembers(io.BufferedReader(io.BytesIO(blob)), inflater)
    assert _read_all(stream, size if size > 1 else 1 << 16) == doc


def test_a_highly_compressed_member_comes_out_in_bounded_reads(inflater: Any) -> None:
    blob = gzip.compress(b"\0" * (50 << 20))
    stream = GzipMembers(io.BufferedReader(io.BytesIO(blob)), inflater)
    sizes = []
    while chunk := stream.read(1 << 16):
        sizes.append(len(chunk))
    assert sum(sizes) == 50 << 20 and max(sizes) <= 1 << 16


def _errors(blob: bytes, inflater: Any) -> tuple[type[BaseException] | None, ...]:
    """The exception types ``gzip`` and :class:`GzipMembers` raise reading ``blob`` whole."""
    found: list[type[BaseException] | None] = []
    streams = (gzip.GzipFile(fileobj=io.BytesIO(blob)), GzipMembers(io.BytesIO(blob), inflater))
    for stream in streams:
        try:
            _read_all(stream, 1 << 16)
            found.append(None)
        except (EOFError, zlib.error, OSError) as exc:
            found.append(type(exc))
    return found[0], found[1]


def test_damage_raises_what_gzip_raises(inflater: Any) -> None:
    good = gzip.compress(_doc(500))
    crc = bytearray(good)
    crc[-8] ^= 0xFF
    isize = bytearray(good)
    isize[-1] ^= 0x01
    body = bytearray(good)
    body[len(good) // 2] ^= 0x55
    cases = {
        "truncated": (good[: len(good) // 2], EOFError, EOFError),
        "no trailer": (good[:-8], EOFError, EOFError),
        "garbage after": (good + b"garbage", gzip.BadGzipFile, gzip.BadGzipFile),
        "half a magic after": (good + b"\x1f", gzip.BadGzipFile, gzip.BadGzipFile),
        "bad CRC": (bytes(crc), gzip.BadGzipFile, gzip.BadGzipFile),
        "bad size": (bytes(isize), gzip.BadGzipFile, gzip.BadGzipFile),
    }
    for name, (blob, by_gzip, by_us) in cases.items():
        assert _errors(blob, inflater) == (by_gzip, by_us), name
    assert _errors(bytes(body), inflater)[1] in (zlib.error, EOFError, gzip.BadGzipFile)
    assert _errors(b"\x1f\x8b" + bytes(range(256)) * 4, inflater)[1] is zlib.error


def test_damaged_gzip_is_a_trace_format_error_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    good = bytearray(gzip.compress(_doc(500)))
    good[-8] ^= 0xFF
    path.write_bytes(bytes(good))
    inner, raw = open_decompressed(path)
    tee = Tee(inner, path, raw=raw)
    with pytest.raises(decompress.TraceFormatError, match="corrupt gzip data: CRC") as err:
        while tee.read(1 << 16):
            pass
    assert str(path) in str(err.value)
    tee.close()


@pytest.mark.parametrize("chunk", [5, 12, 13, 14, 100, 1 << 16])
def test_key_hits_count_keys_across_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          chunk: int) -> None:
    monkeypatch.setattr(decompress, "_CHUNK", chunk)
    doc = _doc(50).replace(b'"op7"', b'"traceEvents"').replace(b'"op31"', b'"x\\"traceEvents"')
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(doc))
    inner, raw = open_decompressed(path)
    tee = Tee(inner, path, raw=raw)
    assert b"".join(iter(lambda: tee.read(1 << 16), b"")) == doc
    assert tee.key_hits == doc.count(b'"traceEvents"') == 3
    tee.close()


def test_count_bytes_is_bytes_count() -> None:
    rng = random.Random(3)
    alphabet = b'"traceEvnsx\\{},: '
    needles = [b'"', b'"traceEvents"', b"aa", b'"t', b"ee", b"\\\\", b"x" * 17]
    for _ in range(3000):
        data = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 120)))
        for needle in needles:
            if rng.random() < 0.3:
                at = rng.randrange(len(data) + 1)
                data = data[:at] + needle + data[at:]
            start = rng.randrange(-3, len(data) + 3)
            assert count_bytes(data, needle, start) == data.count(needle, start), (data, needle)
    for data in (b"a" * 150, b"ab" * 90, b'"' * 5000):
        for needle in (b"aa", b"aaa", b"abab", b"a" * 17, b'""', b'"'):
            assert count_bytes(data, needle) == data.count(needle)


def test_read_sizes_follow_the_raw_io_contract(inflater: Any) -> None:
    """read(0) gives nothing and consumes nothing (ijson asks it first), read() and read(-1)
    everything, readinto fills at most the buffer."""
    doc = _doc(3000)
    for whole in (lambda s: s.read(), lambda s: s.read(-1), lambda s: s.read(None)):
        stream = GzipMembers(io.BytesIO(gzip.compress(doc)), inflater)
        assert stream.read(0) == b""
        assert whole(stream) == doc
    stream = GzipMembers(io.BytesIO(gzip.compress(doc)), inflater)
    assert stream.readinto(bytearray(0)) == 0
    buf = bytearray(10)
    assert stream.readinto(memoryview(buf)) == 10 and bytes(buf) == doc[:10]
    assert stream.read() == doc[10:]


def test_a_duplicate_events_key_is_found_in_a_gzip_file(tmp_path: Path) -> None:
    from tracewh.ingest.reader import duplicate_events_keys

    doc = b'{"traceEvents": [], "x": {"traceEvents": 1}, "traceEvents": []}'
    for name, data in (("t.json", doc), ("t.json.gz", gzip.compress(doc))):
        path = tmp_path / name
        path.write_bytes(data)
        assert duplicate_events_keys(path) == 2, name


def test_tee_read_zero_consumes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t.json.gz"
    doc = _doc(200)
    path.write_bytes(gzip.compress(doc))
    inner, raw = open_decompressed(path)
    tee = Tee(inner, path, raw=raw)
    assert tee.read(0) == b"" and tee.readinto(bytearray(0)) == 0
    assert b"".join(iter(tee.read, b"")) == doc
    tee.close()
