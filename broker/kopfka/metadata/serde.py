"""Apache Kafka's binary encoding of metadata records (MetadataRecordSerde) and KRaft control records.

A metadata record (a data record of `__cluster_metadata`, of a snapshot or of bootstrap.checkpoint)
has a null key and this value: frame version 1, the record's api key and version as unsigned varints,
then the record in Kafka's flexible protocol encoding (compact strings, bytes and arrays, 16-byte
uuids, and a tagged-field section closing every struct). kio generates no entities for these (they
are not API messages), so their schemas are written out here as data: for every field its name
(Kafka's, in snake case), type, first version, nullability and, for a tagged field, its tag and the
default that leaves it out. They are Kafka 4.3's metadata/*.json; a test holds this table against
the JSON in the installed Kafka's jar. The primitives are kio's readers and writers.

A control record (in a control batch) has the key `version:int16 type:int16` and a value that is
one of the raft control messages; kio has those entities (LeaderChangeMessage, SnapshotHeader/Footer,
KRaftVersionRecord, VotersRecord), so they are encoded and decoded with kio directly.
"""

from __future__ import annotations

import io
import struct
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from kio.schema.k_raft_version_record.v0 import KRaftVersionRecord
from kio.schema.leader_change_message.v0 import LeaderChangeMessage as LeaderChangeMessageV0
from kio.schema.leader_change_message.v1 import LeaderChangeMessage as LeaderChangeMessageV1
from kio.schema.snapshot_footer_record.v0 import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0 import SnapshotHeaderRecord
from kio.schema.voters_record.v0 import VotersRecord
from kio.serial import entity_reader, entity_writer
from kio.serial import readers as r
from kio.serial import writers as w
from kio.serial.errors import BufferUnderflow, InvalidUnicode
from kio.static.primitive import uvarint

from kopfka.protocol.errors import CorruptRecordError
from kopfka.protocol.record_codec import decode_control_key, encode_control_key
from kopfka.protocol.request_guard import BodyError, check_body

FRAME_VERSION = 1
ZERO_UUID = uuid.UUID(int=0)


class SerdeError(ValueError):
    """Bytes that are not a record of a known schema (truncated, unknown type or version, garbage)."""


# --- schemas ------------------------------------------------------------------------------------
# a field type: a primitive name, ("[]", element) for a compact array, or a tuple of F for a struct
@dataclass(frozen=True)
class F:
    """One field of a metadata record schema: Kafka's name, type, first version, nullability and tag."""

    name: str
    type: Any
    since: int = 0
    tag: int | None = None
    nullable: bool = False
    default: Any = None  # a tagged field equal to it is left out; None: null, or () for an array

    def tag_default(self) -> Any:
        if self.default is not None or self.nullable:
            return self.default
        return () if isinstance(self.type, tuple) and self.type[:1] == ("[]",) else self.default


@dataclass(frozen=True)
class Schema:
    """One metadata record type as Kafka's metadata/*.json defines it: api key, name, latest version, fields."""

    api_key: int
    name: str
    max_version: int
    fields: tuple[F, ...]


def _arr(elem: Any) -> tuple[str, Any]:
    return ("[]", elem)


_ENDPOINT = (F("name", "string"), F("host", "string"), F("port", "uint16"), F("security_protocol", "int16"))
_FEATURE = (F("name", "string"), F("min_supported_version", "int16"), F("max_supported_version", "int16"))
_INTS, _UUIDS = _arr("int32"), _arr("uuid")

