"""Encoding and decoding of the records inside a v2 batch.

Only the paths that must look inside a batch use this: building batches (tests, the
metadata log, internal topics, transaction markers), recompression, compaction. The produce
hot path never gets here for uncompressed data: see `kopfka.storage.log_validator`.

Record layout (all ints are zigzag varints): length | attributes i8 | timestampDelta |
offsetDelta | keyLen key | valueLen value | headerCount (keyLen key valueLen value)*.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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
    if n < 0:  # any negative length is a null (Kafka's DefaultRecord.readFrom)
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


_BATCH = struct.Struct(">qiibIhiqqqhii")


def _pack_batch(
    payload: bytes | bytearray | memoryview,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
) -> bytearray:
    """Header + payload with a fresh CRC, built in a single buffer."""
    out = bytearray(BATCH_HEADER_SIZE + len(payload))
    _BATCH.pack_into(
        out,
        0,
        base_offset,
        BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload),
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
        records_count,
    )
    out[BATCH_HEADER_SIZE:] = payload
    rewrite_crc(out, read_header(out, 0))
    return out


def encode_records(records: Sequence[Record], *, base_offset: int, base_timestamp: int) -> bytearray:
    """The uncompressed records region, deltas taken against the given bases."""
    body = bytearray()
    for r in records:
        encode_record(body, r.offset - base_offset, r.timestamp - base_timestamp, r)
    return body


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
    last_offset_delta: int | None = None,
    base_timestamp: int | None = None,
) -> bytes:
    """Build one v2 batch. Offsets of `records` are taken relative to the first record's.

    `last_offset_delta` may exceed the records' span (compaction keeps a batch's last offset
    when its last records are removed); `base_timestamp` overrides the first record's
    timestamp as the delta base (the delete-horizon batches of compaction do that).
    """
    if not records:
        raise ValueError("a batch needs at least one record")
    first_offset = records[0].offset
    if base_timestamp is None:
        base_timestamp = records[0].timestamp
    body = encode_records(records, base_offset=first_offset, base_timestamp=base_timestamp)
    payload = compression.compress(compression_type, body, compression_level)
    attributes = compression_type & COMPRESSION_MASK
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_FLAG
    if control:
        attributes |= CONTROL_FLAG
    if max_timestamp is None:
        max_timestamp = max(r.timestamp for r in records)
    if last_offset_delta is None:
        last_offset_delta = records[-1].offset - first_offset
    return bytes(
        _pack_batch(
            payload,
            base_offset=base_offset,
            partition_leader_epoch=partition_leader_epoch,
            attributes=attributes,
            last_offset_delta=last_offset_delta,
            base_timestamp=base_timestamp,
            max_timestamp=max_timestamp,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            records_count=len(records),
        )
    )


def records_payload(
    buf: bytes | bytearray | memoryview,
    header: BatchHeader,
    *,
    max_decompressed: int = compression.DEFAULT_MAX_DECOMPRESSED,
) -> bytes | memoryview:
    """The batch's records region, decompressed if needed (a view when uncompressed)."""
    start = header.position + BATCH_HEADER_SIZE
    view = memoryview(buf)[start : header.position + header.size]
    if header.compression:
        return compression.decompress(header.compression, view, max_decompressed)
    return view


