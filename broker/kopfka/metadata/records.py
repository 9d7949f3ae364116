"""The records of the __cluster_metadata log, as kopfka's dataclasses, and their bytes.

The controller writes them; every node replays them in offset order. On disk and on the wire
they are Apache Kafka's: a metadata record is one Kafka record with a null key and the value
Kafka's MetadataRecordSerde writes (`serde.py`), in the version Kafka 4.3 writes at the
finalized metadata.version; the KRaft voter set, the kraft.version and the leader of each epoch
are control records in control batches (`control_batch`), as Kafka's raft writes them.

The dataclasses keep kopfka's own types where they read better (topic and directory ids as
Kafka's base64 text, a broker's incarnation id as uuid text, an endpoint's security protocol by
name, None for "unchanged" in change records); the mapping to Kafka's fields and types is here, at
the codec boundary. Dirs written by earlier kopfka releases hold a JSON encoding of kopfka's own
(`type:u8 version:u8` then compact JSON): those are still read, never written.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import kio.schema.k_raft_version_record.v0.data as kio_kraft
import kio.schema.leader_change_message.v0.data as kio_leader_v0
import kio.schema.leader_change_message.v1.data as kio_leader
import kio.schema.voters_record.v0.data as kio_voters
from kio.schema.types import BrokerId
from kio.static.primitive import i16, i32, u16

from kopfka import uuids
from kopfka.metadata import serde
from kopfka.metadata.features import (
    ELIGIBLE_LEADER_REPLICAS_VERSION,
    LATEST_PRODUCTION_METADATA_VERSION,
    METADATA_VERSION,
    SUPPORTED_FEATURES,
)
from kopfka.metadata.features import (
    KRAFT_VERSION as KRAFT_VERSION_FEATURE,
)

_REGISTRY: dict[int, type[MetadataRecord]] = {}


@dataclass(frozen=True)
class MetadataRecord:
    """Base of the metadata log's records; each subclass registers under its TYPE (Kafka's api key)."""

    TYPE: ClassVar[int] = -1
    VERSION: ClassVar[int] = 0

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.TYPE in _REGISTRY:
            raise TypeError(f"duplicate metadata record type {cls.TYPE}")
        _REGISTRY[cls.TYPE] = cls


@dataclass(frozen=True)
class FeatureLevelRecord(MetadataRecord):
    """A finalized feature level (metadata.version among them); level 0 removes the feature (not metadata.version)."""

    TYPE: ClassVar[int] = 12
    name: str
    feature_level: int


@dataclass(frozen=True)
class Endpoint:
    """A listener a broker or controller registers: name, host, port and security protocol by name."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True)
class RegisterBrokerRecord(MetadataRecord):
    """A broker's registration for one epoch: its endpoints, rack, state, log dirs and supported features."""

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
    cordoned_log_dirs: tuple[str, ...] | None = None  # None: not reported (before 4.3-IV0)


@dataclass(frozen=True)
class UnregisterBrokerRecord(MetadataRecord):
    """Removes a broker's registration, if it is still the one of `broker_epoch`."""

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
    """Creates a topic: its name and topic id; its partitions follow as PartitionRecords."""

    TYPE: ClassVar[int] = 2
    name: str
    topic_id: str


@dataclass(frozen=True)
class PartitionRecord(MetadataRecord):
    """One partition's full registration: replicas, ISR, leader and epochs, reassignment and ELR state."""

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
    """Deletes a topic, its partitions and its topic config."""

    TYPE: ClassVar[int] = 9
    topic_id: str


@dataclass(frozen=True)
class ClientQuotaRecord(MetadataRecord):
    """Sets (or, with value None, removes) one quota key of a client quota entity."""

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
    """Deletes a user's SCRAM credential for one mechanism."""

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
    """Deletes the ACL with this id."""

    TYPE: ClassVar[int] = 19
    id: str


