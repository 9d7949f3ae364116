"""The records of the __cluster_metadata log, and their compact encoding.

Kafka's metadata record schemas are not in kio, so kopfka defines its own: each record is
one Kafka record whose value is `type:u8 version:u8` followed by a compact JSON body (sorted
keys, no spaces; bytes fields as base64). The controller writes them; every node replays them in offset order.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

_REGISTRY: dict[int, type[MetadataRecord]] = {}


@dataclass(frozen=True)
class MetadataRecord:
    TYPE: ClassVar[int] = -1
    VERSION: ClassVar[int] = 0

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.TYPE in _REGISTRY:
            raise TypeError(f"duplicate metadata record type {cls.TYPE}")
        _REGISTRY[cls.TYPE] = cls


@dataclass(frozen=True)
class FeatureLevelRecord(MetadataRecord):
    TYPE: ClassVar[int] = 12
    name: str
    feature_level: int


@dataclass(frozen=True)
class Endpoint:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True)
class RegisterBrokerRecord(MetadataRecord):
    TYPE: ClassVar[int] = 0
    broker_id: int
    incarnation_id: str
    broker_epoch: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None
    fenced: bool = True
    in_controlled_shutdown: bool = False
    log_dirs: tuple[str, ...] = ()
    features: tuple[tuple[str, int, int], ...] = ()


@dataclass(frozen=True)
class UnregisterBrokerRecord(MetadataRecord):
    TYPE: ClassVar[int] = 1
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class BrokerRegistrationChangeRecord(MetadataRecord):
    """Fencing, controlled shutdown and directory changes; None = unchanged."""

    TYPE: ClassVar[int] = 17
    broker_id: int
    broker_epoch: int
    fenced: bool | None = None
    in_controlled_shutdown: bool | None = None
    log_dirs: tuple[str, ...] | None = None
    cordoned_log_dirs: tuple[str, ...] | None = None


@dataclass(frozen=True)
class TopicRecord(MetadataRecord):
    TYPE: ClassVar[int] = 2
    name: str
    topic_id: str


@dataclass(frozen=True)
class PartitionRecord(MetadataRecord):
    TYPE: ClassVar[int] = 3
    partition_id: int
    topic_id: str
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    directories: tuple[str, ...] = ()
    leader_recovery_state: int = 0
    eligible_leader_replicas: tuple[int, ...] = ()  # KIP-966
    last_known_elr: tuple[int, ...] = ()


@dataclass(frozen=True)
class PartitionChangeRecord(MetadataRecord):
    """A change to one partition; None means unchanged (as in Kafka's merge)."""

    TYPE: ClassVar[int] = 5
    partition_id: int
    topic_id: str
    isr: tuple[int, ...] | None = None
    leader: int | None = None  # -2 would be NO_LEADER_CHANGE in Kafka; None here
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    directories: tuple[str, ...] | None = None
    leader_recovery_state: int | None = None
    eligible_leader_replicas: tuple[int, ...] | None = None  # KIP-966
    last_known_elr: tuple[int, ...] | None = None


@dataclass(frozen=True)
class ConfigRecord(MetadataRecord):
    """A dynamic config: resource_type 2 = topic, 4 = broker (Kafka's ConfigResource types)."""

    TYPE: ClassVar[int] = 4
    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclass(frozen=True)
class RemoveTopicRecord(MetadataRecord):
    TYPE: ClassVar[int] = 9
    topic_id: str


@dataclass(frozen=True)
class ClientQuotaRecord(MetadataRecord):
    TYPE: ClassVar[int] = 14
    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float | None  # None = remove


@dataclass(frozen=True)
class UserScramCredentialRecord(MetadataRecord):
    """A user's SCRAM credential for one mechanism (1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512); never the password."""

    TYPE: ClassVar[int] = 11
    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True)
class RemoveUserScramCredentialRecord(MetadataRecord):
    TYPE: ClassVar[int] = 22
    name: str
    mechanism: int