def decode_records(
    buf: bytes | bytearray | memoryview,
    header: BatchHeader,
    *,
    max_decompressed: int = compression.DEFAULT_MAX_DECOMPRESSED,
    payload: bytes | memoryview | None = None,
) -> list[Record]:
    """Decode (decompressing if needed) every record of the batch at `header.position`.

    Pass `payload` when the records region is already decompressed. For LogAppendTime
    batches the returned timestamps are the stored CreateTime values; readers substitute the
    batch's maxTimestamp.
    """
    if payload is None:
        payload = records_payload(buf, header, max_decompressed=max_decompressed)
    out: list[Record] = []
    pos = 0
    n = len(payload)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    for _ in range(header.records_count):
        length, pos = read_varint(payload, pos)
        rec_end = pos + length
        if length <= 0 or rec_end > n:
            raise CorruptRecordError(message="record length runs past the batch")
        attributes = payload[pos]
        pos += 1
        ts_delta, pos = read_varint(payload, pos)
        off_delta, pos = read_varint(payload, pos)
        key, pos = _read_bytes(payload, pos)
        value, pos = _read_bytes(payload, pos)
        n_headers, pos = read_varint(payload, pos)
        if n_headers < 0 or n_headers > rec_end - pos:
            raise CorruptRecordError(message="invalid record header count")
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
                base_offset + off_delta,
                base_timestamp + ts_delta,
                key,
                value,
                tuple(headers),
                attributes,
            )
        )
    if pos != n:
        raise CorruptRecordError(message="record batch has trailing bytes after its records")
    return out


@dataclass(slots=True)
class RecordScan:
    """What validation needs from a batch's records, without materialising them."""

    count: int
    min_timestamp_delta: int
    max_timestamp_delta: int
    # index of the first record whose offsetDelta is not its position, or -1
    first_bad_offset_delta: int
    # indexes of records with a null key (only filled when asked for)
    null_key_indexes: list[int]


# aiokafka's Cython record parser walks records ~10x faster than Python can. It is a private
# module (aiokafka is pinned exactly for it); without it, or should it stop behaving as checked
# below, the pure-Python walk (`scan_records_py`, Kafka's rules) does all the work. Where the two
# differ, Kafka's rules decide: a batch the C parser rejects is walked again in Python (it is
# stricter than Kafka about header keys that are not UTF-8 and about record attribute bytes >=
# 0x80, which it reads as a varint). Left over: a crafted record with such an attribute byte, or
# an int32 varint longer than Kafka's 5 bytes, that the C parser reads consistently can be
# accepted with other deltas than Kafka would see. No Kafka client writes either encoding.
#
# The parser is imported on first use, not with this module: importing it imports the whole
# aiokafka package (~50 ms), which every node and CLI start paid before its first record batch.
_UNLOADED: Any = object()
_CRecordBatch: Any = _UNLOADED


def _c_parser() -> Any:
    """aiokafka's C batch class, or None (not installed, or failing the self-check)."""
    global _CRecordBatch
    if _CRecordBatch is _UNLOADED:
        try:
            from aiokafka.record._crecords.default_records import DefaultRecordBatch
        except ImportError:  # pragma: no cover - the pure-Python walk below is the fallback
            _CRecordBatch = None
        else:
            _CRecordBatch = DefaultRecordBatch
            if not _c_parser_agrees():  # pragma: no cover - an aiokafka that changed under us
                logging.getLogger(__name__).warning(
                    "aiokafka's C record parser fails its self-check; using the Python walk"
                )
                _CRecordBatch = None
    return _CRecordBatch

_FAKE_HEADER = struct.Struct(">qiibIhiqqqhii")
_TS_HIGH, _TS_LOW = 2**63, -(2**63)


def _walk_c(
    batch: bytes | bytearray | memoryview, base_off: int, base_ts: int, count: int, collect_null_keys: bool
) -> RecordScan:
    """One lean pass of aiokafka's C parser over a whole (uncompressed) batch; records are not
    kept (retaining them costs more than the walk itself)."""
    bad_offset = -1
    null_keys: list[int] = []
    expected = base_off
    ts_min, ts_max = _TS_HIGH, _TS_LOW
    try:
        for rec in _c_parser()(batch):
            ts = rec.timestamp
            if ts < ts_min:
                ts_min = ts
            if ts > ts_max:
                ts_max = ts
            if rec.offset != expected and bad_offset < 0:
                bad_offset = expected - base_off
            if collect_null_keys and rec.key is None:
                null_keys.append(expected - base_off)
            expected += 1
    except Exception as exc:  # aiokafka raises its CorruptRecordException (and others) on bad framing
        raise CorruptRecordError(message=f"record {expected - base_off} of the batch is malformed: {exc}") from exc
    n = expected - base_off
    if n != count:
        raise CorruptRecordError(message=f"batch declares {count} records but holds {n}")
    ts_min, ts_max = (ts_min - base_ts, ts_max - base_ts) if n else (0, 0)
    return RecordScan(count, ts_min, ts_max, bad_offset, null_keys)