@dataclass(frozen=True)
class ProducerIdsRecord(MetadataRecord):
    """A producer id block given to a broker: `next_producer_id` is where the next block starts."""

    TYPE: ClassVar[int] = 15
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True)
class BeginTransactionRecord(MetadataRecord):
    """Opens a metadata transaction (KIP-868): the records up to its EndTransactionRecord apply together."""

    TYPE: ClassVar[int] = 23
    name: str = ""


@dataclass(frozen=True)
class EndTransactionRecord(MetadataRecord):
    """Closes a metadata transaction: its records are applied as one delta."""

    TYPE: ClassVar[int] = 24


@dataclass(frozen=True)
class AbortTransactionRecord(MetadataRecord):
    """Aborts a metadata transaction: its records are discarded; `reason` is logged."""

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
    """Kafka's no-op record (KIP-835: its controller writes one periodically so the log keeps advancing);
    replay ignores it."""

    TYPE: ClassVar[int] = 20


@dataclass(frozen=True)
class FenceBrokerRecord(MetadataRecord):
    """Fences a broker (written by Kafka before 3.3-IV3; kopfka writes BrokerRegistrationChangeRecord)."""

    TYPE: ClassVar[int] = 7
    id: int
    epoch: int


@dataclass(frozen=True)
class UnfenceBrokerRecord(MetadataRecord):
    """Unfences a broker (written by Kafka before 3.3-IV3; kopfka writes BrokerRegistrationChangeRecord)."""

    TYPE: ClassVar[int] = 8
    id: int
    epoch: int


@dataclass(frozen=True)
class DelegationTokenRecord(MetadataRecord):
    """Kafka's delegation tokens; kopfka has none, and reads them only to replay a Kafka-written log."""

    TYPE: ClassVar[int] = 10
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    max_timestamp: int
    expiration_timestamp: int
    token_id: str


@dataclass(frozen=True)
class RemoveDelegationTokenRecord(MetadataRecord):
    """Deletes a Kafka delegation token; kopfka keeps none and reads it only to replay a Kafka-written log."""

    TYPE: ClassVar[int] = 26
    token_id: str


@dataclass(frozen=True)
class ZkMigrationStateRecord(MetadataRecord):
    """Kafka's ZooKeeper-migration state; read from a Kafka-written log and ignored."""

    TYPE: ClassVar[int] = 21
    zk_migration_state: int


@dataclass(frozen=True)
class RegisterControllerRecord(MetadataRecord):
    """A controller's registration, as Kafka's controllers write it (KIP-919); kopfka's do not."""

    TYPE: ClassVar[int] = 27
    controller_id: int
    incarnation_id: str
    zk_migration_ready: bool
    endpoints: tuple[Endpoint, ...]
    features: tuple[tuple[str, int, int], ...] = ()


# --- KRaft control records: not metadata records, but read from (and written into) the same log --
@dataclass(frozen=True)
class ControlRecord(MetadataRecord):
    """A record that goes in a control batch (Kafka's ControlRecordType in the key). Its TYPE is
    1000 + that control type: a registry key only, apart from the metadata records' api keys."""


@dataclass(frozen=True)
class VotersRecord(ControlRecord):
    """The KRaft voter set (KIP-853): (node id, directory id, host, port) per voter, each on the
    controller listener `listener_name`; Kafka's KRaftVoters control record."""

    TYPE: ClassVar[int] = 1006
    voters: tuple[tuple[int, str, str, int], ...] = field(default_factory=tuple)
    listener_name: str = "CONTROLLER"


@dataclass(frozen=True)
class KRaftVersionRecord(ControlRecord):
    """The finalized kraft.version, as Kafka writes it next to the first voter set."""

    TYPE: ClassVar[int] = 1005
    kraft_version: int = 1


@dataclass(frozen=True)
class LeaderChangeRecord(ControlRecord):
    """The first record of each epoch, written by its new leader (Kafka's LeaderChangeMessage)."""

    TYPE: ClassVar[int] = 1002
    leader_id: int
    voters: tuple[tuple[int, str], ...] = ()  # (voter id, directory id)
    granting_voters: tuple[tuple[int, str], ...] = ()


