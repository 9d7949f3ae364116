"""MetadataImage and MetadataDelta (seed 000): an immutable view built by replaying records.

One writer (the loader) folds committed records into a MetadataDelta and `apply()`s it to get
the next image; readers grab the current image reference once and never see partial state.
Unchanged sub-structures are shared by reference between images (structural sharing): a
delta copies only the topics, brokers and config resources it touches.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from kopfka import uuids
from kopfka.metadata import records as r
from kopfka.security import acls as a
from kopfka.security.scram import ScramCredential

EMPTY_MAP: Mapping[Any, Any] = MappingProxyType({})

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
CLIENT_METRICS_RESOURCE = 16
METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"


@dataclass(frozen=True)
class PartitionRegistration:
    """Kafka's PartitionRegistration: one partition's replicas, ISR, leader, epochs and reassignment/ELR state."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    directories: tuple[str, ...] = ()
    leader_recovery_state: int = 0
    # KIP-966: replicas that left the ISR while it was below min.insync.replicas (so they hold
    # every committed record) and may lead when the ISR is empty; the last known ELR members
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    @classmethod
    def from_record(cls, rec: r.PartitionRecord) -> PartitionRegistration:
        return cls(
            rec.replicas,
            rec.isr,
            rec.leader,
            rec.leader_epoch,
            rec.partition_epoch,
            rec.removing_replicas,
            rec.adding_replicas,
            rec.directories,
            rec.leader_recovery_state,
            rec.eligible_leader_replicas,
            rec.last_known_elr,
        )

    def merge(self, rec: r.PartitionChangeRecord) -> PartitionRegistration:
        """Apply a change: unset fields carry over; a set leader bumps the leader epoch."""
        leader = self.leader if rec.leader is None else rec.leader
        leader_epoch = self.leader_epoch if rec.leader is None else self.leader_epoch + 1
        return PartitionRegistration(
            replicas=self.replicas if rec.replicas is None else rec.replicas,
            isr=self.isr if rec.isr is None else rec.isr,
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            removing_replicas=self.removing_replicas if rec.removing_replicas is None else rec.removing_replicas,
            adding_replicas=self.adding_replicas if rec.adding_replicas is None else rec.adding_replicas,
            directories=self.directories if rec.directories is None else rec.directories,
            leader_recovery_state=(
                self.leader_recovery_state if rec.leader_recovery_state is None else rec.leader_recovery_state
            ),
            elr=self.elr if rec.eligible_leader_replicas is None else rec.eligible_leader_replicas,
            last_known_elr=self.last_known_elr if rec.last_known_elr is None else rec.last_known_elr,
        )

    def to_record(self, topic_id: str, partition_id: int) -> r.PartitionRecord:
        return r.PartitionRecord(
            partition_id,
            topic_id,
            self.replicas,
            self.isr,
            self.leader,
            self.leader_epoch,
            self.partition_epoch,
            self.removing_replicas,
            self.adding_replicas,
            self.directories,
            self.leader_recovery_state,
            self.elr,
            self.last_known_elr,
        )


DIR_UNASSIGNED, DIR_LOST, DIR_MIGRATING = (uuids.to_str(uuid.UUID(int=i)) for i in range(3))


def replica_dir_online(
    image: MetadataImage, broker_id: int, p: PartitionRegistration, offline: frozenset[str] | set[str] = frozenset()
) -> bool:
    """Whether the log dir recorded for the broker's replica of `p` is online (KIP-858). An
    unknown dir (none recorded, unassigned, migrating) or a broker registered without dirs counts
    as online, as in Kafka; `offline` adds dirs reported in a heartbeat being handled."""
    if broker_id not in p.replicas or len(p.directories) != len(p.replicas):
        return True
    d = p.directories[p.replicas.index(broker_id)]
    if d == DIR_LOST or d in offline:
        return False
    if d in ("", DIR_UNASSIGNED, DIR_MIGRATING):
        return True
    b = image.brokers.get(broker_id)
    return b is None or not b.log_dirs or d in b.log_dirs


@dataclass(frozen=True)
class TopicImage:
    """A topic in the image: name, id and its partitions' registrations by partition id."""

    name: str
    topic_id: str
    partitions: Mapping[int, PartitionRegistration]


