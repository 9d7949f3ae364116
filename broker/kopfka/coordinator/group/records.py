"""The `__consumer_offsets` record formats, byte-compatible with Kafka's.

Keys start with an int16 "version" that is really the record type: 0/1 offset commit, 2 group
metadata; KIP-848 consumer-group records (3+) are recognised and skipped. Values follow
Kafka's OffsetCommitValue / GroupMetadataValue schemas; we write the versions Kafka 4.x writes
(offset commit value v3, or v1 when the commit carries an explicit expire timestamp; group
metadata value v3) and read every version 0-4, flexible ones included, so a log written by
Kafka loads here and vice versa.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kopfka.coordinator.record_io import Reader as _Reader
from kopfka.coordinator.record_io import RecordFormatError
from kopfka.coordinator.record_io import Writer as _Writer

OFFSET_COMMIT_KEY_V0 = 0
OFFSET_COMMIT_KEY = 1
GROUP_METADATA_KEY = 2


# --- keys ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass(frozen=True)
class OtherKey:
    """A record type we don't model (KIP-848 consumer group state, share groups, ...)."""

    record_type: int


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return bytes(_Writer().i16(OFFSET_COMMIT_KEY).string(group).string(topic).i32(partition).buf)


def group_key(group: str) -> bytes:
    return bytes(_Writer().i16(GROUP_METADATA_KEY).string(group).buf)


def decode_key(data: bytes) -> OffsetKey | GroupKey | OtherKey:
    r = _Reader(data)
    t = r.i16()
    if t in (OFFSET_COMMIT_KEY_V0, OFFSET_COMMIT_KEY):
        g, topic, p = r.string(), r.string(), r.i32()
        if g is None or topic is None:
            raise RecordFormatError("null group or topic in offset commit key")
        return OffsetKey(g, topic, p)
    if t == GROUP_METADATA_KEY:
        g = r.string()
        if g is None:
            raise RecordFormatError("null group in group metadata key")
        return GroupKey(g)
    return OtherKey(t)


# --- offset commit value --------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1


def encode_offset_value(v: OffsetValue) -> bytes:
    w = _Writer()
    if v.expire_timestamp >= 0:
        w.i16(1).i64(v.offset).string(v.metadata).i64(v.commit_timestamp).i64(v.expire_timestamp)
    else:
        w.i16(3).i64(v.offset).i32(v.leader_epoch).string(v.metadata).i64(v.commit_timestamp)
    return bytes(w.buf)


def decode_offset_value(data: bytes) -> OffsetValue:
    version = _Reader(data).i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown offset commit value version {version}")
    r = _Reader(data, flexible=version >= 4)
    r.pos = 2
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    r.skip_tags()
    return OffsetValue(offset, epoch, metadata, commit_ts, expire_ts)


# --- group metadata value -------------------------------------------------------------------------


@dataclass
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberValue] = field(default_factory=list)


GROUP_VALUE_VERSION = 3


def encode_group_value(v: GroupValue) -> bytes:
    w = _Writer().i16(GROUP_VALUE_VERSION)
    w.string(v.protocol_type).i32(v.generation).string(v.protocol).string(v.leader).i64(v.current_state_timestamp)
    w.i32(len(v.members))
    for m in v.members:
        w.string(m.member_id).string(m.group_instance_id).string(m.client_id).string(m.client_host)
        w.i32(m.rebalance_timeout).i32(m.session_timeout).bytes_(m.subscription).bytes_(m.assignment)
    return bytes(w.buf)


def decode_group_value(data: bytes) -> GroupValue:
    version = _Reader(data).i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown group metadata value version {version}")
    r = _Reader(data, flexible=version >= 4)
    r.pos = 2
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(max(r.array_len(), 0)):
        member_id = r.string() or ""
        instance = r.string() if version >= 3 else None
        client_id = r.string() or ""
        client_host = r.string() or ""
        session_timeout = r.i32()
        rebalance_timeout = session_timeout
        if version >= 1:
            rebalance_timeout, session_timeout = session_timeout, r.i32()
        subscription = r.bytes_() or b""
        assignment = r.bytes_() or b""
        r.skip_tags()
        members.append(
            MemberValue(
                member_id,
                instance,
                client_id,
                client_host,
                rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
            )
        )
    r.skip_tags()
    return GroupValue(protocol_type, generation, protocol, leader, ts, members)