METADATA_SCHEMAS: dict[int, Schema] = {
    s.api_key: s
    for s in (
        Schema(
            0,
            "RegisterBrokerRecord",
            4,
            (
                F("broker_id", "int32"),
                F("is_migrating_zk_broker", "bool", since=2),
                F("incarnation_id", "uuid"),
                F("broker_epoch", "int64"),
                F("end_points", _arr(_ENDPOINT)),
                F("features", _arr(_FEATURE)),
                F("rack", "string", nullable=True),
                F("fenced", "bool"),
                F("in_controlled_shutdown", "bool", since=1),
                F("log_dirs", _UUIDS, since=3, tag=0),
                F("cordoned_log_dirs", _UUIDS, since=4, tag=1, nullable=True),
            ),
        ),
        Schema(1, "UnregisterBrokerRecord", 0, (F("broker_id", "int32"), F("broker_epoch", "int64"))),
        Schema(2, "TopicRecord", 0, (F("name", "string"), F("topic_id", "uuid"))),
        Schema(
            3,
            "PartitionRecord",
            2,
            (
                F("partition_id", "int32"),
                F("topic_id", "uuid"),
                F("replicas", _INTS),
                F("isr", _INTS),
                F("removing_replicas", _INTS),
                F("adding_replicas", _INTS),
                F("leader", "int32"),
                F("leader_recovery_state", "int8", tag=0, default=0),
                F("leader_epoch", "int32"),
                F("partition_epoch", "int32"),
                F("directories", _UUIDS, since=1),
                F("eligible_leader_replicas", _INTS, since=2, tag=1, nullable=True),
                F("last_known_elr", _INTS, since=2, tag=2, nullable=True),
            ),
        ),
        Schema(
            4,
            "ConfigRecord",
            0,
            (
                F("resource_type", "int8"),
                F("resource_name", "string"),
                F("name", "string"),
                F("value", "string", nullable=True),
            ),
        ),
        Schema(
            5,
            "PartitionChangeRecord",
            2,
            (
                F("partition_id", "int32"),
                F("topic_id", "uuid"),
                F("isr", _INTS, tag=0, nullable=True),
                F("leader", "int32", tag=1, default=-2),
                F("replicas", _INTS, tag=2, nullable=True),
                F("removing_replicas", _INTS, tag=3, nullable=True),
                F("adding_replicas", _INTS, tag=4, nullable=True),
                F("leader_recovery_state", "int8", tag=5, default=-1),
                F("directories", _UUIDS, since=1, tag=8, nullable=True),
                F("eligible_leader_replicas", _INTS, since=2, tag=6, nullable=True),
                F("last_known_elr", _INTS, since=2, tag=7, nullable=True),
            ),
        ),
        Schema(7, "FenceBrokerRecord", 0, (F("id", "int32"), F("epoch", "int64"))),
        Schema(8, "UnfenceBrokerRecord", 0, (F("id", "int32"), F("epoch", "int64"))),
        Schema(9, "RemoveTopicRecord", 0, (F("topic_id", "uuid"),)),
        Schema(
            10,
            "DelegationTokenRecord",
            0,
            (
                F("owner", "string"),
                F("requester", "string"),
                F("renewers", _arr("string")),
                F("issue_timestamp", "int64"),
                F("max_timestamp", "int64"),
                F("expiration_timestamp", "int64"),
                F("token_id", "string"),
            ),
        ),
        Schema(
            11,
            "UserScramCredentialRecord",
            0,
            (
                F("name", "string"),
                F("mechanism", "int8"),
                F("salt", "bytes"),
                F("stored_key", "bytes"),
                F("server_key", "bytes"),
                F("iterations", "int32"),
            ),
        ),
        Schema(12, "FeatureLevelRecord", 0, (F("name", "string"), F("feature_level", "int16"))),
        Schema(
            14,
            "ClientQuotaRecord",
            0,
            (
                F("entity", _arr((F("entity_type", "string"), F("entity_name", "string", nullable=True)))),
                F("key", "string"),
                F("value", "float64"),
                F("remove", "bool"),
            ),
        ),
        Schema(
            15,
            "ProducerIdsRecord",
            0,
            (F("broker_id", "int32"), F("broker_epoch", "int64"), F("next_producer_id", "int64")),
        ),
        Schema(
            17,
            "BrokerRegistrationChangeRecord",
            3,
            (
                F("broker_id", "int32"),
                F("broker_epoch", "int64"),
                F("fenced", "int8", tag=0, default=0),
                F("in_controlled_shutdown", "int8", since=1, tag=1, default=0),
                F("log_dirs", _UUIDS, since=2, tag=2),
                F("cordoned_log_dirs", _UUIDS, since=3, tag=3, nullable=True),
            ),
        ),
        Schema(
            18,
            "AccessControlEntryRecord",
            0,
            (
                F("id", "uuid"),
                F("resource_type", "int8"),
                F("resource_name", "string"),
                F("pattern_type", "int8"),
                F("principal", "string"),
                F("host", "string"),
                F("operation", "int8"),
                F("permission_type", "int8"),
            ),
        ),
        Schema(19, "RemoveAccessControlEntryRecord", 0, (F("id", "uuid"),)),
        Schema(20, "NoOpRecord", 0, ()),
        Schema(21, "ZkMigrationStateRecord", 0, (F("zk_migration_state", "int8"),)),
        Schema(22, "RemoveUserScramCredentialRecord", 0, (F("name", "string"), F("mechanism", "int8"))),
        Schema(23, "BeginTransactionRecord", 0, (F("name", "string", tag=0, nullable=True),)),
        Schema(24, "EndTransactionRecord", 0, ()),
        Schema(25, "AbortTransactionRecord", 0, (F("reason", "string", tag=0, nullable=True),)),
        Schema(26, "RemoveDelegationTokenRecord", 0, (F("token_id", "string"),)),
        Schema(
            27,
            "RegisterControllerRecord",
            0,
            (
                F("controller_id", "int32"),
                F("incarnation_id", "uuid"),
                F("zk_migration_ready", "bool"),
                F("end_points", _arr(_ENDPOINT)),
                F("features", _arr(_FEATURE)),
            ),
        ),
        Schema(28, "ClearElrRecord", 0, (F("topic_name", "string"),)),
    )
}