class MetadataRecordError(ValueError):
    pass


# --- Kafka's binary format -----------------------------------------------------------------------
# kopfka's field types on the left of Kafka's: uuids as text, protocols by name, None = unchanged
_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}  # Kafka's SecurityProtocol
_PROTOCOLS = {v: k for k, v in _PROTOCOL_IDS.items()}
KRAFT_SUPPORTED = SUPPORTED_FEATURES[KRAFT_VERSION_FEATURE]  # each voter's range in KRaftVoters
# Kafka's BrokerRegistrationFencingChange / InControlledShutdownChange: 0 = no change
_FENCING = {None: 0, True: 1, False: -1}
_SHUTDOWN = {None: 0, True: 1}


def _uuid(text: str) -> uuid.UUID:
    return uuids.from_str(text) if text else serde.ZERO_UUID


def _uuids(texts: tuple[str, ...] | None) -> tuple[uuid.UUID, ...] | None:
    return None if texts is None else tuple(_uuid(t) for t in texts)


def _texts(ids: tuple[uuid.UUID, ...] | None) -> tuple[str, ...] | None:
    return None if ids is None else tuple(uuids.to_str(i) for i in ids)


def _endpoints(eps: tuple[Endpoint, ...]) -> list[dict[str, Any]]:
    out = []
    for e in eps:
        if e.security_protocol not in _PROTOCOL_IDS:
            raise MetadataRecordError(f"unknown security protocol {e.security_protocol!r} on listener {e.name}")
        out.append(
            {"name": e.name, "host": e.host, "port": e.port, "security_protocol": _PROTOCOL_IDS[e.security_protocol]}
        )
    return out


def _from_endpoints(eps: tuple[dict[str, Any], ...]) -> tuple[Endpoint, ...]:
    return tuple(
        Endpoint(e["name"], e["host"], e["port"], _PROTOCOLS.get(e["security_protocol"], str(e["security_protocol"])))
        for e in eps
    )


def _features(fs: tuple[tuple[str, int, int], ...]) -> list[dict[str, Any]]:
    return [{"name": n, "min_supported_version": lo, "max_supported_version": hi} for n, lo, hi in fs]


def _from_features(fs: tuple[dict[str, Any], ...]) -> tuple[tuple[str, int, int], ...]:
    return tuple((f["name"], f["min_supported_version"], f["max_supported_version"]) for f in fs)


def _to_kafka(rec: MetadataRecord) -> dict[str, Any]:
    """The record's fields as Kafka's schema names and types them."""
    values = {f.name: getattr(rec, f.name) for f in dataclasses.fields(rec)}
    if isinstance(rec, RegisterBrokerRecord):
        values |= {
            "is_migrating_zk_broker": False,
            "incarnation_id": uuid.UUID(rec.incarnation_id),
            "end_points": _endpoints(rec.endpoints),
            "features": _features(rec.features),
            "log_dirs": _uuids(rec.log_dirs),
            "cordoned_log_dirs": _uuids(rec.cordoned_log_dirs),
        }
    elif isinstance(rec, RegisterControllerRecord):
        values |= {
            "incarnation_id": uuid.UUID(rec.incarnation_id),
            "end_points": _endpoints(rec.endpoints),
            "features": _features(rec.features),
        }
    elif isinstance(rec, PartitionRecord):  # an empty ELR is left out (null), as Kafka does
        values |= {
            "topic_id": _uuid(rec.topic_id),
            "directories": _uuids(rec.directories),
            "eligible_leader_replicas": rec.eligible_leader_replicas or None,
            "last_known_elr": rec.last_known_elr or None,
        }
    elif isinstance(rec, PartitionChangeRecord):
        values |= {
            "topic_id": _uuid(rec.topic_id),
            "directories": _uuids(rec.directories),
            "leader": -2 if rec.leader is None else rec.leader,
            "leader_recovery_state": -1 if rec.leader_recovery_state is None else rec.leader_recovery_state,
        }
    elif isinstance(rec, BrokerRegistrationChangeRecord):
        if rec.in_controlled_shutdown is False:
            raise MetadataRecordError("Kafka's BrokerRegistrationChangeRecord cannot leave controlled shutdown")
        values |= {
            "fenced": _FENCING[rec.fenced],
            "in_controlled_shutdown": _SHUTDOWN[rec.in_controlled_shutdown],
            "log_dirs": _uuids(rec.log_dirs) or (),
            "cordoned_log_dirs": _uuids(rec.cordoned_log_dirs),
        }
    elif isinstance(rec, TopicRecord | RemoveTopicRecord):
        values["topic_id"] = _uuid(rec.topic_id)
    elif isinstance(rec, AccessControlEntryRecord | RemoveAccessControlEntryRecord):
        values["id"] = _uuid(rec.id)
    elif isinstance(rec, ClientQuotaRecord):
        values |= {
            "entity": [{"entity_type": t, "entity_name": n} for t, n in rec.entity],
            "value": 0.0 if rec.value is None else rec.value,
            "remove": rec.value is None,
        }
    elif isinstance(rec, BeginTransactionRecord):
        values["name"] = rec.name or None
    elif isinstance(rec, AbortTransactionRecord):
        values["reason"] = rec.reason or None
    return values


