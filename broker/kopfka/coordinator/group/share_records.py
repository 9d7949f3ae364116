"""Share-group records in `__consumer_offsets`, byte-compatible with Kafka's.

Of Kafka's share-group records kopfka writes the two that must outlive the coordinator:

- ShareGroupMetadata (record type 11): the group epoch and the hash of its subscribed topics'
  metadata. A share-partition's state epoch is the group epoch it was initialized at, so the
  epoch must keep rising across coordinator failovers;
- ShareGroupStatePartitionMetadata (record type 15): the share-partitions whose state is being
  initialized, is initialized, or is being deleted in the share coordinator. Forgetting that a
  partition was initialized would re-initialize it, throwing its delivery state away.

Keys are the record type (int16) and the group id; values are version-prefixed, v0, flexible.
Members and their assignments stay in memory, as kopfka's consumer groups do: after a failover
members rejoin (UNKNOWN_MEMBER_ID) and get their assignment again.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kopfka.coordinator.record_io import Reader, RecordFormatError, Writer

SHARE_GROUP_METADATA = 11
SHARE_GROUP_STATE_PARTITION_METADATA = 15
SHARE_RECORD_TYPES = frozenset({SHARE_GROUP_METADATA, SHARE_GROUP_STATE_PARTITION_METADATA})


@dataclass
class StatePartitionMetadata:
    """topic id -> (topic name, partitions); deleting: topic id -> topic name."""

    initializing: dict[uuid.UUID, tuple[str, set[int]]] = field(default_factory=dict)
    initialized: dict[uuid.UUID, tuple[str, set[int]]] = field(default_factory=dict)
    deleting: dict[uuid.UUID, str] = field(default_factory=dict)


def share_group_key(record_type: int, group_id: str) -> bytes:
    return bytes(Writer().i16(record_type).string(group_id).buf)


def decode_share_group_key(data: bytes) -> tuple[int, str]:
    r = Reader(data)
    record_type = r.i16()
    group = r.string()
    if record_type not in SHARE_RECORD_TYPES or group is None:
        raise RecordFormatError(f"not a share group key (type {record_type})")
    return record_type, group


def _value_reader(data: bytes) -> Reader:
    version = Reader(data).i16()
    if version != 0:
        raise RecordFormatError(f"unknown share group value version {version}")
    r = Reader(data, flexible=True)
    r.pos = 2
    return r


def encode_group_metadata(epoch: int, metadata_hash: int) -> bytes:
    return bytes(Writer(flexible=True).i16(0).i32(epoch).i64(metadata_hash).tags().buf)


def decode_group_metadata(data: bytes) -> tuple[int, int]:
    r = _value_reader(data)
    return r.i32(), r.i64()


def _write_topics(w: Writer, topics: dict[uuid.UUID, tuple[str, set[int]]]) -> None:
    w.array_len(len(topics))
    for tid, (name, parts) in sorted(topics.items()):
        w.uuid(tid).string(name).array_len(len(parts))
        for p in sorted(parts):
            w.i32(p)
        w.tags()


def _read_topics(r: Reader) -> dict[uuid.UUID, tuple[str, set[int]]]:
    out = {}
    for _ in range(max(r.array_len(), 0)):
        tid, name = r.uuid(), r.string() or ""
        parts = {r.i32() for _ in range(max(r.array_len(), 0))}
        r.skip_tags()
        out[tid] = (name, parts)
    return out


def encode_state_partition_metadata(m: StatePartitionMetadata) -> bytes:
    w = Writer(flexible=True).i16(0)
    _write_topics(w, m.initializing)
    _write_topics(w, m.initialized)
    w.array_len(len(m.deleting))
    for tid, name in sorted(m.deleting.items()):
        w.uuid(tid).string(name).tags()
    return bytes(w.tags().buf)


def decode_state_partition_metadata(data: bytes) -> StatePartitionMetadata:
    r = _value_reader(data)
    initializing = _read_topics(r)
    initialized = _read_topics(r)
    deleting = {}
    for _ in range(max(r.array_len(), 0)):
        tid, name = r.uuid(), r.string() or ""
        r.skip_tags()
        deleting[tid] = name
    return StatePartitionMetadata(initializing, initialized, deleting)