# --- the flexible encoding, on kio's primitives -----------------------------------------------------
_WRITERS: dict[str, Callable[[Any, Any], None]] = {
    "int8": w.write_int8,
    "int16": w.write_int16,
    "int32": w.write_int32,
    "int64": w.write_int64,
    "uint16": w.write_uint16,
    "float64": w.write_float64,
    "bool": w.write_boolean,
    "uuid": w.write_uuid,
}
_READERS: dict[str, Callable[[Any, int], tuple[Any, int]]] = {
    "int8": r.read_int8,
    "int16": r.read_int16,
    "int32": r.read_int32,
    "int64": r.read_int64,
    "uint16": r.read_uint16,
    "float64": r.read_float64,
    "bool": r.read_boolean,
}


def _write(out: io.BytesIO, t: Any, v: Any, nullable: bool, version: int, where: str) -> None:
    if isinstance(t, tuple) and t[:1] == ("[]",):
        if v is None:
            if not nullable:
                raise SerdeError(f"{where}: null for a non-nullable array")
            w.write_compact_array_length(out, None)
            return
        w.write_compact_array_length(out, len(v))
        for item in v:
            _write(out, t[1], item, False, version, where)
    elif isinstance(t, tuple):
        _write_struct(out, t, v, version, where)
    elif t in ("string", "bytes"):
        if v is None:
            if not nullable:
                raise SerdeError(f"{where}: null for a non-nullable {t}")
            w.write_nullable_compact_string(out, None)
        else:
            w.write_compact_string(out, v)
    else:
        try:
            _WRITERS[t](out, v)
        except (struct.error, TypeError, AttributeError) as exc:
            raise SerdeError(f"{where}: {v!r} is not a valid {t}") from exc