def _scan_records_c(payload: bytes | memoryview, count: int, collect_null_keys: bool) -> RecordScan:
    """Walk a (decompressed) records payload with the C parser, framed as an uncompressed batch
    at base offset 0 and base timestamp 0 (so offsets and timestamps read back as deltas)."""
    buf = bytearray(BATCH_HEADER_SIZE + len(payload))
    _FAKE_HEADER.pack_into(
        buf,
        0,
        0,
        BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload),
        -1,
        MAGIC_V2,
        0,
        0,
        count - 1,
        0,
        0,
        -1,
        -1,
        -1,
        count,
    )
    buf[BATCH_HEADER_SIZE:] = payload
    return _walk_c(buf, 0, 0, count, collect_null_keys)


def _c_parser_agrees() -> bool:
    """Import-time check that the C parser still walks batches as this module expects: the
    same scan as the Python walk on a good batch, a rejection of a truncated one."""
    try:
        recs = [Record(i, 1000 + i % 3, None if i == 1 else b"k", b"v" * i, (("h", b"x"),)) for i in range(4)]
        good = bytes(encode_records(recs, base_offset=0, base_timestamp=1000))
        if _scan_records_c(good, 4, True) != scan_records_py(good, 4, collect_null_keys=True):
            return False
        _scan_records_c(good[:-1], 4, False)
    except CorruptRecordError:
        return True
    except Exception:
        return False
    return False


def scan_batch_records(
    buf: bytes | bytearray | memoryview, header: BatchHeader, *, collect_null_keys: bool = False
) -> RecordScan | None:
    """Walk an *uncompressed* batch's records in place with the C parser (no copy at all).

    Returns None when the fast path does not apply (compressed or LogAppendTime batch, no C
    parser, or a batch the C parser rejects); callers then use `scan_records` over the
    (decompressed) payload, where Kafka's rules decide."""
    if header.compression or header.records_count <= 0 or _c_parser() is None:
        return None
    if header.attributes & TIMESTAMP_TYPE_MASK:
        return None  # aiokafka reports maxTimestamp for every record of a LogAppendTime batch
    view = memoryview(buf)[header.position : header.position + header.size]
    try:
        return _walk_c(view, header.base_offset, header.base_timestamp, header.records_count, collect_null_keys)
    except CorruptRecordError:
        return None  # the caller walks the payload again, where Kafka's rules decide


def scan_records(payload: bytes | memoryview, count: int, *, collect_null_keys: bool = False) -> RecordScan:
    """Walk `count` records checking their framing; collect timestamps and null keys.

    Cheaper than `decode_records` (no key/value/header copies); raises CorruptRecordError on
    any framing error, including a count that does not match the bytes. The verdict is Kafka's
    (`scan_records_py`); the C parser only speeds up the common case of a good batch.
    """
    if count > 0 and _c_parser() is not None:
        try:
            return _scan_records_c(payload, count, collect_null_keys)
        except CorruptRecordError:
            pass  # aiokafka is stricter than Kafka in a few corners: Kafka's rules decide
    return scan_records_py(payload, count, collect_null_keys=collect_null_keys)


_INT32 = 0xFFFFFFFF
_INT64 = 0xFFFFFFFFFFFFFFFF