@dataclass(frozen=True)
class AccessControlEntryRecord(MetadataRecord):
    """One ACL (Kafka's AclBinding with a uuid): the enums are Kafka's byte codes."""

    TYPE: ClassVar[int] = 18
    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True)
class RemoveAccessControlEntryRecord(MetadataRecord):
    TYPE: ClassVar[int] = 19
    id: str


@dataclass(frozen=True)
class ProducerIdsRecord(MetadataRecord):
    TYPE: ClassVar[int] = 15
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True)
class BeginTransactionRecord(MetadataRecord):
    TYPE: ClassVar[int] = 23
    name: str = ""


@dataclass(frozen=True)
class EndTransactionRecord(MetadataRecord):
    TYPE: ClassVar[int] = 24


@dataclass(frozen=True)
class AbortTransactionRecord(MetadataRecord):
    TYPE: ClassVar[int] = 25
    reason: str = ""


@dataclass(frozen=True)
class ClearElrRecord(MetadataRecord):
    """Clears the ELR and LastKnownElr of every partition of a topic, or of all topics ("") (KIP-966:
    written when min.insync.replicas changes, as the ELR was kept against the old value)."""

    TYPE: ClassVar[int] = 28
    topic_name: str = ""


@dataclass(frozen=True)
class NoOpRecord(MetadataRecord):
    TYPE: ClassVar[int] = 20


@dataclass(frozen=True)
class VotersRecord(MetadataRecord):
    """The KRaft voter set (KIP-853): (node id, directory id, host, port) per voter."""

    TYPE: ClassVar[int] = 100
    voters: tuple[tuple[int, str, str, int], ...] = field(default_factory=tuple)


class MetadataRecordError(ValueError):
    pass


class KafkaBinaryRecordError(MetadataRecordError):
    """A metadata record in Apache Kafka's binary format (frame version, api key and version as
    varints, then the message), which kopfka does not read yet: its own records are JSON after a
    2-byte header. Readers of a file re-raise it with `in_file` so the message names the file."""

    def in_file(self, path: object) -> KafkaBinaryRecordError:
        return KafkaBinaryRecordError(
            f"{path} was written in Apache Kafka's binary metadata record format, which kopfka does not read yet"
        )


def _kafka_binary(data: bytes) -> bool:
    """Kafka's frame version 1, a one-byte api key and a small version; kopfka's JSON body starts
    at the third byte with '{'."""
    return len(data) >= 3 and data[0] == 1 and data[1] < 0x80 and data[2] < 0x20


def _plain(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [_plain(getattr(value, f.name)) for f in dataclasses.fields(value)]
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value


def encode(record: MetadataRecord) -> bytes:
    body = {f.name: _plain(getattr(record, f.name)) for f in dataclasses.fields(record)}
    return bytes((record.TYPE, record.VERSION)) + json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def _revive(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(tp, str):
        if tp == "bytes":
            return base64.b64decode(value)
        if "Endpoint" in tp:
            return tuple(Endpoint(*e) for e in value)
        if tp.startswith("tuple[tuple"):
            return tuple(tuple(v) for v in value)
        if tp.startswith("tuple"):
            return tuple(value)
    return value


def decode(data: bytes) -> MetadataRecord:
    if len(data) < 2:
        raise MetadataRecordError("metadata record shorter than its 2-byte header")
    cls = _REGISTRY.get(data[0])
    if (cls is None or data[2:3] != b"{") and _kafka_binary(data):
        raise KafkaBinaryRecordError(f"a record in Apache Kafka's binary metadata format (api key {data[1]})")
    if cls is None:
        raise MetadataRecordError(f"unknown metadata record type {data[0]}")
    try:
        body = json.loads(data[2:])
        kwargs = {f.name: _revive(f.type, body[f.name]) for f in dataclasses.fields(cls) if f.name in body}
        return cls(**kwargs)
    except (ValueError, TypeError, KeyError) as exc:
        raise MetadataRecordError(f"cannot decode {cls.__name__}: {exc}") from exc