def _write_struct(out: io.BytesIO, fields: tuple[F, ...], values: Mapping[str, Any], version: int, where: str) -> None:
    tagged: list[tuple[int, bytes]] = []
    for f in fields:
        if f.since > version:
            continue
        at = f"{where}.{f.name}"
        if f.tag is None:
            if f.name not in values:
                raise SerdeError(f"{at} is missing")
            _write(out, f.type, values[f.name], f.nullable, version, at)
            continue
        v = values.get(f.name, f.tag_default())
        if v == f.tag_default() and (v is None) == (f.tag_default() is None):
            continue
        buf = io.BytesIO()
        _write(buf, f.type, v, f.nullable, version, at)
        tagged.append((f.tag, buf.getvalue()))
    w.write_unsigned_varint(out, cast(uvarint, len(tagged)))
    for tag, encoded in sorted(tagged):
        w.write_unsigned_varint(out, cast(uvarint, tag))
        w.write_unsigned_varint(out, cast(uvarint, len(encoded)))
        out.write(encoded)


def _read(data: memoryview, pos: int, t: Any, nullable: bool, version: int, where: str) -> tuple[Any, int]:
    fixed = _READERS.get(t) if type(t) is str else None  # the common case first: replay speed
    if fixed is not None:
        value, size = fixed(data, pos)
        return value, pos + size
    if isinstance(t, tuple) and t[:1] == ("[]",):
        n, size = r.read_unsigned_varint(data, pos)
        pos += size
        if n == 0:
            if not nullable:
                raise SerdeError(f"{where}: null in a non-nullable array")
            return None, pos
        if n - 1 > len(data) - pos:
            raise SerdeError(f"{where}: an array of {n - 1} elements in {len(data) - pos} bytes")
        items = []
        elem = _READERS.get(t[1]) if type(t[1]) is str else None
        for _ in range(n - 1):
            if elem is not None:
                item, size = elem(data, pos)
                pos += size
            else:
                item, pos = _read(data, pos, t[1], False, version, where)
            items.append(item)
        return tuple(items), pos
    if isinstance(t, tuple):
        return _read_struct(data, pos, t, version, where)
    if t in ("string", "bytes"):
        n, size = r.read_unsigned_varint(data, pos)
        if n == 0:
            if not nullable:
                raise SerdeError(f"{where}: null in a non-nullable {t}")
            return None, pos + size
        if t == "bytes":
            raw, size = r.read_compact_string_as_bytes(data, pos)
            return bytes(raw), pos + size
        s, size = r.read_compact_string(data, pos)
        return s, pos + size
    if t == "uuid":
        u, size = r.read_uuid(data, pos)
        return (ZERO_UUID if u is None else u), pos + size
    raise SerdeError(f"{where}: unknown type {t!r}")


def _read_struct(
    data: memoryview, pos: int, fields: tuple[F, ...], version: int, where: str
) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    by_tag: dict[int, F] = {}
    for f in fields:
        if f.since > version:
            continue
        if f.tag is None:
            out[f.name], pos = _read(data, pos, f.type, f.nullable, version, f"{where}.{f.name}")
        else:
            out[f.name] = f.tag_default()
            by_tag[f.tag] = f
    count, size = r.read_unsigned_varint(data, pos)
    pos += size
    for _ in range(count):
        tag, size = r.read_unsigned_varint(data, pos)
        pos += size
        length, size = r.read_unsigned_varint(data, pos)
        pos += size
        end = pos + length
        if end > len(data):
            raise SerdeError(f"{where}: tagged field {tag} runs past the end")
        known = by_tag.get(tag)
        if known is not None:  # unknown tags are skipped, as Kafka does
            value, got = _read(data[:end], pos, known.type, known.nullable, version, f"{where}.{known.name}")
            if got != end:
                raise SerdeError(f"{where}.{known.name}: {end - got} byte(s) left in the tagged field")
            out[known.name] = value
        pos = end
    return out, pos


