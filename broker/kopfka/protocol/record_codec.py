"""Encoding and decoding of the records inside a v2 batch.

Only the paths that must look inside a batch use this: building batches (tests, the
metadata log, internal topics), recompression, LogAppendTime on compressed data, compaction.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

from kopfka.protocol import compression
from kopfka.protocol.errors import CorruptRecordError
from kopfka.protocol.records import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    LOG_OVERHEAD,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    read_header,
    rewrite_crc,
)


@dataclass(slots=True)
class Record:
    """One decoded record. `offset` and `timestamp` are absolute."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = field(default_factory=tuple)
    attributes: int = 0


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def write_varint(out: bytearray, n: int) -> None:
    v = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    result = 0
    while True:
        if pos >= len(buf):
            raise CorruptRecordError(message="record varint truncated")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptRecordError(message="record varint too long")
    return (result >> 1) ^ -(result & 1), pos


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(data))
        out += data


def _read_bytes(buf: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos)
    if n < 0:
        if n != -1:
            raise CorruptRecordError(message=f"invalid record field length {n}")
        return None, pos
    end = pos + n
    if end > len(buf):
        raise CorruptRecordError(message="record field runs past the batch")
    return bytes(buf[pos:end]), end


def encode_record(out: bytearray, offset_delta: int, timestamp_delta: int, record: Record) -> None:
    body = bytearray()
    body.append(0)  # record attributes (unused)
    write_varint(body, timestamp_delta)
    write_varint(body, offset_delta)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    write_varint(body, len(record.headers))
    for hkey, hvalue in record.headers:
        _write_bytes(body, hkey.encode())
        _write_bytes(body, hvalue)
    write_varint(out, len(body))
    out += body


def encode_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    compression_type: int = 0,
    log_append_time: bool = False,
    max_timestamp: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    transactional: bool = False,
    control: bool = False,
    compression_level: int | None = None,
) -> bytes:
    """Build one v2 batch. Offsets of `records` are taken relative to the first record's."""
    if not records:
        raise ValueError("a batch needs at least one record")
    first_offset = records[0].offset
    base_timestamp = records[0].timestamp
    body = bytearray()
    for r in records:
        encode_record(body, r.offset - first_offset, r.timestamp - base_timestamp, r)
    payload = compression.compress(compression_type, bytes(body), compression_level)
    attributes = compression_type & COMPRESSION_MASK
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_FLAG
    if control:
        attributes |= CONTROL_FLAG
    if max_timestamp is None:
        max_timestamp = max(r.timestamp for r in records)
    last_offset_delta = records[-1].offset - first_offset
    batch_length = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload)
    out = bytearray(
        struct.pack(
            ">qiibIhiqqqhii",
            base_offset,
            batch_length,
            partition_leader_epoch,
            MAGIC_V2,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    )
    out += payload
    rewrite_crc(out, read_header(out, 0))
    return bytes(out)


def decode_records(buf: bytes | bytearray | memoryview, header: BatchHeader) -> list[Record]:
    """Decode (decompressing if needed) every record of the batch at `header.position`."""
    start = header.position + BATCH_HEADER_SIZE
    end = header.position + header.size
    payload: bytes | memoryview = memoryview(buf)[start:end]
    if header.compression:
        payload = compression.decompress(header.compression, bytes(payload))
    out: list[Record] = []
    pos = 0
    for _ in range(header.records_count):
        length, pos = read_varint(payload, pos)
        rec_end = pos + length
        if length < 0 or rec_end > len(payload):
            raise CorruptRecordError(message="record length runs past the batch")
        attributes = payload[pos]
        pos += 1
        ts_delta, pos = read_varint(payload, pos)
        off_delta, pos = read_varint(payload, pos)
        key, pos = _read_bytes(payload, pos)
        value, pos = _read_bytes(payload, pos)
        n_headers, pos = read_varint(payload, pos)
        if n_headers < 0:
            raise CorruptRecordError(message="negative record header count")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(n_headers):
            hk, pos = _read_bytes(payload, pos)
            hv, pos = _read_bytes(payload, pos)
            if hk is None:
                raise CorruptRecordError(message="null record header key")
            headers.append((hk.decode("utf-8", "replace"), hv))
        if pos != rec_end:
            raise CorruptRecordError(message="record size does not match its contents")
        out.append(
            Record(
                header.base_offset + off_delta,
                header.base_timestamp + ts_delta,
                key,
                value,
                tuple(headers),
                attributes,
            )
        )
    if pos != len(payload):
        raise CorruptRecordError(message="record batch has trailing bytes after its records")
    return out
