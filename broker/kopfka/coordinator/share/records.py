"""The `__share_group_state` record formats, byte-compatible with Kafka's share coordinator.

Keys are prefixed with their record type (Kafka's CoordinatorRecordType): 0 ShareSnapshotKey,
1 ShareUpdateKey; both hold GroupId (int16-length string), TopicId (16 bytes) and Partition
(int32), non-flexible. Values are version-prefixed (v0, flexible):

- ShareSnapshotValue: SnapshotEpoch, StateEpoch, LeaderEpoch, StartOffset, CreateTimestamp,
  WriteTimestamp, StateBatches — the whole state of a share-partition;
- ShareUpdateValue: SnapshotEpoch, LeaderEpoch, StartOffset (-1: unchanged), StateBatches —
  the batches that changed since the snapshot it builds on.

Both carry DeliveryCompleteCount as tagged field 0 (default -1). A StateBatch is FirstOffset,
LastOffset, DeliveryState (0 Available, 2 Acknowledged, 4 Archived) and DeliveryCount. A null
value under a snapshot key is the tombstone of a deleted share-partition state.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from kopfka.coordinator.record_io import Reader, RecordFormatError, Writer

__all__ = [
    "RecordFormatError",
    "ShareKey",
    "ShareSnapshot",
    "ShareUpdate",
    "StateBatch",
    "decode_key",
    "decode_snapshot",
    "decode_update",
    "encode_key",
    "encode_snapshot",
    "encode_update",
]

SNAPSHOT = 0
UPDATE = 1
VALUE_VERSION = 0
TAG_DELIVERY_COMPLETE_COUNT = 0


@dataclass(frozen=True, order=True)
class StateBatch:
    """A run of offsets sharing one delivery state and delivery count."""

    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(frozen=True)
class ShareKey:
    record_type: int  # SNAPSHOT or UPDATE
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass
class ShareSnapshot:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: list[StateBatch] = field(default_factory=list)
    delivery_complete_count: int = -1


@dataclass
class ShareUpdate:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: list[StateBatch] = field(default_factory=list)
    delivery_complete_count: int = -1


def encode_key(record_type: int, group_id: str, topic_id: uuid.UUID, partition: int) -> bytes:
    return bytes(Writer().i16(record_type).string(group_id).uuid(topic_id).i32(partition).buf)


def decode_key(data: bytes) -> ShareKey | None:
    """The key, or None for a record type this broker does not know."""
    r = Reader(data)
    record_type = r.i16()
    if record_type not in (SNAPSHOT, UPDATE):
        return None
    group = r.string()
    if group is None:
        raise RecordFormatError("null group id in a share state key")
    return ShareKey(record_type, group, r.uuid(), r.i32())


def _write_batches(w: Writer, batches: list[StateBatch]) -> None:
    w.array_len(len(batches))
    for b in batches:
        w.i64(b.first_offset).i64(b.last_offset).i8(b.delivery_state).i16(b.delivery_count).tags()


def _read_batches(r: Reader) -> list[StateBatch]:
    out = []
    for _ in range(max(r.array_len(), 0)):
        out.append(StateBatch(r.i64(), r.i64(), r.i8(), r.i16()))
        r.skip_tags()
    return out


def _complete_count_tag(count: int) -> dict[int, bytes]:
    return {} if count == -1 else {TAG_DELIVERY_COMPLETE_COUNT: struct.pack(">i", count)}


def _complete_count(tags: dict[int, bytes]) -> int:
    raw = tags.get(TAG_DELIVERY_COMPLETE_COUNT, b"")
    return int(struct.unpack(">i", raw)[0]) if len(raw) == 4 else -1


def _reader(data: bytes) -> Reader:
    version = Reader(data).i16()
    if version != VALUE_VERSION:
        raise RecordFormatError(f"unknown share state value version {version}")
    r = Reader(data, flexible=True)
    r.pos = 2
    return r


def encode_snapshot(v: ShareSnapshot) -> bytes:
    w = Writer(flexible=True).i16(VALUE_VERSION)
    w.i32(v.snapshot_epoch).i32(v.state_epoch).i32(v.leader_epoch).i64(v.start_offset)
    w.i64(v.create_timestamp).i64(v.write_timestamp)
    _write_batches(w, v.state_batches)
    w.tags(_complete_count_tag(v.delivery_complete_count))
    return bytes(w.buf)


def decode_snapshot(data: bytes) -> ShareSnapshot:
    r = _reader(data)
    snapshot_epoch, state_epoch, leader_epoch, start = r.i32(), r.i32(), r.i32(), r.i64()
    created, written = r.i64(), r.i64()
    batches = _read_batches(r)
    return ShareSnapshot(
        snapshot_epoch, state_epoch, leader_epoch, start, created, written, batches, _complete_count(r.tags())
    )


def encode_update(v: ShareUpdate) -> bytes:
    w = Writer(flexible=True).i16(VALUE_VERSION)
    w.i32(v.snapshot_epoch).i32(v.leader_epoch).i64(v.start_offset)
    _write_batches(w, v.state_batches)
    w.tags(_complete_count_tag(v.delivery_complete_count))
    return bytes(w.buf)


def decode_update(data: bytes) -> ShareUpdate:
    r = _reader(data)
    snapshot_epoch, leader_epoch, start = r.i32(), r.i32(), r.i64()
    batches = _read_batches(r)
    return ShareUpdate(snapshot_epoch, leader_epoch, start, batches, _complete_count(r.tags()))
