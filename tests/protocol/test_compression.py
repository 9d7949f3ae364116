"""Codec round trips, interop with other Kafka clients' codecs, and corrupt/bomb inputs."""

from __future__ import annotations

import io
import os
import struct

import aiokafka.codec as aio_codec
import cramjam
import kafka.codec as kp_codec
import lz4.frame
import pytest
import zstandard
from kopfka.protocol import compression as c
from kopfka.protocol.errors import CorruptRecordError

CODECS = [c.GZIP, c.SNAPPY, c.LZ4, c.ZSTD]
LEVELS: dict[int, list[int | None]] = {
    c.GZIP: [None, -1, 1, 9],
    c.SNAPPY: [None],
    c.LZ4: [None, 1, 9, 17],
    c.ZSTD: [None, -5, 1, 3, 19],
}
PAYLOADS = [
    b"",
    b"x",
    b"hello kafka " * 1000,
    os.urandom(100_000),
    os.urandom(50) * 5000,  # crosses xerial (32 KiB) and lz4 (64 KiB) block boundaries
]


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_level(codec: int) -> None:
    for level in LEVELS[codec]:
        for data in PAYLOADS:
            z = c.compress(codec, data, level)
            assert c.decompress(codec, z) == data
            assert c.decompress(codec, memoryview(bytearray(z))) == data


def test_levels_change_output() -> None:
    data = (b"abcdefgh" * 10 + os.urandom(8)) * 2000
    assert len(c.compress(c.GZIP, data, 1)) != len(c.compress(c.GZIP, data, 9))
    assert len(c.compress(c.ZSTD, data, 1)) != len(c.compress(c.ZSTD, data, 19))
    assert len(c.compress(c.LZ4, data, 1)) != len(c.compress(c.LZ4, data, 12))


def test_none_codec_is_identity() -> None:
    assert c.compress(c.NONE, b"abc") == b"abc"
    assert c.decompress(c.NONE, b"abc") == b"abc"


def test_unknown_codec() -> None:
    with pytest.raises(CorruptRecordError):
        c.decompress(5, b"abc")
    with pytest.raises(ValueError):
        c.compress(7, b"abc")


def test_codec_for_config() -> None:
    assert c.codec_for_config("producer") is None
    assert c.codec_for_config("uncompressed") == c.NONE
    assert c.codec_for_config("zstd") == c.ZSTD
    with pytest.raises(ValueError):
        c.codec_for_config("brotli")


# --- wire formats -------------------------------------------------------------------------