def _from_kafka(cls: type[MetadataRecord], v: dict[str, Any]) -> MetadataRecord:
    if cls is RegisterBrokerRecord:
        return RegisterBrokerRecord(
            v["broker_id"],
            str(v["incarnation_id"]),
            v["broker_epoch"],
            _from_endpoints(v["end_points"]),
            v["rack"],
            v["fenced"],
            v.get("in_controlled_shutdown", False),
            _texts(v.get("log_dirs", ())) or (),
            _from_features(v["features"]),
            _texts(v.get("cordoned_log_dirs")),
        )
    if cls is RegisterControllerRecord:
        return RegisterControllerRecord(
            v["controller_id"],
            str(v["incarnation_id"]),
            v["zk_migration_ready"],
            _from_endpoints(v["end_points"]),
            _from_features(v["features"]),
        )
    if cls is PartitionRecord:
        v |= {"topic_id": uuids.to_str(v["topic_id"]), "directories": _texts(v.get("directories", ()))}
        v["eligible_leader_replicas"] = v.get("eligible_leader_replicas") or ()
        v["last_known_elr"] = v.get("last_known_elr") or ()
    elif cls is PartitionChangeRecord:
        v |= {
            "topic_id": uuids.to_str(v["topic_id"]),
            "directories": _texts(v.get("directories")),
            "leader": None if v["leader"] == -2 else v["leader"],
            "leader_recovery_state": None if v["leader_recovery_state"] == -1 else v["leader_recovery_state"],
        }
    elif cls is BrokerRegistrationChangeRecord:
        fenced = {1: True, -1: False}.get(v["fenced"])
        if v["fenced"] not in (-1, 0, 1):
            raise MetadataRecordError(f"BrokerRegistrationChangeRecord with unknown fencing change {v['fenced']}")
        shutdown = v.get("in_controlled_shutdown", 0)
        if shutdown not in (0, 1):
            raise MetadataRecordError(f"BrokerRegistrationChangeRecord with unknown shutdown change {shutdown}")
        v |= {
            "fenced": fenced,
            "in_controlled_shutdown": True if shutdown == 1 else None,
            "log_dirs": _texts(v.get("log_dirs")) or None,
            "cordoned_log_dirs": _texts(v.get("cordoned_log_dirs")),
        }
    elif cls in (TopicRecord, RemoveTopicRecord):
        v["topic_id"] = uuids.to_str(v["topic_id"])
    elif cls in (AccessControlEntryRecord, RemoveAccessControlEntryRecord):
        v["id"] = uuids.to_str(v["id"])
    elif cls is ClientQuotaRecord:
        v |= {
            "entity": tuple((e["entity_type"], e["entity_name"]) for e in v["entity"]),
            "value": None if v.pop("remove") else v["value"],
        }
    elif cls is BeginTransactionRecord:
        v["name"] = v["name"] or ""
    elif cls is AbortTransactionRecord:
        v["reason"] = v["reason"] or ""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: x for k, x in v.items() if k in names})