@dataclass(frozen=True)
class BrokerRegistration:
    """Kafka's BrokerRegistration: a registered broker's epoch, endpoints, rack, fencing state and log dirs."""

    broker_id: int
    epoch: int
    incarnation_id: str
    endpoints: tuple[r.Endpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    log_dirs: tuple[str, ...]
    cordoned_log_dirs: tuple[str, ...] | None = None
    supported_features: tuple[tuple[str, int, int], ...] = ()  # (name, min, max) from its registration

    def endpoint(self, listener: str) -> r.Endpoint | None:
        for e in self.endpoints:
            if e.name == listener:
                return e
        return None


@dataclass(frozen=True)
class Provenance:
    """Kafka's MetadataProvenance: offset, epoch and append time of the last batch an image contains (-1: none)."""

    last_offset: int = -1
    last_epoch: int = -1
    last_log_time_ms: int = -1


@dataclass(frozen=True)
class MetadataImage:
    """Kafka's MetadataImage: the cluster state replayed from the metadata log;
    immutable, so readers never see a partial update."""

    provenance: Provenance = Provenance()
    features: Mapping[str, int] = field(default_factory=lambda: EMPTY_MAP)
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: EMPTY_MAP)
    topics_by_id: Mapping[str, TopicImage] = field(default_factory=lambda: EMPTY_MAP)
    topics_by_name: Mapping[str, TopicImage] = field(default_factory=lambda: EMPTY_MAP)
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: EMPTY_MAP)
    client_quotas: Mapping[tuple[tuple[str, str | None], ...], Mapping[str, float]] = field(
        default_factory=lambda: EMPTY_MAP
    )
    next_producer_id: int = 0
    voters: tuple[tuple[int, str, str, int], ...] = ()
    voters_listener: str = "CONTROLLER"  # the controller listener the voters' endpoints are on
    acls: a.AclsImage = a.EMPTY_ACLS
    scram: Mapping[tuple[str, int], ScramCredential] = field(default_factory=lambda: EMPTY_MAP)  # (user, mechanism)

    @property
    def metadata_version(self) -> int:
        return self.features.get(METADATA_VERSION, 0)

    def is_empty(self) -> bool:
        return self.provenance.last_offset < 0 and not self.features

    def topic_config(self, name: str) -> Mapping[str, str]:
        return self.configs.get((TOPIC_RESOURCE, name), EMPTY_MAP)

    def broker_config(self, broker_id: int | None) -> Mapping[str, str]:
        """Dynamic broker config: the cluster default (empty name) overlaid by the per-broker one."""
        base = dict(self.configs.get((BROKER_RESOURCE, ""), EMPTY_MAP))
        if broker_id is not None:
            base.update(self.configs.get((BROKER_RESOURCE, str(broker_id)), EMPTY_MAP))
        return base

    def unfenced_brokers(self) -> list[BrokerRegistration]:
        return [b for b in self.brokers.values() if not b.fenced]

    def to_records(self) -> Iterator[r.MetadataRecord]:
        """The whole image as records, features first (snapshots and catch-up)."""
        if self.voters:  # control records first, as in Kafka's snapshots
            yield r.KRaftVersionRecord(self.features.get(KRAFT_VERSION, 1))
            yield r.VotersRecord(self.voters, self.voters_listener)
        if METADATA_VERSION in self.features:
            yield r.FeatureLevelRecord(METADATA_VERSION, self.features[METADATA_VERSION])
        for name, level in sorted(self.features.items()):
            if name != METADATA_VERSION and not (name == KRAFT_VERSION and self.voters):
                yield r.FeatureLevelRecord(name, level)
        for b in self.brokers.values():
            yield r.RegisterBrokerRecord(
                b.broker_id,
                b.incarnation_id,
                b.epoch,
                b.endpoints,
                b.rack,
                b.fenced,
                b.in_controlled_shutdown,
                b.log_dirs,
                b.supported_features,
                b.cordoned_log_dirs,
            )
        for t in self.topics_by_id.values():
            yield r.TopicRecord(t.name, t.topic_id)
            for pid, p in sorted(t.partitions.items()):
                yield p.to_record(t.topic_id, pid)
        for (rtype, rname), values in self.configs.items():
            for k, v in values.items():
                yield r.ConfigRecord(rtype, rname, k, v)
        for entity, quotas in self.client_quotas.items():
            for k, qv in quotas.items():
                yield r.ClientQuotaRecord(entity, k, qv)
        if self.next_producer_id:
            yield r.ProducerIdsRecord(-1, -1, self.next_producer_id)
        for (user, mech), cred in sorted(self.scram.items()):
            yield r.UserScramCredentialRecord(user, mech, cred.salt, cred.stored_key, cred.server_key, cred.iterations)
        for acl_id, acl in sorted(self.acls.by_id.items()):
            yield acl_record(acl_id, acl)