def test_snappy_written_xerial_framed_like_java() -> None:
    data = os.urandom(10) * 10_000  # 100 kB -> 4 chunks of 32 KiB
    z = c.compress(c.SNAPPY, data)
    assert z[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, chunks, out = 16, 0, b""
    while pos < len(z):
        (n,) = struct.unpack_from(">i", z, pos)
        out += bytes(cramjam.snappy.decompress_raw(z[pos + 4 : pos + 4 + n]))
        pos += 4 + n
        chunks += 1
    assert out == data and chunks == 4


def test_snappy_reads_raw_blocks() -> None:
    data = b"librdkafka writes raw snappy " * 500
    assert c.decompress(c.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data


def test_snappy_reads_hand_built_xerial_with_odd_header() -> None:
    data = os.urandom(1000) * 70
    parts = [b"\x82SNAPPY\x00", struct.pack("<ii", 1, 1)]  # little-endian version/compat
    for i in range(0, len(data), 10_000):  # non-default chunk size
        block = bytes(cramjam.snappy.compress_raw(data[i : i + 10_000]))
        parts += [struct.pack(">i", len(block)), block]
    assert c.decompress(c.SNAPPY, b"".join(parts)) == data
    # an empty xerial stream (header only) is an empty payload
    assert c.decompress(c.SNAPPY, b"".join(parts[:2])) == b""


def test_lz4_frame_has_kafka_settings() -> None:
    z = c.compress(c.LZ4, b"x" * 200_000)
    assert z[:4] == b"\x04\x22\x4d\x18"
    flg, bd = z[4], z[5]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # block independence
    assert not flg & 0x10  # no block checksum
    assert not flg & 0x08  # no content size
    assert not flg & 0x04  # no content checksum
    assert (bd >> 4) & 0x7 == 4  # 64 KiB blocks


def test_zstd_without_content_size_and_multiple_frames() -> None:
    data = os.urandom(20) * 20_000
    plain = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert c.decompress(c.ZSTD, plain) == data
    assert c.decompress(c.ZSTD, plain + plain) == data + data
    sink = io.BytesIO()
    with zstandard.ZstdCompressor(level=5).stream_writer(sink, closefd=False) as w:
        for i in range(0, len(data), 7777):
            w.write(data[i : i + 7777])
    assert c.decompress(c.ZSTD, sink.getvalue()) == data


def test_gzip_concatenated_members_and_trailing_junk() -> None:
    a, b = b"first" * 100, b"second" * 100
    z = c.compress(c.GZIP, a) + c.compress(c.GZIP, b)
    assert c.decompress(c.GZIP, z) == a + b
    assert c.decompress(c.GZIP, c.compress(c.GZIP, a) + b"\0\0junk") == a


# --- interop with other clients' codec implementations -----------------------------------

ENCODERS = {
    "kafka-python": {
        c.GZIP: kp_codec.gzip_encode,
        c.SNAPPY: kp_codec.snappy_encode,
        c.LZ4: kp_codec.lz4_encode,
        c.ZSTD: kp_codec.zstd_encode,
    },
    "aiokafka": {
        c.GZIP: aio_codec.gzip_encode,
        c.SNAPPY: aio_codec.snappy_encode,
        c.LZ4: aio_codec.lz4_encode,
        c.ZSTD: aio_codec.zstd_encode,
    },
}
DECODERS = {
    "kafka-python": {
        c.GZIP: kp_codec.gzip_decode,
        c.SNAPPY: kp_codec.snappy_decode,
        c.LZ4: kp_codec.lz4_decode,
        c.ZSTD: kp_codec.zstd_decode,
    },
    "aiokafka": {
        c.GZIP: aio_codec.gzip_decode,
        c.SNAPPY: aio_codec.snappy_decode,
        c.LZ4: aio_codec.lz4_decode,
        c.ZSTD: aio_codec.zstd_decode,
    },
}


@pytest.mark.parametrize("client", sorted(ENCODERS))
@pytest.mark.parametrize("codec", CODECS)
def test_we_read_what_clients_write(client: str, codec: int) -> None:
    data = os.urandom(30) * 3000
    assert c.decompress(codec, ENCODERS[client][codec](data)) == data


def test_we_read_raw_snappy_from_clients() -> None:
    data = os.urandom(30) * 3000
    assert c.decompress(c.SNAPPY, kp_codec.snappy_encode(data, xerial_compatible=False)) == data
    assert c.decompress(c.SNAPPY, aio_codec.snappy_encode(data, xerial_compatible=False)) == data


@pytest.mark.parametrize("client", sorted(DECODERS))
@pytest.mark.parametrize("codec", CODECS)
def test_clients_read_what_we_write(client: str, codec: int) -> None:
    data = os.urandom(30) * 3000
    assert bytes(DECODERS[client][codec](c.compress(codec, data))) == data


def test_lz4_reference_decoder_reads_ours() -> None:
    data = os.urandom(30) * 3000
    assert lz4.frame.decompress(c.compress(c.LZ4, data)) == data


# --- corrupt input and bombs --------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_or_garbage_is_corrupt(codec: int) -> None:
    data = os.urandom(1000) * 200
    z = c.compress(codec, data)
    for bad in (z[:-5], z[: len(z) // 2], z[:3], z[:20] + b"\0" * 20, b"\xff" * 64):
        with pytest.raises(CorruptRecordError):
            c.decompress(codec, bad)


@pytest.mark.parametrize("codec", CODECS)
def test_exact_limit_passes_and_one_more_byte_fails(codec: int) -> None:
    data = b"\0" * 100_000
    z = c.compress(codec, data)
    assert c.decompress(codec, z, max_size=len(data)) == data
    with pytest.raises(CorruptRecordError, match="limit"):
        c.decompress(codec, z, max_size=len(data) - 1)


@pytest.mark.parametrize("codec", CODECS)
def test_decompression_bomb_rejected(codec: int) -> None:
    bomb = c.compress(codec, bytes(256 << 20))  # 256 MiB of zeros
    assert len(bomb) < 30 << 20
    with pytest.raises(CorruptRecordError, match="limit"):
        c.decompress(codec, bomb, max_size=16 << 20)


def test_snappy_lying_length_preamble_rejected_before_allocation() -> None:
    # raw snappy that claims a 2 GiB output
    varint = bytes([0x80, 0x80, 0x80, 0x80, 0x08])
    with pytest.raises(CorruptRecordError):
        c.decompress(c.SNAPPY, varint + b"\x00a")