def record_version(rec: MetadataRecord, features: Mapping[str, int] | None = None) -> int:
    """The version Kafka 4.3 writes `rec` in at these finalized features (Kafka's MetadataVersion
    record versions, and the ELR feature for partitions); None: a cluster at kopfka's latest."""
    if features is None:
        features = {METADATA_VERSION: LATEST_PRODUCTION_METADATA_VERSION, ELIGIBLE_LEADER_REPLICAS_VERSION: 1}
    mv = features.get(METADATA_VERSION, LATEST_PRODUCTION_METADATA_VERSION)
    if isinstance(rec, RegisterBrokerRecord):
        return 4 if mv >= 30 else 3 if mv >= 17 else 2 if mv >= 8 else 1 if mv >= 7 else 0
    if isinstance(rec, BrokerRegistrationChangeRecord):  # Kafka writes the lowest that holds the change
        if rec.cordoned_log_dirs is not None:
            return 3
        return 2 if rec.log_dirs else 1 if rec.in_controlled_shutdown is not None else 0
    if isinstance(rec, PartitionRecord | PartitionChangeRecord):
        return 2 if features.get(ELIGIBLE_LEADER_REPLICAS_VERSION, 0) >= 1 else 1 if mv >= 17 else 0
    return 0


def encode(record: MetadataRecord, features: Mapping[str, int] | None = None) -> bytes:
    """A metadata record's value in Kafka's format (see record_version for `features`)."""
    if isinstance(record, ControlRecord):
        raise MetadataRecordError(f"{type(record).__name__} is a control record: see control_batch")
    try:
        return serde.write_metadata(record.TYPE, record_version(record, features), _to_kafka(record))
    except serde.SerdeError as exc:
        raise MetadataRecordError(f"cannot encode {type(record).__name__}: {exc}") from exc


def _is_json(data: bytes | memoryview) -> bool:
    """kopfka's older `type:u8 version:u8 {json}`: in Kafka's format the third byte is the record's
    version (a varint after frame and api key), never 123 ('{')."""
    return len(data) >= 3 and data[2] == 0x7B and data[1] == 0


def decode(data: bytes | memoryview) -> MetadataRecord:
    """A metadata record's value: Kafka's binary format, or kopfka's older JSON one."""
    if _is_json(data):
        return _decode_json(bytes(data))
    try:
        schema, _version, values = serde.read_metadata(data)
    except serde.SerdeError as exc:
        raise MetadataRecordError(f"bad metadata record: {exc}") from exc
    cls = _REGISTRY[schema.api_key]
    try:
        return _from_kafka(cls, values)
    except (KeyError, TypeError, ValueError) as exc:
        raise MetadataRecordError(f"cannot read {schema.name}: {exc}") from exc


def encoded_size(record: MetadataRecord, features: Mapping[str, int] | None = None) -> int:
    """The size of the record's value (key and value for a control record)."""
    if isinstance(record, ControlRecord):
        key, value = encode_control(record)
        return len(key) + len(value)
    return len(encode(record, features))


def record_type(value: bytes | memoryview) -> int:
    """The api key of a metadata record's value, without decoding it (either encoding); -1 if unknown."""
    if _is_json(value):
        return value[0]
    return value[1] if len(value) >= 2 and value[0] == serde.FRAME_VERSION and value[1] < 0x80 else -1


