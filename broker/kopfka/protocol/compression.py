"""Batch payload codecs: none, gzip, snappy (raw and xerial-framed), lz4 (frame), zstd.

`compress(codec, data, level)` / `decompress(codec, data, max_size=...)`; codec ids are the
batch attribute values (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).

Wire formats, chosen to match what Kafka's own (Java) broker and clients write, since every
client library reads those:
  * gzip: one RFC 1952 member (Java's GZIPOutputStream). Reading accepts concatenated members.
  * snappy: written xerial-framed (Java's SnappyOutputStream: ``\\x82SNAPPY\\x00`` + version 1 +
    compat 1, then 32 KiB chunks each as i32 length + raw block), which Java, librdkafka,
    kafka-python and aiokafka all read. Reading accepts that and a plain raw block (librdkafka
    and some others write raw). The version/compat ints are ignored on read: some producers
    write them little-endian.
  * lz4: an LZ4 frame with Kafka's settings (independent 64 KiB blocks, no block/content
    checksum, no content size) so Java's KafkaLZ4BlockInputStream accepts it.
  * zstd: a standard frame. Reading streams across frames and tolerates frames without a
    content size (Java's ZstdOutputStream writes none).

Decompression is bounded by `max_size` so a zip bomb cannot exhaust memory, and any failure is
a CorruptRecordError (CORRUPT_MESSAGE), never another exception.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from kopfka.protocol.errors import CorruptRecordError

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
# `compression.type` config values -> codec id ("producer" means: keep the batch's codec).
CONFIG_CODECS = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}

DEFAULT_GZIP_LEVEL = 6  # java.util.zip.Deflater.DEFAULT_COMPRESSION
DEFAULT_LZ4_LEVEL = 9
DEFAULT_ZSTD_LEVEL = 3
# Fallback cap for callers that pass none; the LogValidator derives one from max.message.bytes.
DEFAULT_MAX_DECOMPRESSED = 64 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # SnappyOutputStream's default block size
_XERIAL_HEADER_SIZE = 16
_I32 = struct.Struct(">i")
_READ_CHUNK = 1 << 20
_ZSTD_MAX_WINDOW = 1 << 27  # zstd's default window limit; larger windows are refused


def codec_for_config(compression_type: str) -> int | None:
    """Codec id for a `compression.type` value; None for "producer" (keep the batch's)."""
    if compression_type == "producer":
        return None
    try:
        return CONFIG_CODECS[compression_type]
    except KeyError:
        raise ValueError(f"unknown compression.type {compression_type!r}") from None


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress a batch's record bytes. `level` None or -1 means the codec's Kafka default."""
    if codec == NONE:
        return bytes(data)
    if level == -1:
        level = None
    if codec == GZIP:
        c = zlib.compressobj(DEFAULT_GZIP_LEVEL if level is None else level, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _xerial_compress(data)
    if codec == LZ4:
        return lz4.frame.compress(
            data,
            compression_level=DEFAULT_LZ4_LEVEL if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )
    if codec == ZSTD:
        cctx = zstandard.ZstdCompressor(level=DEFAULT_ZSTD_LEVEL if level is None else level)
        return cctx.compress(data)
    raise ValueError(f"unknown compression codec {codec}")


def decompress(
    codec: int, data: bytes | bytearray | memoryview, max_size: int = DEFAULT_MAX_DECOMPRESSED
) -> bytes:
    """Decompress a batch payload, refusing output larger than `max_size` bytes."""
    if codec == NONE:
        return bytes(data)
    try:
        if codec == GZIP:
            return _gzip_decompress(data, max_size)
        if codec == SNAPPY:
            return _snappy_decompress(data, max_size)
        if codec == LZ4:
            return _lz4_decompress(data, max_size)
        if codec == ZSTD:
            return _zstd_decompress(data, max_size)
    except CorruptRecordError:
        raise
    except Exception as exc:  # any codec failure is a corrupt batch, never a crash
        name = CODEC_NAMES[codec]
        raise CorruptRecordError(message=f"cannot decompress {name} batch: {exc}") from exc
    raise CorruptRecordError(message=f"unknown compression codec {codec}")


def _too_large(max_size: int) -> CorruptRecordError:
    return CorruptRecordError(
        message=f"batch decompresses to more than the {max_size}-byte limit"
    )


def _truncated(name: str) -> CorruptRecordError:
    return CorruptRecordError(message=f"{name} compressed data is truncated")


def _gzip_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    out: list[bytes] = []
    total = 0
    d = zlib.decompressobj(31)
    pending: bytes | bytearray | memoryview = data
    while True:
        chunk = d.decompress(pending, max_size - total + 1)
        total += len(chunk)
        if total > max_size:
            raise _too_large(max_size)
        out.append(chunk)
        if d.eof:
            rest = d.unused_data
            if rest[:2] != b"\x1f\x8b":
                break  # like Java's GZIPInputStream: trailing non-gzip bytes end the stream
            d = zlib.decompressobj(31)
            pending = rest
            continue
        tail = d.unconsumed_tail
        if not tail and not chunk:
            raise _truncated("gzip")
        pending = tail
    return out[0] if len(out) == 1 else b"".join(out)


def _raw_snappy(block: bytes | memoryview, budget: int, max_size: int) -> bytes:
    n = cramjam.snappy.decompress_raw_len(block)
    if n > budget:
        raise _too_large(max_size)
    out = bytearray(n)
    written = cramjam.snappy.decompress_raw_into(block, out)
    if written != n:
        raise CorruptRecordError(message="snappy block shorter than its declared length")
    return bytes(out)


def _snappy_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != XERIAL_MAGIC:
        return _raw_snappy(view, max_size, max_size)
    pos = _XERIAL_HEADER_SIZE
    if len(view) < pos:
        raise _truncated("xerial snappy")
    end = len(view)
    out: list[bytes] = []
    total = 0
    while pos < end:
        if end - pos < 4:
            raise _truncated("xerial snappy")
        (n,) = _I32.unpack_from(view, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise _truncated("xerial snappy")
        chunk = _raw_snappy(view[pos : pos + n], max_size - total, max_size)
        total += len(chunk)
        out.append(chunk)
        pos += n
    return b"".join(out)


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _lz4_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    d = lz4.frame.LZ4FrameDecompressor()
    out: list[bytes] = []
    total = 0
    pending: bytes | bytearray | memoryview = data
    while True:
        chunk = d.decompress(pending, max_length=min(_READ_CHUNK * 8, max_size - total + 1))
        pending = b""
        total += len(chunk)
        if total > max_size:
            raise _too_large(max_size)
        out.append(chunk)
        if d.eof:
            break
        if d.needs_input:
            raise _truncated("lz4")
    return out[0] if len(out) == 1 else b"".join(out)


def _zstd_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    # decompressobj gives eof/unused_data (frame boundaries, truncation) but no output bound,
    # so feed it input slices small enough that one slice cannot overshoot the budget: a zstd
    # block yields at most 128 KiB from at least 4 bytes, i.e. a ratio of at most 2**15.
    dctx = zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW)
    view = memoryview(data)
    end = len(view)
    out: list[bytes] = []
    total = 0
    pos = 0
    while pos < end:
        obj = dctx.decompressobj()
        while not obj.eof:
            if pos >= end:
                raise _truncated("zstd")
            step = max(1024, (max_size - total) >> 15)
            chunk = obj.decompress(view[pos : pos + step])
            pos += step
            total += len(chunk)
            if total > max_size:
                raise _too_large(max_size)
            out.append(chunk)
        rest = obj.unused_data
        pos = min(pos, end) - len(rest)
    return out[0] if len(out) == 1 else b"".join(out)