def _kafka_varint(buf: bytes | memoryview, pos: int, end: int, max_bytes: int, mask: int) -> tuple[int, int]:
    """Kafka's ByteUtils.readVarint (max_bytes 5, 32-bit) / readVarlong (10, 64-bit): at most
    `max_bytes` bytes, bits past the width dropped, then zigzag-decoded."""
    raw = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError(message="record field runs past the batch")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            raw &= mask
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise CorruptRecordError(message=f"varint longer than {max_bytes} bytes")


def _varint32(buf: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    if pos < end and buf[pos] < 0x80:
        b = buf[pos]
        return (b >> 1) ^ -(b & 1), pos + 1
    return _kafka_varint(buf, pos, end, 5, _INT32)


def scan_records_py(payload: bytes | memoryview, count: int, *, collect_null_keys: bool = False) -> RecordScan:
    """The pure-Python record walk, with the rules of Kafka's DefaultRecord.readFrom: a record
    must consume exactly its declared size; a negative key or value length is a null; a header
    key may not be null; the batch must hold exactly `count` records. It is the fallback when
    aiokafka's C parser is missing and the judge whenever that parser rejects a batch."""
    n = len(payload)
    pos = 0
    ts_min = ts_max = 0
    bad_offset = -1
    null_keys: list[int] = []
    for i in range(count):
        length, pos = _varint32(payload, pos, n)
        if length > n - pos:
            raise CorruptRecordError(message=f"record {i} length {length} runs past the batch")
        start = pos
        pos += 1  # attributes (one byte, unused)
        ts, pos = _kafka_varint(payload, pos, n, 10, _INT64)
        off, pos = _varint32(payload, pos, n)
        if i == 0:
            ts_min = ts_max = ts
        elif ts < ts_min:
            ts_min = ts
        elif ts > ts_max:
            ts_max = ts
        if off != i and bad_offset < 0:
            bad_offset = i
        klen, pos = _varint32(payload, pos, n)
        if klen >= 0:
            pos += klen
        elif collect_null_keys:
            null_keys.append(i)
        vlen, pos = _varint32(payload, pos, n)
        if vlen > 0:
            pos += vlen
        nh, pos = _varint32(payload, pos, n)
        if nh < 0 or nh > n - pos:
            raise CorruptRecordError(message=f"record {i} has header count {nh}")
        for _ in range(nh):
            hk, pos = _varint32(payload, pos, n)
            if hk < 0:
                raise CorruptRecordError(message=f"record {i} has a null header key")
            pos += hk
            hv, pos = _varint32(payload, pos, n)
            if hv > 0:
                pos += hv
        if pos > n:
            raise CorruptRecordError(message=f"record {i} runs past the batch")
        if pos - start != length:
            raise CorruptRecordError(message=f"record {i} size {length} does not match its contents ({pos - start})")
    if pos != n:
        raise CorruptRecordError(message="record batch has trailing bytes after its records")
    return RecordScan(count, ts_min, ts_max, bad_offset, null_keys)


def rebuild_batch(
    buf: bytes | bytearray | memoryview,
    header: BatchHeader,
    *,
    compression_type: int | None = None,
    compression_level: int | None = None,
    base_offset: int | None = None,
    partition_leader_epoch: int | None = None,
    log_append_time: bool | None = None,
    max_timestamp: int | None = None,
    records: Sequence[Record] | None = None,
    payload: bytes | memoryview | None = None,
    max_decompressed: int = compression.DEFAULT_MAX_DECOMPRESSED,
) -> bytearray:
    """Re-encode one batch, keeping its producer id/epoch, base sequence, last offset delta,
    transactional/control flags and (unless overridden) offsets, epoch and timestamps.

    Without `records` the records region is carried over byte for byte and only recompressed
    (offset and timestamp deltas stay valid because the header's bases do not move); `payload`
    may supply it already decompressed. With `records` (absolute offsets and timestamps, e.g.
    what compaction retained) the region is re-encoded against the batch's base offset.
    """
    codec = header.compression if compression_type is None else compression_type
    attributes = (header.attributes & ~COMPRESSION_MASK) | (codec & COMPRESSION_MASK)
    if log_append_time is not None:
        if log_append_time:
            attributes |= TIMESTAMP_TYPE_MASK
        else:
            attributes &= ~TIMESTAMP_TYPE_MASK
    base_timestamp = header.base_timestamp
    records_count = header.records_count
    if records is not None:
        if not records:
            raise ValueError("a batch needs at least one record")
        body: bytes | bytearray | memoryview = encode_records(
            records, base_offset=header.base_offset, base_timestamp=base_timestamp
        )
        records_count = len(records)
    elif payload is not None:
        body = payload
    elif codec == header.compression:
        start = header.position + BATCH_HEADER_SIZE
        body = memoryview(buf)[start : header.position + header.size]
    else:
        body = records_payload(buf, header, max_decompressed=max_decompressed)
    if records is None and payload is None and codec == header.compression:
        compressed: bytes | bytearray | memoryview = body
    else:
        compressed = compression.compress(codec, body, compression_level)
    return _pack_batch(
        compressed,
        base_offset=header.base_offset if base_offset is None else base_offset,
        partition_leader_epoch=(
            header.partition_leader_epoch if partition_leader_epoch is None else partition_leader_epoch
        ),
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=base_timestamp,
        max_timestamp=header.max_timestamp if max_timestamp is None else max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=records_count,
    )


# --- control records (transaction markers and KRaft control batches) -------------------------

CONTROL_ABORT = 0
CONTROL_COMMIT = 1
CONTROL_LEADER_CHANGE = 2
CONTROL_SNAPSHOT_HEADER = 3
CONTROL_SNAPSHOT_FOOTER = 4
CONTROL_KRAFT_VERSION = 5
CONTROL_KRAFT_VOTERS = 6
_CONTROL_KEY = struct.Struct(">hh")
_END_TXN_MARKER = struct.Struct(">hi")


def encode_control_key(control_type: int, version: int = 0) -> bytes:
    """Key of a control record: version i16 + type i16."""
    return _CONTROL_KEY.pack(version, control_type)


def decode_control_key(key: bytes | None) -> tuple[int, int]:
    """(version, type) of a control record key; readers ignore bytes past the 4 they know."""
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError(message="control record key is too short")
    version, control_type = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(message=f"invalid control record key version {version}")
    return version, control_type


def encode_end_txn_marker(coordinator_epoch: int, version: int = 0) -> bytes:
    """Value of a COMMIT/ABORT marker: version i16 + coordinatorEpoch i32."""
    return _END_TXN_MARKER.pack(version, coordinator_epoch)


def decode_end_txn_marker(value: bytes | None) -> tuple[int, int]:
    """(version, coordinator_epoch) of a transaction marker value."""
    if value is None or len(value) < _END_TXN_MARKER.size:
        raise CorruptRecordError(message="transaction marker value is too short")
    version, epoch = _END_TXN_MARKER.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(message=f"invalid transaction marker version {version}")
    return version, epoch


def build_end_txn_marker_batch(
    *,
    commit: bool,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A one-record transactional control batch ending a producer's transaction."""
    marker = Record(
        base_offset,
        timestamp,
        encode_control_key(CONTROL_COMMIT if commit else CONTROL_ABORT),
        encode_end_txn_marker(coordinator_epoch),
    )
    return encode_batch(
        [marker],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        transactional=True,
        control=True,
    )


def control_record_type(buf: bytes | bytearray | memoryview, header: BatchHeader) -> int | None:
    """The control type of a control batch's (first) record, or None for a data batch."""
    if not header.is_control:
        return None
    records = decode_records(buf, header)
    if not records:
        raise CorruptRecordError(message="control batch without records")
    return decode_control_key(records[0].key)[1]