@dataclass
class TopicChanges:
    """What one delta did to the topics, for publishers that act on differences."""

    created: set[str] = field(default_factory=set)  # topic ids
    deleted: dict[str, TopicImage] = field(default_factory=dict)  # topic id -> old image
    changed_partitions: dict[str, set[int]] = field(default_factory=dict)  # topic id -> partitions


class MetadataDelta:
    """Accumulates records over an image; `apply()` returns the next image."""

    def __init__(self, image: MetadataImage) -> None:
        self.image = image
        self._features: dict[str, int] | None = None
        self._brokers: dict[int, BrokerRegistration] | None = None
        self._topics: dict[str, TopicImage] | None = None
        self._configs: dict[tuple[int, str], Mapping[str, str]] | None = None
        self._quotas: dict[tuple[tuple[str, str | None], ...], Mapping[str, float]] | None = None
        self._next_producer_id = image.next_producer_id
        self._voters = image.voters
        self._voters_listener = image.voters_listener
        self._acls: dict[str, a.StandardAcl] | None = None
        self._scram: dict[tuple[str, int], ScramCredential] | None = None
        self.topic_changes = TopicChanges()
        self.changed_configs: set[tuple[int, str]] = set()
        self.changed_brokers: set[int] = set()
        self.changed_quotas = False
        self.changed_acls = False
        self.changed_scram: set[str] = set()  # users whose credentials changed
        self.finished_snapshot = False

    # copy-on-first-write accessors ----------------------------------------------------
    def _f(self) -> dict[str, int]:
        if self._features is None:
            self._features = dict(self.image.features)
        return self._features

    def _b(self) -> dict[int, BrokerRegistration]:
        if self._brokers is None:
            self._brokers = dict(self.image.brokers)
        return self._brokers

    def _t(self) -> dict[str, TopicImage]:
        if self._topics is None:
            self._topics = dict(self.image.topics_by_id)
        return self._topics

    def _c(self) -> dict[tuple[int, str], Mapping[str, str]]:
        if self._configs is None:
            self._configs = dict(self.image.configs)
        return self._configs

    def _q(self) -> dict[tuple[tuple[str, str | None], ...], Mapping[str, float]]:
        if self._quotas is None:
            self._quotas = dict(self.image.client_quotas)
        return self._quotas

    def replay_all(self, recs: Iterable[r.MetadataRecord]) -> None:
        for rec in recs:
            self.replay(rec)

    def replay(self, rec: r.MetadataRecord) -> None:
        if isinstance(rec, r.FeatureLevelRecord):
            if rec.feature_level == 0 and rec.name != METADATA_VERSION:
                self._f().pop(rec.name, None)
            else:
                self._f()[rec.name] = rec.feature_level
        elif isinstance(rec, r.RegisterBrokerRecord):
            self._b()[rec.broker_id] = BrokerRegistration(
                rec.broker_id,
                rec.broker_epoch,
                rec.incarnation_id,
                rec.endpoints,
                rec.rack,
                rec.fenced,
                rec.in_controlled_shutdown,
                rec.log_dirs,
                rec.cordoned_log_dirs,
                supported_features=rec.features,
            )
            self.changed_brokers.add(rec.broker_id)
        elif isinstance(rec, r.UnregisterBrokerRecord):
            b = self._b().get(rec.broker_id)
            if b is not None and b.epoch == rec.broker_epoch:
                del self._b()[rec.broker_id]
                self.changed_brokers.add(rec.broker_id)
        elif isinstance(rec, r.BrokerRegistrationChangeRecord):
            b = self._b().get(rec.broker_id)
            if b is not None and b.epoch == rec.broker_epoch:
                self._b()[rec.broker_id] = replace(
                    b,
                    fenced=b.fenced if rec.fenced is None else rec.fenced,
                    in_controlled_shutdown=(
                        b.in_controlled_shutdown if rec.in_controlled_shutdown is None else rec.in_controlled_shutdown
                    ),
                    log_dirs=b.log_dirs if rec.log_dirs is None else rec.log_dirs,
                    cordoned_log_dirs=(b.cordoned_log_dirs if rec.cordoned_log_dirs is None else rec.cordoned_log_dirs),
                )
                self.changed_brokers.add(rec.broker_id)
        elif isinstance(rec, r.TopicRecord):
            self._t()[rec.topic_id] = TopicImage(rec.name, rec.topic_id, EMPTY_MAP)
            self.topic_changes.created.add(rec.topic_id)
        elif isinstance(rec, r.PartitionRecord):
            self._set_partition(rec.topic_id, rec.partition_id, PartitionRegistration.from_record(rec))
        elif isinstance(rec, r.PartitionChangeRecord):
            topic = self._t().get(rec.topic_id)
            if topic is None or rec.partition_id not in topic.partitions:
                raise r.MetadataRecordError(
                    f"PartitionChangeRecord for unknown partition {rec.topic_id}:{rec.partition_id}"
                )
            self._set_partition(rec.topic_id, rec.partition_id, topic.partitions[rec.partition_id].merge(rec))
        elif isinstance(rec, r.ClearElrRecord):
            if rec.topic_name:
                topic = next((t for t in self._t().values() if t.name == rec.topic_name), None)
                if topic is None:
                    raise r.MetadataRecordError(f"ClearElrRecord for unknown topic {rec.topic_name}")
                targets = [topic]
            else:
                targets = list(self._t().values())
            for t in targets:
                for pid, part in t.partitions.items():
                    if part.elr or part.last_known_elr:
                        cleared = r.PartitionChangeRecord(
                            pid, t.topic_id, eligible_leader_replicas=(), last_known_elr=()
                        )
                        self._set_partition(t.topic_id, pid, part.merge(cleared))
        elif isinstance(rec, r.RemoveTopicRecord):
            topic = self._t().pop(rec.topic_id, None)
            if topic is not None:
                if rec.topic_id in self.topic_changes.created:
                    self.topic_changes.created.discard(rec.topic_id)
                else:
                    self.topic_changes.deleted[rec.topic_id] = self.image.topics_by_id.get(rec.topic_id, topic)
                self.topic_changes.changed_partitions.pop(rec.topic_id, None)
                key = (TOPIC_RESOURCE, topic.name)
                if key in self._c():
                    del self._c()[key]
                    self.changed_configs.add(key)
        elif isinstance(rec, r.ConfigRecord):
            key = (rec.resource_type, rec.resource_name)
            values = dict(self._c().get(key, EMPTY_MAP))
            if rec.value is None:
                values.pop(rec.name, None)
            else:
                values[rec.name] = rec.value
            if values:
                self._c()[key] = MappingProxyType(values)
            else:
                self._c().pop(key, None)
            self.changed_configs.add(key)
        elif isinstance(rec, r.ClientQuotaRecord):
            entity = tuple(sorted(rec.entity, key=lambda e: e[0]))
            qvalues = dict(self._q().get(entity, EMPTY_MAP))
            if rec.value is None:
                qvalues.pop(rec.key, None)
            else:
                qvalues[rec.key] = rec.value
            if qvalues:
                self._q()[entity] = MappingProxyType(qvalues)
            else:
                self._q().pop(entity, None)
            self.changed_quotas = True
        elif isinstance(rec, r.ProducerIdsRecord):
            self._next_producer_id = max(self._next_producer_id, rec.next_producer_id)
        elif isinstance(rec, r.VotersRecord):
            self._voters = rec.voters
            self._voters_listener = rec.listener_name
        elif isinstance(rec, r.KRaftVersionRecord):
            self._f()[KRAFT_VERSION] = rec.kraft_version
        elif isinstance(rec, r.FenceBrokerRecord | r.UnfenceBrokerRecord):  # Kafka before 3.3-IV3
            b = self._b().get(rec.id)
            if b is not None and b.epoch == rec.epoch:
                self._b()[rec.id] = replace(b, fenced=isinstance(rec, r.FenceBrokerRecord))
                self.changed_brokers.add(rec.id)
        elif isinstance(rec, r.AccessControlEntryRecord):
            if self._acls is None:
                self._acls = dict(self.image.acls.by_id)
            self._acls[rec.id] = acl_from_record(rec)
            self.changed_acls = True
        elif isinstance(rec, r.RemoveAccessControlEntryRecord):
            if self._acls is None:
                self._acls = dict(self.image.acls.by_id)
            if self._acls.pop(rec.id, None) is None:
                raise r.MetadataRecordError(f"RemoveAccessControlEntryRecord for unknown ACL id {rec.id}")
            self.changed_acls = True
        elif isinstance(rec, r.UserScramCredentialRecord):
            if self._scram is None:
                self._scram = dict(self.image.scram)
            self._scram[(rec.name, rec.mechanism)] = ScramCredential(
                rec.salt, rec.stored_key, rec.server_key, rec.iterations
            )
            self.changed_scram.add(rec.name)
        elif isinstance(rec, r.RemoveUserScramCredentialRecord):
            if self._scram is None:
                self._scram = dict(self.image.scram)
            if self._scram.pop((rec.name, rec.mechanism), None) is None:
                raise r.MetadataRecordError(f"RemoveUserScramCredentialRecord for unknown {rec.name}/{rec.mechanism}")
            self.changed_scram.add(rec.name)
        elif isinstance(
            rec, r.BeginTransactionRecord | r.EndTransactionRecord | r.AbortTransactionRecord | r.NoOpRecord
        ):
            pass  # transaction framing is handled by the batch loader
        elif isinstance(
            rec,
            r.LeaderChangeRecord
            | r.RegisterControllerRecord
            | r.DelegationTokenRecord
            | r.RemoveDelegationTokenRecord
            | r.ZkMigrationStateRecord,
        ):
            pass  # in a Kafka-written log: the raft layer's, or state kopfka does not keep
        else:
            raise r.MetadataRecordError(f"no replay rule for {type(rec).__name__}")

    def _set_partition(self, topic_id: str, partition_id: int, reg: PartitionRegistration) -> None:
        topics = self._t()
        topic = topics.get(topic_id)
        if topic is None:
            raise r.MetadataRecordError(f"partition record for unknown topic id {topic_id}")
        parts = dict(topic.partitions)
        parts[partition_id] = reg
        topics[topic_id] = TopicImage(topic.name, topic_id, MappingProxyType(parts))
        self.topic_changes.changed_partitions.setdefault(topic_id, set()).add(partition_id)

    def finish_snapshot(self) -> None:
        """A snapshot replaces the image: anything it did not mention is removed."""
        self.finished_snapshot = True

    def apply(self, provenance: Provenance) -> MetadataImage:
        img = self.image
        topics_by_id = img.topics_by_id if self._topics is None else MappingProxyType(self._topics)
        if self._topics is None:
            topics_by_name = img.topics_by_name
        else:
            topics_by_name = MappingProxyType({t.name: t for t in self._topics.values()})
        return MetadataImage(
            provenance=provenance,
            features=img.features if self._features is None else MappingProxyType(self._features),
            brokers=img.brokers if self._brokers is None else MappingProxyType(self._brokers),
            topics_by_id=topics_by_id,
            topics_by_name=topics_by_name,
            configs=img.configs if self._configs is None else MappingProxyType(self._configs),
            client_quotas=img.client_quotas if self._quotas is None else MappingProxyType(self._quotas),
            next_producer_id=self._next_producer_id,
            voters=self._voters,
            voters_listener=self._voters_listener,
            acls=img.acls if self._acls is None else a.AclsImage(self._acls),
            scram=img.scram if self._scram is None else MappingProxyType(self._scram),
        )


def acl_from_record(rec: r.AccessControlEntryRecord) -> a.StandardAcl:
    return a.StandardAcl(
        a.resource_type(rec.resource_type),
        rec.resource_name,
        a.pattern_type(rec.pattern_type),
        rec.principal,
        rec.host,
        a.operation(rec.operation),
        a.permission(rec.permission_type),
    )


def acl_record(acl_id: str, acl: a.StandardAcl) -> r.AccessControlEntryRecord:
    return r.AccessControlEntryRecord(
        acl_id,
        int(acl.resource_type),
        acl.resource_name,
        int(acl.pattern_type),
        acl.principal,
        acl.host,
        int(acl.operation),
        int(acl.permission_type),
    )


def replay(
    records: Iterable[r.MetadataRecord], image: MetadataImage | None = None, provenance: Provenance | None = None
) -> MetadataImage:
    delta = MetadataDelta(image or MetadataImage())
    delta.replay_all(records)
    return delta.apply(provenance or Provenance())