# --- control records (in control batches) --------------------------------------------------------
def encode_control(rec: ControlRecord) -> tuple[bytes, bytes]:
    """(key, value) of a control record."""
    entity: Any
    if isinstance(rec, VotersRecord):
        entity = kio_voters.VotersRecord(
            version=i16(0),
            voters=tuple(
                kio_voters.Voter(
                    voter_id=BrokerId(i32(vid)),
                    voter_directory_id=_uuid(vdir),
                    endpoints=(kio_voters.Endpoint(name=rec.listener_name, host=host, port=u16(port)),),
                    k_raft_version_feature=kio_voters.KRaftVersionFeature(
                        min_supported_version=i16(KRAFT_SUPPORTED[0]), max_supported_version=i16(KRAFT_SUPPORTED[1])
                    ),
                )
                for vid, vdir, host, port in rec.voters
            ),
        )
    elif isinstance(rec, KRaftVersionRecord):
        entity = kio_kraft.KRaftVersionRecord(version=i16(0), k_raft_version=i16(rec.kraft_version))
    elif isinstance(rec, LeaderChangeRecord):
        # version 1 adds the voters' directory ids (kraft.version 1); a static quorum has none: 0
        v1 = any(d and _uuid(d) != serde.ZERO_UUID for _, d in (*rec.voters, *rec.granting_voters))
        entity = (kio_leader if v1 else kio_leader_v0).LeaderChangeMessage(
            version=i16(1 if v1 else 0),
            leader_id=i32(rec.leader_id),
            voters=tuple(_leader_voter(v1, i, d) for i, d in rec.voters),
            granting_voters=tuple(_leader_voter(v1, i, d) for i, d in rec.granting_voters),
        )
    else:
        raise MetadataRecordError(f"no control record type for {type(rec).__name__}")
    return serde.write_control(entity)


def _leader_voter(v1: bool, voter_id: int, directory_id: str) -> Any:
    if v1:
        return kio_leader.Voter(voter_id=i32(voter_id), voter_directory_id=_uuid(directory_id))
    return kio_leader_v0.Voter(voter_id=i32(voter_id))


def decode_control(key: bytes | None, value: bytes | None) -> ControlRecord | None:
    """The control record kopfka keeps from a control batch; None for the ones it only skips
    (snapshot header and footer, transaction markers, types newer than this binary)."""
    try:
        kind, e = serde.read_control(key, value)
    except serde.SerdeError as exc:
        raise MetadataRecordError(f"bad control record: {exc}") from exc
    if kind == serde.KRAFT_VOTERS:
        voters = tuple(
            (
                v.voter_id,
                uuids.to_str(v.voter_directory_id or serde.ZERO_UUID),
                v.endpoints[0].host,
                v.endpoints[0].port,
            )
            for v in e.voters
            if v.endpoints
        )
        names = [v.endpoints[0].name for v in e.voters if v.endpoints]
        return VotersRecord(voters, names[0] if names else "CONTROLLER")
    if kind == serde.KRAFT_VERSION:
        return KRaftVersionRecord(e.k_raft_version)
    if kind == serde.LEADER_CHANGE:

        def ids(vs: Any) -> tuple[tuple[int, str], ...]:
            return tuple(
                (v.voter_id, uuids.to_str(getattr(v, "voter_directory_id", None) or serde.ZERO_UUID)) for v in vs
            )

        return LeaderChangeRecord(e.leader_id, ids(e.voters), ids(e.granting_voters))
    return None


# --- kopfka's older JSON encoding (read only) ------------------------------------------------------
_LEGACY_TYPES: dict[int, type[MetadataRecord]] = {
    t: c for t, c in _REGISTRY.items() if not issubclass(c, ControlRecord)
} | {100: VotersRecord}


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


def _decode_json(data: bytes) -> MetadataRecord:
    cls = _LEGACY_TYPES.get(data[0])
    if cls is None:
        raise MetadataRecordError(f"unknown metadata record type {data[0]} in kopfka's JSON format")
    try:
        body = json.loads(data[2:])
        kwargs = {f.name: _revive(f.type, body[f.name]) for f in dataclasses.fields(cls) if f.name in body}
        return cls(**kwargs)
    except (ValueError, TypeError, KeyError) as exc:
        raise MetadataRecordError(f"cannot decode {cls.__name__}: {exc}") from exc