# --- metadata records ------------------------------------------------------------------------------
def write_metadata(api_key: int, version: int, values: Mapping[str, Any]) -> bytes:
    """A metadata record's value as MetadataRecordSerde writes it."""
    schema = METADATA_SCHEMAS.get(api_key)
    if schema is None:
        raise SerdeError(f"unknown metadata record type {api_key}")
    if not 0 <= version <= schema.max_version:
        raise SerdeError(f"{schema.name} has no version {version}")
    out = io.BytesIO()
    for n in (FRAME_VERSION, api_key, version):
        w.write_unsigned_varint(out, cast(uvarint, n))
    _write_struct(out, schema.fields, values, version, schema.name)
    return out.getvalue()


def read_metadata(data: bytes | memoryview) -> tuple[Schema, int, dict[str, Any]]:
    """(schema, version, fields) of a metadata record's value; SerdeError unless it is exactly one."""
    view = memoryview(data)
    try:
        frame, size = r.read_unsigned_varint(view, 0)
        pos = size
        if frame != FRAME_VERSION:
            raise SerdeError(f"unknown metadata record frame version {frame} (Kafka's is {FRAME_VERSION})")
        api_key, size = r.read_unsigned_varint(view, pos)
        pos += size
        version, size = r.read_unsigned_varint(view, pos)
        pos += size
        schema = METADATA_SCHEMAS.get(api_key)
        if schema is None:
            raise SerdeError(f"unknown metadata record type {api_key}")
        if version > schema.max_version:
            raise SerdeError(f"{schema.name} version {version} is newer than this binary's {schema.max_version}")
        values, pos = _read_struct(view, pos, schema.fields, version, schema.name)
    except (BufferUnderflow, ValueError) as exc:
        if isinstance(exc, SerdeError):
            raise
        raise SerdeError(f"truncated or malformed metadata record: {exc}") from exc
    except InvalidUnicode as exc:
        raise SerdeError(f"a string in a metadata record is not UTF-8: {exc}") from exc
    if pos != len(view):
        raise SerdeError(f"{len(view) - pos} byte(s) of garbage after {schema.name}")
    return schema, version, values


# --- KRaft control records ---------------------------------------------------------------------------
# Kafka's ControlRecordType: the type goes in the record key (version 0)
LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS = 2, 3, 4, 5, 6
_CONTROL_ENTITIES: dict[int, tuple[type[Any], ...]] = {
    LEADER_CHANGE: (LeaderChangeMessageV0, LeaderChangeMessageV1),
    SNAPSHOT_HEADER: (SnapshotHeaderRecord,),
    SNAPSHOT_FOOTER: (SnapshotFooterRecord,),
    KRAFT_VERSION: (KRaftVersionRecord,),
    KRAFT_VOTERS: (VotersRecord,),
}


def write_control(entity: Any) -> tuple[bytes, bytes]:
    """(key, value) of a control record holding a kio control entity."""
    for kind, classes in _CONTROL_ENTITIES.items():
        if type(entity) in classes:
            out = io.BytesIO()
            entity_writer(type(entity))(out, entity)
            return encode_control_key(kind), out.getvalue()
    raise SerdeError(f"{type(entity).__name__} is not a KRaft control record")


def read_control(key: bytes | None, value: bytes | None) -> tuple[int, Any]:
    """(control type, kio entity) of a control record; the entity is None for types without one
    here (a transaction marker, or a type newer than this binary)."""
    try:
        _key_version, kind = decode_control_key(key)
    except CorruptRecordError as exc:
        raise SerdeError(str(exc)) from exc
    classes = _CONTROL_ENTITIES.get(kind)
    if classes is None or value is None:
        return kind, None
    try:
        (version,) = struct.unpack_from(">h", value, 0)
        cls = classes[min(max(version, 0), len(classes) - 1)]
        check_body(cls, value, 0)  # a garbage count must not reach kio's allocator
        entity, _ = entity_reader(cls)(memoryview(value), 0)
    except (struct.error, BufferUnderflow, InvalidUnicode, BodyError, ValueError) as exc:
        raise SerdeError(f"malformed control record of type {kind}: {exc}") from exc
    return kind, entity
