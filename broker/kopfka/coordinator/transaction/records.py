"""The `__transaction_state` record formats, byte-compatible with Kafka's.

Key: TransactionLogKey v0 — int16 version 0, then the transactional id (int16-length string).
Value: TransactionLogValue, version-prefixed: v0 (classic) or v1 (flexible, written once the
`transaction.version` feature is >= 1), fields ProducerId, ProducerEpoch, TransactionTimeoutMs,
TransactionStatus (the state id), TransactionPartitions (null when Empty), last-update and
start timestamps; v1 adds the tagged fields PreviousProducerId (0), NextProducerId (1) and
ClientTransactionVersion (2). A null value is the tombstone of an expired transactional id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kopfka.coordinator.record_io import Reader, RecordFormatError, Writer

__all__ = ["RecordFormatError", "TxnLogValue", "decode_key", "decode_value", "encode_key", "encode_value"]

KEY_VERSION = 0
TAG_PREVIOUS_PRODUCER_ID = 0
TAG_NEXT_PRODUCER_ID = 1
TAG_CLIENT_TRANSACTION_VERSION = 2


@dataclass
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int
    partitions: dict[str, list[int]] = field(default_factory=dict)
    last_update_ms: int = -1
    start_ms: int = -1
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


def encode_key(transactional_id: str) -> bytes:
    return bytes(Writer().i16(KEY_VERSION).string(transactional_id).buf)


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a key of a version this broker does not know."""
    r = Reader(data)
    if r.i16() != KEY_VERSION:
        return None
    tid = r.string()
    if tid is None:
        raise RecordFormatError("null transactional id in a transaction log key")
    return tid


def encode_value(v: TxnLogValue, version: int) -> bytes:
    """TransactionLogValue at `version` 0 or 1; partitions must be empty for Empty (state 0)."""
    flexible = version >= 1
    w = Writer(flexible)
    w.i16(version).i64(v.producer_id).i16(v.producer_epoch).i32(v.timeout_ms).i8(v.state)
    if v.state == 0:
        w.array_len(None)
    else:
        w.array_len(len(v.partitions))
        for topic, ids in v.partitions.items():
            w.string(topic).array_len(len(ids))
            for p in ids:
                w.i32(p)
            w.tags()
    w.i64(v.last_update_ms).i64(v.start_ms)
    tagged: dict[int, bytes] = {}
    if v.previous_producer_id != -1:
        tagged[TAG_PREVIOUS_PRODUCER_ID] = struct.pack(">q", v.previous_producer_id)
    if v.next_producer_id != -1:
        tagged[TAG_NEXT_PRODUCER_ID] = struct.pack(">q", v.next_producer_id)
    if v.client_transaction_version != 0:
        tagged[TAG_CLIENT_TRANSACTION_VERSION] = struct.pack(">h", v.client_transaction_version)
    w.tags(tagged)
    return bytes(w.buf)


def decode_value(data: bytes) -> TxnLogValue:
    version = Reader(data).i16()
    if not 0 <= version <= 1:
        raise RecordFormatError(f"unknown transaction log value version {version}")
    r = Reader(data, flexible=version >= 1)
    r.pos = 2
    pid, epoch, timeout, state = r.i64(), r.i16(), r.i32(), r.i8()
    partitions: dict[str, list[int]] = {}
    for _ in range(max(r.array_len(), 0)):
        topic = r.string()
        if topic is None:
            raise RecordFormatError("null topic in a transaction log value")
        ids = [r.i32() for _ in range(max(r.array_len(), 0))]
        r.skip_tags()
        partitions.setdefault(topic, []).extend(ids)
    last_update, start = r.i64(), r.i64()
    tags = r.tags()
    value = TxnLogValue(pid, epoch, timeout, state, partitions, last_update, start)
    if len(raw := tags.get(TAG_PREVIOUS_PRODUCER_ID, b"")) == 8:
        value.previous_producer_id = struct.unpack(">q", raw)[0]
    if len(raw := tags.get(TAG_NEXT_PRODUCER_ID, b"")) == 8:
        value.next_producer_id = struct.unpack(">q", raw)[0]
    if len(raw := tags.get(TAG_CLIENT_TRANSACTION_VERSION, b"")) == 2:
        value.client_transaction_version = struct.unpack(">h", raw)[0]
    return value
