"""QuorumController: turns admin and lifecycle requests into committed metadata records.

Every mutation is validated against the controller's own image, written as one atomic batch
through the RaftClient, and becomes visible to the controller (and every broker) only when
replayed from the committed log — the controller never edits state directly. Requests are
serialized with one lock, the asyncio equivalent of Kafka's single controller event thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kopfka import uuids
from kopfka.config.definitions import AlterOpError, ConfigError, apply_alter_op
from kopfka.config.dynamic_broker_config import DynamicConfigError, validate_keys
from kopfka.config.group_config import GROUP_RESOURCE, validate_group_config
from kopfka.config.log_config import TOPIC_CONFIG
from kopfka.config.server_config import SERVER_CONFIG
from kopfka.controller import acl_control, scram_control
from kopfka.controller.acl_control import AclResult
from kopfka.controller.client_quota_control import QuotaAlteration, QuotaResult, plan_alterations
from kopfka.controller.replica_placement import place
from kopfka.controller.topic_validation import (
    check_collision,
    validate_topic_configs,
    validate_topic_name,
)
from kopfka.metadata import records as mr
from kopfka.metadata.features import (
    KRAFT_VERSION,
    SUPPORTED_FEATURES,
    cordoned_log_dirs_supported,
    directory_assignment_supported,
    downgrade_loses_metadata,
    elr_enabled,
    metadata_transactions_supported,
    missing_dependency,
    reason_not_supported,
)
from kopfka.metadata.image import (
    BROKER_RESOURCE,
    METADATA_VERSION,
    TOPIC_RESOURCE,
    BrokerRegistration,
    MetadataDelta,
    MetadataImage,
    PartitionRegistration,
    Provenance,
    replica_dir_online,
)
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.raft.raft_client import CommittedBatch, LeaderAndEpoch, RaftClient
from kopfka.security.acls import AclBindingFilter, StandardAcl
from kopfka.telemetry.subscriptions import CLIENT_METRICS_RESOURCE
from kopfka.telemetry.subscriptions import validate_config as validate_client_metrics_config

log = logging.getLogger(__name__)

MIN_INSYNC_REPLICAS = "min.insync.replicas"

PRODUCER_ID_BLOCK_SIZE = 1000
STALL_FORGIVEN_ABOVE_S = 0.1  # a fencing pass this late found the loop stalled, not the brokers silent


@dataclass
class CreateTopicSpec:
    """One topic of CreateTopics: partitions and replication factor (-1: the default) or assignments, and configs."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] | None = None
    configs: dict[str, str | None] = field(default_factory=dict)


@dataclass
class CreateTopicResult:
    """One topic's CreateTopics outcome: an error, or its id, partition count, replication factor and configs."""

    name: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    topic_id: str | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class ResultEntry:
    """Generic per-item outcome (topic deletion, partition creation, config alteration)."""

    name: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    topic_id: str | None = None
    resource_type: int = 0


@dataclass
class HeartbeatResult:
    """The controller's BrokerHeartbeat answer: whether the broker caught up with the metadata log, is fenced,
    and should shut down."""

    is_caught_up: bool
    is_fenced: bool
    should_shutdown: bool


@dataclass
class AlterPartitionResult:
    """One partition's AlterPartition outcome: an error, or the leader, epochs and ISR now registered."""

    error: ErrorCode = ErrorCode.none
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@dataclass
class PartitionOutcome:
    """Per-partition outcome of ElectLeaders / AlterPartitionReassignments."""

    topic: str
    partition: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None


@dataclass
class OngoingReassignment:
    """A partition under reassignment (ListPartitionReassignments): its replicas and those being added and removed."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


PREFERRED, UNCLEAN = 0, 1

# Kafka's reserved directory ids (DirectoryId): a replica whose dir is unknown (unassigned, or being
# migrated from a pre-JBOD broker) may lead; one recorded as LOST may not


class QuorumController:
    def __init__(self, raft: RaftClient, *, node_id: int, cluster_id: str, static_config: Mapping[str, object]) -> None:
        self.raft = raft
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.static_config = static_config
        self.image = MetadataImage()
        self._lock = asyncio.Lock()
        self._last_heartbeat: dict[int, float] = {}
        self._registration_offsets: dict[int, int] = {}
        # each broker's applied metadata offset as of its last heartbeat, and, for a broker in
        # controlled shutdown, the offset every active broker must apply before it may stop
        self._metadata_offsets: dict[int, int] = {}
        self._shutdown_offsets: dict[int, int] = {}
        self._session_timeout_s = int(static_config.get("broker.session.timeout.ms", 9000)) / 1000  # type: ignore[call-overload]
        self._fencer: asyncio.Task[None] | None = None
        self._rebalancer: asyncio.Task[None] | None = None
        self._unclean_elector: asyncio.Task[None] | None = None
        self._was_active = False
        self._background: set[asyncio.Task[None]] = set()
        self.bootstrap_records: list[mr.MetadataRecord] = []
        raft.register(self)

    # --- RaftListener: the controller's own view of committed metadata ------------------
    def handle_commit(self, batch: CommittedBatch) -> None:
        delta = MetadataDelta(MetadataImage() if batch.is_snapshot else self.image)
        delta.replay_all(
            rec for rec in batch.records if not isinstance(rec, mr.BeginTransactionRecord | mr.EndTransactionRecord)
        )
        self.image = delta.apply(Provenance(batch.last_offset, batch.epoch, batch.append_time_ms))

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        active = self.is_active
        if active and not self._was_active:
            log.info("[QuorumController id=%d] becoming the active controller in epoch %d", self.node_id, leader.epoch)
            now = time.monotonic()
            # a new active controller gives every registered broker a fresh session
            self._last_heartbeat = {b: now for b in self.image.brokers}
            self._metadata_offsets, self._shutdown_offsets = {}, {}  # known again from the next heartbeats
            self._background.add(asyncio.get_running_loop().create_task(self._on_activate()))
        elif not active and self._was_active:
            log.info(
                "[QuorumController id=%d] no longer the active controller (leader %d, epoch %d)",
                self.node_id,
                leader.leader_id,
                leader.epoch,
            )
        self._was_active = active

    async def _on_activate(self) -> None:
        try:
            if self.bootstrap_records:
                await self.bootstrap(self.bootstrap_records)
        except KafkaError as exc:
            log.warning("bootstrap write failed: %s", exc)
        if self._fencer is None or self._fencer.done():
            self._fencer = asyncio.create_task(self._fence_expired_loop(), name="controller-fencer")
        if self._rebalancer is None or self._rebalancer.done():
            self._rebalancer = asyncio.create_task(self._auto_rebalance_loop(), name="controller-leader-rebalance")
        if self._unclean_elector is None or self._unclean_elector.done():
            self._unclean_elector = asyncio.create_task(
                self._unclean_election_loop(), name="controller-unclean-leader-election"
            )

    async def _fence_expired_loop(self) -> None:
        """broker.session.timeout.ms: a broker that stopped heartbeating is fenced and loses leadership.

        Time this controller's own event loop was stalled (e.g. a combined node creating fifty
        logs in one metadata update) does not count against any broker: no heartbeat could be
        read meanwhile. Kafka's controller and broker heartbeat threads cannot stall each other."""
        interval = min(0.5, self._session_timeout_s / 4)
        while self.is_active:
            slept_from = time.monotonic()
            await asyncio.sleep(interval)
            self.forgive_stall(time.monotonic() - slept_from - interval)
            try:
                await self.fence_expired_brokers()
            except KafkaError as exc:
                log.debug("fencing pass failed: %s", exc)
            except Exception:
                log.exception("fencing pass failed")

    def forgive_stall(self, stalled_s: float) -> None:
        """Move every broker's last heartbeat forward by a stall of this controller's loop."""
        if stalled_s > STALL_FORGIVEN_ABOVE_S:
            for broker_id, last in self._last_heartbeat.items():
                self._last_heartbeat[broker_id] = last + stalled_s

    async def fence_expired_brokers(self) -> list[int]:
        async with self._lock:
            if not self.is_active:
                return []
            now = time.monotonic()
            expired = [
                b.broker_id
                for b in self.image.brokers.values()
                if not b.fenced and now - self._last_heartbeat.setdefault(b.broker_id, now) > self._session_timeout_s
            ]
            records: list[mr.MetadataRecord] = []
            for bid in expired:
                log.info(
                    "[QuorumController id=%d] fencing broker %d: no heartbeat within broker.session.timeout.ms",
                    self.node_id,
                    bid,
                )
                records.append(mr.BrokerRegistrationChangeRecord(bid, self.image.brokers[bid].epoch, fenced=True))
            # one change per partition for all of them: changes computed broker by broker from the
            # same image would combine, once applied in sequence, into a leader outside its ISR
            records.extend(self._move_leadership_off(*expired))
            if records:
                await self._write(records)
            return expired

    def _move_leadership_off(
        self, *broker_ids: int, keep_sole: bool = False, unclean_shutdown: bool = False
    ) -> list[mr.MetadataRecord]:
        """The brokers are going away (fenced, unregistered, in controlled shutdown, re-registered
        after a crash): shrink them out of every ISR and elect another usable ISR member where one
        leads; each partition changes once. Without ELR the last ISR member stays in the ISR (the
        partition goes offline instead, unless `keep_sole`: then it even stays leader); with ELR
        (KIP-966) it leaves the ISR for the ELR. `unclean_shutdown`: they restarted without a clean
        shutdown, so they leave the ELR as well."""
        going = set(broker_ids)
        elr_on = elr_enabled(self.image.features)
        out: list[mr.MetadataRecord] = []
        for t in self.image.topics_by_id.values():
            for pid, p in t.partitions.items():
                in_elr = unclean_shutdown and bool(going & set(p.elr))
                if not going & set(p.isr) and p.leader not in going and not in_elr:
                    continue
                if keep_sole and len(p.isr) == 1 and p.isr[0] in going and not elr_on:
                    continue
                rest = tuple(r for r in p.isr if r not in going)
                rec = self._change(
                    t.topic_id,
                    pid,
                    p,
                    isr=rest,
                    unusable=going,
                    unclean_shutdown=frozenset(going) if unclean_shutdown else frozenset(),
                )
                if rec is not None:
                    out.append(rec)
        return out

    # --- partition changes: one builder for every path (Kafka's PartitionChangeBuilder) ----------
    def _topic_setting(self, topic: str, key: str, default: object) -> object:
        """A topic's effective config value: its override, the cluster default, server.properties."""
        raw: object = self.image.topic_config(topic).get(key)
        if raw is None:
            raw = self.image.broker_config(None).get(key)
        if raw is None:
            raw = self.static_config.get(key, default)
        return raw

    def _unclean_allowed(self, topic: str) -> bool:
        return str(self._topic_setting(topic, "unclean.leader.election.enable", False)).lower() == "true"

    def _effective_min_isr(self, topic: str, replicas: tuple[int, ...]) -> int:
        """min.insync.replicas, at most the replication factor (Kafka's getTopicEffectiveMinIsr)."""
        try:
            min_isr = int(str(self._topic_setting(topic, "min.insync.replicas", 1)))
        except ValueError:
            min_isr = 1
        return max(1, min(min_isr, len(replicas) or 1))

    def _change(
        self,
        topic_id: str,
        pid: int,
        p: PartitionRegistration,
        *,
        isr: tuple[int, ...] | None = None,
        replicas: tuple[int, ...] | None = None,
        adding: tuple[int, ...] | None = None,
        removing: tuple[int, ...] | None = None,
        leader: int | None = None,
        unusable: set[int] | frozenset[int] = frozenset(),
        also_usable: frozenset[int] = frozenset(),
        offline_dirs: frozenset[str] | set[str] = frozenset(),
        unclean: bool = False,
        unclean_shutdown: frozenset[int] = frozenset(),
        min_isr: int | None = None,
    ) -> mr.PartitionChangeRecord | None:
        """The record that moves `p` to the requested state (Kafka's PartitionChangeBuilder):
        completes a reassignment once every adding replica is in the ISR, and elects a leader
        (preferred order, ISR only; outside it only for an unclean election) when the current one
        is gone. None when nothing changes.

        With eligible leader replicas (KIP-966) the ISR may become empty. Replicas that leave an ISR
        smaller than min.insync.replicas join the ELR: they hold every committed record, since the
        high watermark does not advance while the ISR is below min ISR. With the ISR empty a usable
        ELR member is elected cleanly (its ISR is itself); with the ELR empty too, the last known
        leader (kept in LastKnownElr when the ISR became empty) is elected if it is back, as Kafka's
        default balanced recovery does. `unclean_shutdown` replicas leave the ISR and the ELR.
        `also_usable`: brokers being unfenced in the same batch; `offline_dirs` their failed dirs."""
        topic = self.image.topics_by_id.get(topic_id)
        elr_on = elr_enabled(self.image.features)
        new_isr = p.isr if isr is None else isr
        new_replicas = p.replicas if replicas is None else replicas
        new_adding = p.adding_replicas if adding is None else adding
        new_removing = p.removing_replicas if removing is None else removing
        if unclean_shutdown:
            new_isr = tuple(r for r in new_isr if r not in unclean_shutdown)
        if not new_isr and not elr_on:
            new_isr = p.isr  # without ELR the last in-sync replica is never removed
        if (new_adding or new_removing) and all(a in new_isr for a in new_adding):
            target = tuple(r for r in new_replicas if r not in new_removing)
            isr_in_target = tuple(r for r in new_isr if r in target)
            if isr_in_target:
                new_replicas, new_isr, new_adding, new_removing = target, isr_in_target, (), ()

        new_elr = p.elr if elr_on else ()
        if elr_on:
            if min_isr is None:
                min_isr = self._effective_min_isr(topic.name if topic else "", new_replicas)
            if len(new_isr) >= min_isr:
                new_elr = ()
            else:  # the ISR members that leave it, and the ELR, minus the new ISR and unclean shutdowns
                was = set(p.elr) | set(p.isr)
                new_elr = tuple(r for r in new_replicas if r in was and r not in new_isr and r not in unclean_shutdown)

        def usable(r: int) -> bool:
            return (
                r not in unusable
                and (r in also_usable or self._is_usable(r))
                and self._replica_dir_online(r, p, offline_dirs if r in also_usable else frozenset())
            )

        def valid_leader(r: int) -> bool:
            return (r in new_isr or (not new_isr and r in new_elr)) and r in new_replicas and usable(r)

        new_leader = p.leader if leader is None else leader
        unclean_election = False
        if new_leader < 0 or not valid_leader(new_leader):
            candidates = [r for r in new_replicas if valid_leader(r)]
            last_leader = p.last_known_elr[0] if len(p.last_known_elr) == 1 else -1
            if candidates:
                new_leader = candidates[0]
                if new_leader in new_elr:  # a clean election from the ELR
                    new_isr = (new_leader,)
                    new_elr = tuple(r for r in new_elr if r != new_leader)
            elif elr_on and not new_isr and not new_elr and last_leader in new_replicas and usable(last_leader):
                new_leader, new_isr, unclean_election = last_leader, (last_leader,), True
                log.warning(
                    "[QuorumController id=%d] electing the last known leader %d of %s-%d (ISR and ELR empty)",
                    self.node_id,
                    new_leader,
                    topic.name if topic else topic_id,
                    pid,
                )
            else:
                if unclean or (topic is not None and self._unclean_allowed(topic.name)):
                    candidates = [r for r in new_replicas if usable(r)]
                if candidates:
                    new_leader = candidates[0]
                    new_isr = (new_leader,)
                    unclean_election = True
                    log.warning(
                        "[QuorumController id=%d] unclean leader election for %s-%d: %d (ISR was %s)",
                        self.node_id,
                        topic.name if topic else topic_id,
                        pid,
                        new_leader,
                        list(p.isr),
                    )
                else:
                    new_leader = -1
        if unclean_election:
            new_elr = ()
        # LastKnownElr holds the leader the partition had when its ISR became empty, until it has a
        # leader again (Kafka's maybeUpdateLastKnownLeader under the default recovery strategy)
        new_lke = p.last_known_elr if elr_on else ()
        if elr_on:
            if not new_isr and p.isr and p.leader >= 0:
                new_lke = (p.leader,)
            elif new_leader >= 0:
                new_lke = ()
        # each replica keeps its log dir when the replica list changes (a new one is unknown until its
        # broker assigns it): the dirs are listed in replica order (Kafka's targetDirectories)
        new_dirs = p.directories
        if new_replicas != p.replicas and len(p.directories) == len(p.replicas):
            known = dict(zip(p.replicas, p.directories, strict=True))
            new_dirs = tuple(known.get(r, "") for r in new_replicas)
        rec = mr.PartitionChangeRecord(
            pid,
            topic_id,
            isr=new_isr if new_isr != p.isr else None,
            leader=new_leader if new_leader != p.leader else None,
            replicas=new_replicas if new_replicas != p.replicas else None,
            directories=new_dirs if new_dirs != p.directories else None,
            adding_replicas=new_adding if new_adding != p.adding_replicas else None,
            removing_replicas=new_removing if new_removing != p.removing_replicas else None,
            eligible_leader_replicas=new_elr if new_elr != p.elr else None,
            last_known_elr=new_lke if new_lke != p.last_known_elr else None,
        )
        if all(
            getattr(rec, f) is None
            for f in (
                "isr",
                "leader",
                "replicas",
                "adding_replicas",
                "removing_replicas",
                "eligible_leader_replicas",
                "last_known_elr",
            )
        ):
            return None
        return rec

    # --- AlterPartition (the leader proposes ISR changes) ------------------------------------------
    async def alter_partition(
        self,
        broker_id: int,
        broker_epoch: int,
        topic_id: str,
        partition: int,
        leader_epoch: int,
        partition_epoch: int,
        new_isr: list[tuple[int, int]],
    ) -> AlterPartitionResult:
        async with self._lock:
            self._check_active()
            b = self.image.brokers.get(broker_id)
            if b is None or (broker_epoch >= 0 and b.epoch != broker_epoch):
                return AlterPartitionResult(ErrorCode.stale_broker_epoch)
            t = self.image.topics_by_id.get(topic_id)
            p = t.partitions.get(partition) if t is not None else None
            if t is None or p is None:
                return AlterPartitionResult(
                    ErrorCode.unknown_topic_id if t is None else ErrorCode.unknown_topic_or_partition
                )
            if leader_epoch != p.leader_epoch:
                return AlterPartitionResult(ErrorCode.fenced_leader_epoch)
            if p.leader != broker_id:
                return AlterPartitionResult(ErrorCode.invalid_request)
            if partition_epoch != p.partition_epoch:
                return AlterPartitionResult(ErrorCode.invalid_update_version)
            isr = tuple(r for r, _ in new_isr)
            if broker_id not in isr or len(set(isr)) != len(isr) or any(r not in p.replicas for r in isr):
                return AlterPartitionResult(ErrorCode.invalid_request)
            for r, epoch in new_isr:
                if r in p.isr:
                    continue
                rb = self.image.brokers.get(r)
                # KIP-841: a fenced or shutting-down broker, or a stale incarnation, never joins the ISR;
                # nor does a replica whose log dir its broker reported offline (KIP-858)
                if rb is None or rb.fenced or rb.in_controlled_shutdown or (epoch >= 0 and epoch != rb.epoch):
                    return AlterPartitionResult(ErrorCode.ineligible_replica)
                if not self._replica_dir_online(r, p):
                    log.info(
                        "[QuorumController id=%d] refusing ISR %s for %s-%d: the log dir of replica %d is offline",
                        self.node_id,
                        list(isr),
                        t.name,
                        partition,
                        r,
                    )
                    return AlterPartitionResult(ErrorCode.ineligible_replica)
            rec = self._change(topic_id, partition, p, isr=isr)
            if rec is not None:
                await self._write([rec])
                p = p.merge(rec)
            return AlterPartitionResult(ErrorCode.none, p.leader, p.leader_epoch, p.isr, p.partition_epoch)

    # --- leader elections ------------------------------------------------------------------------
    def _partitions_of(
        self, wanted: list[tuple[str, int]] | None
    ) -> list[tuple[str, int, str, PartitionRegistration | None]]:
        out: list[tuple[str, int, str, PartitionRegistration | None]] = []
        if wanted is None:
            for t in self.image.topics_by_id.values():
                for pid, p in sorted(t.partitions.items()):
                    out.append((t.name, pid, t.topic_id, p))
            return out
        for name, pid in wanted:
            ti = self.image.topics_by_name.get(name)
            out.append((name, pid, ti.topic_id if ti else "", ti.partitions.get(pid) if ti else None))
        return out

    async def elect_leaders(self, election_type: int, wanted: list[tuple[str, int]] | None) -> list[PartitionOutcome]:
        """ElectLeaders: PREFERRED moves leadership to the first replica if it is a usable ISR member;
        UNCLEAN elects any usable replica for partitions without a usable leader."""
        async with self._lock:
            self._check_active()
            results: list[PartitionOutcome] = []
            records: list[mr.MetadataRecord] = []
            for name, pid, topic_id, p in self._partitions_of(wanted):
                res = PartitionOutcome(name, pid)
                if p is None:
                    res.error, res.message = ErrorCode.unknown_topic_or_partition, "The partition does not exist."
                elif election_type == PREFERRED:
                    preferred = p.replicas[0]
                    if p.leader == preferred:
                        res.error, res.message = (
                            ErrorCode.election_not_needed,
                            "Leader is already the preferred replica.",
                        )
                    elif preferred in p.isr and self._is_usable(preferred) and self._replica_dir_online(preferred, p):
                        records.append(mr.PartitionChangeRecord(pid, topic_id, leader=preferred))
                    else:
                        res.error = ErrorCode.preferred_leader_not_available
                        res.message = f"Failed to elect leader for partition {name}-{pid} under strategy PREFERRED"
                elif election_type == UNCLEAN:
                    if p.leader >= 0 and self._is_usable(p.leader) and self._replica_dir_online(p.leader, p):
                        res.error, res.message = ErrorCode.election_not_needed, "The partition has a leader."
                    else:
                        rec = self._change(topic_id, pid, p, unclean=True)
                        if rec is None or rec.leader is None or rec.leader < 0:
                            res.error = ErrorCode.eligible_leaders_not_available
                            res.message = f"Failed to elect leader for partition {name}-{pid} under strategy UNCLEAN"
                        else:
                            records.append(rec)
                else:
                    res.error, res.message = ErrorCode.invalid_request, f"Unknown election type {election_type}"
                if wanted is not None or res.error == ErrorCode.none:
                    results.append(res)
            if records:
                await self._write(records)
            return results

    def _imbalanced_partitions(self) -> list[mr.MetadataRecord]:
        """auto.leader.rebalance.enable: per preferred broker, when more than
        leader.imbalance.per.broker.percentage of its partitions are led elsewhere, move them back."""
        pct = float(self.static_config.get("leader.imbalance.per.broker.percentage", 10))  # type: ignore[arg-type]
        by_broker: dict[int, list[tuple[str, int, int]]] = {}
        totals: dict[int, int] = {}
        for t in self.image.topics_by_id.values():
            for pid, p in t.partitions.items():
                if not p.replicas:
                    continue
                pref = p.replicas[0]
                totals[pref] = totals.get(pref, 0) + 1
                if p.leader != pref and pref in p.isr and self._is_usable(pref) and self._replica_dir_online(pref, p):
                    by_broker.setdefault(pref, []).append((t.topic_id, pid, pref))
        out: list[mr.MetadataRecord] = []
        for b, parts in by_broker.items():
            if len(parts) * 100.0 / totals[b] > pct:
                out.extend(mr.PartitionChangeRecord(pid, tid, leader=pref) for tid, pid, pref in parts)
        return out

    async def _periodic_elections(
        self, what: str, interval_s: Callable[[], float], enabled: Callable[[], bool], plan: Callable[[], list[Any]]
    ) -> None:
        """A pass of elections every interval while this controller is active (Kafka's deferred
        maybeBalancePartitionLeaders / maybeElectUncleanLeaders events)."""
        while self.is_active:
            await asyncio.sleep(max(interval_s(), 0.05))
            if not enabled():
                continue
            try:
                async with self._lock:
                    if not self.is_active:
                        return
                    records = plan()
                    if records:
                        log.info("[QuorumController id=%d] %s for %d partitions", self.node_id, what, len(records))
                        await self._write(records)
            except KafkaError as exc:
                log.debug("%s failed: %s", what, exc)
            except Exception:
                log.exception("%s failed", what)

    async def _auto_rebalance_loop(self) -> None:
        def enabled() -> bool:
            value: object = self.image.broker_config(None).get("auto.leader.rebalance.enable")
            if value is None:
                value = self.static_config.get("auto.leader.rebalance.enable", True)
            return str(value).lower() == "true"

        await self._periodic_elections(
            "preferred leader election",
            lambda: max(float(self.static_config.get("leader.imbalance.check.interval.seconds", 300)), 0.1),  # type: ignore[arg-type]
            enabled,
            self._imbalanced_partitions,
        )

    def _unclean_elections(self, limit: int = 1000) -> list[mr.MetadataRecord]:
        """Kafka's maybeElectUncleanLeaders: a leaderless partition of a topic where
        unclean.leader.election.enable allows it (topic config, else the cluster default, else
        server.properties: a dynamic change counts) gets a live replica outside the ISR as leader."""
        out: list[mr.MetadataRecord] = []
        for t in self.image.topics_by_id.values():
            for pid, p in t.partitions.items():
                if p.leader != -1 or not self._unclean_allowed(t.name):
                    continue
                rec = self._change(t.topic_id, pid, p)
                if rec is not None and rec.leader is not None and rec.leader >= 0:
                    out.append(rec)
                    if len(out) >= limit:
                        return out
        return out

    async def _unclean_election_loop(self) -> None:
        """Every unclean.leader.election.interval.ms (Kafka's internal default: 5 minutes)."""
        await self._periodic_elections(
            "unclean leader election (maybeElectUncleanLeaders)",
            lambda: int(self.static_config.get("unclean.leader.election.interval.ms", 300_000)) / 1000,  # type: ignore[call-overload]
            lambda: True,
            self._unclean_elections,
        )

    # --- reassignments ---------------------------------------------------------------------------
    async def alter_partition_reassignments(
        self, items: list[tuple[str, int, list[int] | None]]
    ) -> list[PartitionOutcome]:
        """Start (target replicas) or cancel (None) reassignments: the replica set becomes target +
        leaving replicas, with adding/removing recorded; it completes once the adding replicas are
        in the ISR (AlterPartition), and leaving leaders hand over then."""
        async with self._lock:
            self._check_active()
            results: list[PartitionOutcome] = []
            records: list[mr.MetadataRecord] = []
            for name, pid, target in items:
                res = PartitionOutcome(name, pid)
                results.append(res)
                t = self.image.topics_by_name.get(name)
                p = t.partitions.get(pid) if t is not None else None
                if t is None or p is None:
                    res.error, res.message = ErrorCode.unknown_topic_or_partition, "The partition does not exist."
                    continue
                original = tuple(r for r in p.replicas if r not in p.adding_replicas)
                if target is None:
                    if not p.adding_replicas and not p.removing_replicas:
                        res.error = ErrorCode.no_reassignment_in_progress
                        res.message = f"Partition {name}-{pid} has no ongoing reassignment"
                        continue
                    isr = tuple(r for r in p.isr if r in original) or p.isr
                    rec = self._change(t.topic_id, pid, p, isr=isr, replicas=original, adding=(), removing=())
                else:
                    if not target or len(set(target)) != len(target):
                        res.error, res.message = ErrorCode.invalid_replica_assignment, f"Invalid replica list {target}"
                        continue
                    missing = [r for r in target if r not in self.image.brokers]
                    if missing:
                        res.error = ErrorCode.invalid_replica_assignment
                        res.message = f"The reassignment includes brokers that are not registered: {missing}"
                        continue
                    tgt = tuple(target)
                    adding = tuple(r for r in tgt if r not in original)
                    removing = tuple(r for r in original if r not in tgt)
                    union = tgt + removing
                    rec = self._change(t.topic_id, pid, p, replicas=union, adding=adding, removing=removing)
                if rec is not None:
                    records.append(rec)
            if records:
                await self._write(records)
            return results

    async def list_partition_reassignments(self, wanted: list[tuple[str, int]] | None) -> list[OngoingReassignment]:
        self._check_active()
        out = []
        for name, pid, _tid, p in self._partitions_of(wanted):
            if p is not None and (p.adding_replicas or p.removing_replicas):
                out.append(OngoingReassignment(name, pid, p.replicas, p.adding_replicas, p.removing_replicas))
        return out

    @property
    def is_active(self) -> bool:
        return self.raft.leader_and_epoch.leader_id == self.node_id and bool(getattr(self.raft, "leader_ready", True))

    def _check_active(self) -> None:
        if not self.is_active:
            raise KafkaError(ErrorCode.not_controller, "this node is not the active controller")
        if METADATA_VERSION not in self.image.features:  # activating: the bootstrap records come first
            raise KafkaError(ErrorCode.not_controller, "the active controller is writing the bootstrap records")

    async def _write(self, records: list[mr.MetadataRecord]) -> int:
        if len(records) > 1000 and metadata_transactions_supported(self.image.features):
            records = [mr.BeginTransactionRecord("bulk"), *records, mr.EndTransactionRecord()]
        return await self.raft.append(records)

    def _default(self, key: str) -> int:
        dyn = self.image.broker_config(None).get(key)
        return int(dyn) if dyn is not None else int(self.static_config[key])  # type: ignore[call-overload]

    async def bootstrap(self, records: list[mr.MetadataRecord]) -> None:
        """Write the bootstrap records (metadata.version first) into an empty log, with the ELR safety
        records when they enable ELR (Kafka's activation records for an empty log)."""
        async with self._lock:
            if METADATA_VERSION not in self.image.features and self.is_active:
                log.info(
                    "[QuorumController id=%d] writing the bootstrap records to the empty metadata log", self.node_id
                )
                features = {r.name: r.feature_level for r in records if isinstance(r, mr.FeatureLevelRecord)}
                await self._write([*records, *self._elr_safety_records(features)])

    # --- topics ------------------------------------------------------------------------
    async def create_topics(
        self, specs: list[CreateTopicSpec], *, validate_only: bool = False
    ) -> list[CreateTopicResult]:
        async with self._lock:
            self._check_active()
            results: list[CreateTopicResult] = []
            records: list[mr.MetadataRecord] = []
            seen: set[str] = set()
            names = set(self.image.topics_by_name)
            for spec in specs:
                res = CreateTopicResult(spec.name)
                results.append(res)
                try:
                    if spec.name in seen:
                        raise KafkaError(ErrorCode.invalid_request, f"Duplicate topic name {spec.name} in request")
                    seen.add(spec.name)
                    recs, res.topic_id, res.num_partitions, res.replication_factor, res.configs = self._plan_topic(
                        spec, names
                    )
                    names.add(spec.name)
                    if not validate_only:
                        records.extend(recs)
                except KafkaError as exc:
                    res.error, res.message = exc.code, exc.message
            if records:
                await self._write(records)
            return results

    def _plan_topic(
        self, spec: CreateTopicSpec, existing: set[str]
    ) -> tuple[list[mr.MetadataRecord], str, int, int, dict[str, str]]:
        validate_topic_name(spec.name)
        if spec.name in existing:
            raise KafkaError(ErrorCode.topic_already_exists, f"Topic '{spec.name}' already exists.")
        check_collision(spec.name, existing)
        configs = validate_topic_configs(spec.configs)
        brokers = list(self.image.brokers.values())
        if spec.assignments:
            if spec.num_partitions != -1 or spec.replication_factor != -1:
                raise KafkaError(
                    ErrorCode.invalid_request,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. "
                    "Both cannot be used at the same time.",
                )
            assignment = self._check_assignment(spec.assignments)
        else:
            num_partitions = spec.num_partitions if spec.num_partitions != -1 else self._default("num.partitions")
            rf = (
                spec.replication_factor
                if spec.replication_factor != -1
                else self._default("default.replication.factor")
            )
            if num_partitions <= 0:
                raise KafkaError(
                    ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value."
                )
            if rf <= 0:
                raise KafkaError(
                    ErrorCode.invalid_replication_factor,
                    "Replication factor must be larger than 0, or -1 to use the default value.",
                )
            assignment = place(brokers, num_partitions, rf)
        topic_id = uuids.to_str(uuids.random_uuid())
        records: list[mr.MetadataRecord] = [mr.TopicRecord(spec.name, topic_id)]
        for k, v in configs.items():
            records.append(mr.ConfigRecord(TOPIC_RESOURCE, spec.name, k, v))
        for pid, replicas in enumerate(assignment):
            isr = tuple(r for r in replicas if self._is_usable(r))
            leader = isr[0] if isr else -1
            records.append(mr.PartitionRecord(pid, topic_id, tuple(replicas), isr or tuple(replicas[:1]), leader))
        return records, topic_id, len(assignment), len(assignment[0]), configs

    def _is_usable(self, broker_id: int) -> bool:
        b = self.image.brokers.get(broker_id)
        return b is not None and not b.fenced and not b.in_controlled_shutdown

    def _replica_dir_online(
        self, broker_id: int, p: PartitionRegistration, offline: frozenset[str] | set[str] = frozenset()
    ) -> bool:
        """KIP-858: a replica in a failed dir cannot serve, so it must not be elected leader."""
        return replica_dir_online(self.image, broker_id, p, offline)

    def _check_assignment(self, assignments: Mapping[int, list[int]]) -> list[list[int]]:
        parts = sorted(assignments)
        if parts != list(range(len(parts))):
            raise KafkaError(
                ErrorCode.invalid_replica_assignment, "Partitions in the assignment must be consecutive from 0."
            )
        out = []
        rf = None
        for p in parts:
            replicas = list(assignments[p])
            if not replicas or len(set(replicas)) != len(replicas):
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment, f"Invalid replica list for partition {p}: {replicas}"
                )
            if rf is not None and len(replicas) != rf:
                raise KafkaError(
                    ErrorCode.invalid_replica_assignment, "All partitions must have the same replication factor."
                )
            rf = len(replicas)
            for r in replicas:
                if r not in self.image.brokers:
                    raise KafkaError(
                        ErrorCode.invalid_replica_assignment,
                        f"The manual partition assignment includes broker {r}, which is not registered.",
                    )
            out.append(replicas)
        return out

    async def delete_topics(self, names: Iterable[str | None], ids: Iterable[str | None] = ()) -> list[ResultEntry]:
        async with self._lock:
            self._check_active()
            results: list[ResultEntry] = []
            records: list[mr.MetadataRecord] = []
            if not bool(self.static_config.get("delete.topic.enable", True)):
                return [
                    ResultEntry(n or "", ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
                    for n in names
                ]
            for name, tid in [(n, None) for n in names] + [(None, t) for t in ids]:
                topic = (
                    self.image.topics_by_name.get(name) if name is not None else self.image.topics_by_id.get(tid or "")
                )
                if topic is None:
                    code = ErrorCode.unknown_topic_or_partition if name is not None else ErrorCode.unknown_topic_id
                    results.append(
                        ResultEntry(
                            name or "",
                            code,
                            "This server does not host this topic."
                            if name
                            else "This server does not host this topic ID.",
                            tid,
                        )
                    )
                    continue
                results.append(ResultEntry(topic.name, ErrorCode.none, None, topic.topic_id))
                records.append(mr.RemoveTopicRecord(topic.topic_id))
            if records:
                await self._write(records)
            return results

    async def create_partitions(
        self, requests: list[tuple[str, int, list[list[int]] | None]], *, validate_only: bool = False
    ) -> list[ResultEntry]:
        async with self._lock:
            self._check_active()
            results: list[ResultEntry] = []
            records: list[mr.MetadataRecord] = []
            for name, count, assignments in requests:
                res = ResultEntry(name)
                results.append(res)
                try:
                    topic = self.image.topics_by_name.get(name)
                    if topic is None:
                        raise KafkaError(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
                    current = len(topic.partitions)
                    if count < current:
                        raise KafkaError(
                            ErrorCode.invalid_partitions,
                            f"The topic {name} currently has {current} partition(s); {count} would not be an increase.",
                        )
                    if count == current:
                        raise KafkaError(ErrorCode.invalid_partitions, f"Topic already has {current} partition(s).")
                    rf = len(topic.partitions[0].replicas)
                    if assignments is not None:
                        if len(assignments) != count - current:
                            raise KafkaError(
                                ErrorCode.invalid_replica_assignment,
                                f"Attempted to add {count - current} additional partition(s), "
                                f"but only {len(assignments)} assignment(s) were specified.",
                            )
                        new = self._check_assignment({i: a for i, a in enumerate(assignments)})
                    else:
                        new = place(list(self.image.brokers.values()), count - current, rf, start_partition=current)
                    if not validate_only:
                        for i, replicas in enumerate(new):
                            isr = tuple(r for r in replicas if self._is_usable(r))
                            records.append(
                                mr.PartitionRecord(
                                    current + i,
                                    topic.topic_id,
                                    tuple(replicas),
                                    isr or tuple(replicas[:1]),
                                    isr[0] if isr else -1,
                                )
                            )
                except KafkaError as exc:
                    res.error, res.message = exc.code, exc.message
            if records:
                await self._write(records)
            return results

    # --- configs -----------------------------------------------------------------------
    def _validate_config(self, rtype: int, rname: str, key: str, value: str | None) -> None:
        if rtype == TOPIC_RESOURCE:
            if rname not in self.image.topics_by_name:
                raise KafkaError(ErrorCode.unknown_topic_or_partition, f"Topic {rname} does not exist")
            if key not in TOPIC_CONFIG:
                raise KafkaError(ErrorCode.invalid_config, f"Unknown topic config name: {key}")
            defn = TOPIC_CONFIG.keys[key]
        elif rtype == BROKER_RESOURCE:
            if rname:  # ControllerConfigurationValidator.validateBrokerName
                try:
                    broker_id = int(rname, 10)
                except ValueError:
                    raise KafkaError(
                        ErrorCode.invalid_request, "Unable to parse broker name as a base 10 number."
                    ) from None
                if broker_id < 0:
                    raise KafkaError(ErrorCode.invalid_request, "Invalid negative broker ID.")
            if key == MIN_INSYNC_REPLICAS and elr_enabled(self.image.features):
                # KIP-966: every node must agree on which partitions are under min ISR
                if rname:
                    raise KafkaError(
                        ErrorCode.invalid_config,
                        "Broker-level min.insync.replicas cannot be altered while ELR is enabled.",
                    )
                if value is None:
                    raise KafkaError(
                        ErrorCode.invalid_config,
                        "Cluster-level min.insync.replicas cannot be removed while ELR is enabled.",
                    )
            return  # the keys and values are checked together (_validate_broker_changes)
        elif rtype == CLIENT_METRICS_RESOURCE:
            validate_client_metrics_config(rname, key, value)
            return
        elif rtype == GROUP_RESOURCE:  # KIP-848/932 group configs, checked against the group.* bounds
            if not rname:
                raise KafkaError(ErrorCode.invalid_request, "The group id cannot be empty")
            bounds = {k: SERVER_CONFIG.keys[k].default for k in SERVER_CONFIG.keys if k.startswith("group.")}
            try:
                validate_group_config(key, value, {**bounds, **self.static_config})
            except ConfigError as exc:
                raise KafkaError(ErrorCode.invalid_config, exc.reason) from exc
            return
        else:
            raise KafkaError(ErrorCode.invalid_request, f"Unsupported resource type {rtype}")
        if value is not None:
            try:
                defn.parse(value)
            except ConfigError as exc:
                raise KafkaError(ErrorCode.invalid_config, str(exc)) from exc

    def _validate_broker_changes(self, rname: str, changes: dict[str, str | None]) -> None:
        """Only Kafka's dynamic broker keys (kopfka.config.dynamic_broker_config), with Kafka's
        INVALID_REQUEST and wording; deleting a key is always allowed."""
        try:
            validate_keys({k: v for k, v in changes.items() if v is not None}, per_broker=bool(rname))
        except DynamicConfigError as exc:
            raise KafkaError(ErrorCode.invalid_request, str(exc)) from exc

    async def _alter_resources(
        self, resources: list[tuple[int, str, Any]], plan: Any, *, validate_only: bool
    ) -> list[ResultEntry]:
        """Plan each config resource's records (one failing resource doesn't stop the others) and
        write the valid ones as one batch."""
        async with self._lock:
            self._check_active()
            results: list[ResultEntry] = []
            records: list[mr.MetadataRecord] = []
            for rtype, rname, change in resources:
                res = ResultEntry(rname, resource_type=rtype)
                results.append(res)
                try:
                    recs = plan(rtype, rname, change)
                    if not validate_only:
                        records.extend(recs)
                except KafkaError as exc:
                    res.error, res.message = exc.code, exc.message
            records.extend(self._clear_elr_on_min_isr_change(records))
            if records:
                await self._write(records)
            return results

    def _clear_elr_on_min_isr_change(self, records: list[mr.MetadataRecord]) -> list[mr.MetadataRecord]:
        """KIP-966: the ELR was kept against the old min.insync.replicas, so a change of it (even to
        the same value) clears the ELR of the topic, or of every topic for the cluster default."""
        if not elr_enabled(self.image.features):
            return []
        out: list[mr.MetadataRecord] = []
        for rec in records:
            if not isinstance(rec, mr.ConfigRecord) or rec.name != MIN_INSYNC_REPLICAS:
                continue
            if rec.resource_type == TOPIC_RESOURCE:
                out.append(mr.ClearElrRecord(rec.resource_name))
            elif rec.resource_type == BROKER_RESOURCE and not rec.resource_name:
                out.append(mr.ClearElrRecord(""))
        return list(dict.fromkeys(out))

    def _elr_safety_records(self, features: Mapping[str, int]) -> list[mr.MetadataRecord]:
        """When ELR becomes enabled (format or UpdateFeatures): min.insync.replicas must be one
        cluster-wide value, so the static value of this controller becomes the cluster default
        unless one is set, and broker-level overrides are removed (Kafka's ELR safety records)."""
        if not elr_enabled(features):
            return []
        out: list[mr.MetadataRecord] = []
        if MIN_INSYNC_REPLICAS not in self.image.broker_config(None):
            value = str(self.static_config.get(MIN_INSYNC_REPLICAS, 1))
            out.append(mr.ConfigRecord(BROKER_RESOURCE, "", MIN_INSYNC_REPLICAS, value))
        for (rtype, rname), values in sorted(self.image.configs.items()):
            if rtype == BROKER_RESOURCE and rname and MIN_INSYNC_REPLICAS in values:
                out.append(mr.ConfigRecord(BROKER_RESOURCE, rname, MIN_INSYNC_REPLICAS, None))
        return out

    async def incremental_alter_configs(
        self, resources: list[tuple[int, str, list[tuple[str, int, str | None]]]], *, validate_only: bool = False
    ) -> list[ResultEntry]:
        return await self._alter_resources(resources, self._plan_incremental, validate_only=validate_only)

    def _plan_incremental(
        self, rtype: int, rname: str, ops: list[tuple[str, int, str | None]]
    ) -> list[mr.MetadataRecord]:
        current = dict(self.image.configs.get((rtype, rname), {}))
        recs: list[mr.MetadataRecord] = []
        changes: dict[str, str | None] = {}
        for key, op, value in ops:
            defn = TOPIC_CONFIG.keys.get(key) or SERVER_CONFIG.keys.get(key)
            try:
                new_value = apply_alter_op(current.get(key), op, value, key, defn)
            except AlterOpError as exc:
                code = ErrorCode.invalid_request if exc.invalid_request else ErrorCode.invalid_config
                raise KafkaError(code, str(exc)) from exc
            self._validate_config(rtype, rname, key, new_value)
            if new_value is None:
                current.pop(key, None)
            else:
                current[key] = new_value
            changes[key] = new_value
            recs.append(mr.ConfigRecord(rtype, rname, key, new_value))
        if rtype == BROKER_RESOURCE:
            self._validate_broker_changes(rname, changes)
        return recs

    async def alter_configs(
        self, resources: list[tuple[int, str, dict[str, str | None]]], *, validate_only: bool = False
    ) -> list[ResultEntry]:
        """Legacy AlterConfigs: the given set replaces every dynamic config of the resource."""
        return await self._alter_resources(resources, self._plan_replace, validate_only=validate_only)

    def _plan_replace(self, rtype: int, rname: str, values: dict[str, str | None]) -> list[mr.MetadataRecord]:
        recs: list[mr.MetadataRecord] = []
        for key, value in values.items():
            self._validate_config(rtype, rname, key, value)
            recs.append(mr.ConfigRecord(rtype, rname, key, value))
        if rtype == BROKER_RESOURCE:
            self._validate_broker_changes(rname, values)
        for key in self.image.configs.get((rtype, rname), {}):
            if key not in values:
                recs.append(mr.ConfigRecord(rtype, rname, key, None))
        return recs

    # --- brokers -----------------------------------------------------------------------
    async def register_broker(
        self,
        broker_id: int,
        incarnation_id: str,
        endpoints: tuple[mr.Endpoint, ...],
        rack: str | None,
        log_dirs: tuple[str, ...],
        cluster_id: str,
        features: tuple[tuple[str, int, int], ...] | None = None,
        previous_broker_epoch: int = -1,
    ) -> int:
        """`features` are the broker's supported (name, min, max) levels; an in-process broker
        (None) is this binary. Each must include the finalized level, as Kafka checks.
        `previous_broker_epoch`: the epoch the broker recorded at its last clean shutdown (-1: none);
        unless it is the epoch of its registration, the broker shut down uncleanly and may have lost
        unflushed records, so with ELR it also leaves every ELR (KIP-966)."""
        if features is None:
            features = tuple((n, lo, hi) for n, (lo, hi) in SUPPORTED_FEATURES.items())
        async with self._lock:
            self._check_active()
            if cluster_id != self.cluster_id:
                raise KafkaError(
                    ErrorCode.inconsistent_cluster_id, f"Expected cluster id {self.cluster_id}, got {cluster_id}"
                )
            self._check_registration_features(features)
            if not directory_assignment_supported(self.image.features):
                log_dirs = ()  # not recorded before 3.7-IV2, as Kafka
            existing = self.image.brokers.get(broker_id)
            # node ids are unique across a cluster's nodes, so a broker with this controller's own id
            # is its combined node's: an older incarnation of it ran in an earlier process and is gone
            if existing is not None and existing.incarnation_id != incarnation_id and broker_id != self.node_id:
                last = self._last_heartbeat.get(broker_id)
                if last is not None and time.monotonic() - last < self._session_timeout_s and not existing.fenced:
                    raise KafkaError(
                        ErrorCode.duplicate_broker_registration,
                        f"Another broker is registered with id {broker_id} and is still alive",
                    )
            epoch = self.raft.high_watermark  # Kafka uses the record offset as the broker epoch
            # a new incarnation (e.g. after a crash) may have lost unflushed records: out of the ISRs
            # with it until it catches up again, and out of the ELRs unless it shut down cleanly
            # (Kafka's handleBrokerUncleanShutdown)
            moved: list[mr.MetadataRecord] = []
            if existing is not None:
                unclean = previous_broker_epoch != existing.epoch and elr_enabled(self.image.features)
                if unclean:
                    log.info(
                        "[QuorumController id=%d] broker %d registers after an unclean shutdown (previous epoch "
                        "%d, registered epoch %d): out of every ISR and ELR",
                        self.node_id,
                        broker_id,
                        previous_broker_epoch,
                        existing.epoch,
                    )
                moved = self._move_leadership_off(broker_id, keep_sole=True, unclean_shutdown=unclean)
            offset = await self._write(
                [
                    mr.RegisterBrokerRecord(
                        broker_id, incarnation_id, epoch, endpoints, rack, True, False, log_dirs, features
                    ),
                    *moved,
                ]
            )
            self._registration_offsets[broker_id] = offset
            self._last_heartbeat[broker_id] = time.monotonic()
            self._metadata_offsets.pop(broker_id, None)
            self._shutdown_offsets.pop(broker_id, None)
            return epoch

    def _check_registration_features(self, features: tuple[tuple[str, int, int], ...]) -> None:
        """Kafka's processRegistrationFeature: every finalized feature (metadata.version defaults to
        1, others to 0 when the broker does not name them) must be within the broker's range."""
        offered = {name: (lo, hi) for name, lo, hi in features}
        offered.setdefault(METADATA_VERSION, (1, 1))
        finalized = {METADATA_VERSION: 1, **self.image.features}
        for name in sorted({*offered, *finalized}, key=lambda n: (n != METADATA_VERSION, n)):
            level = finalized.get(name, 0)
            lo, hi = offered.get(name, (0, 0))
            if not lo <= level <= hi:
                raise KafkaError(
                    ErrorCode.unsupported_version,
                    f"Unable to register because the broker does not support finalized version {level} of "
                    f"{name}. The broker wants a version between {lo} and {hi}, inclusive.",
                )

    # --- UpdateFeatures (KIP-584) -----------------------------------------------------------------
    async def update_features(
        self, updates: list[tuple[str, int, int]], *, validate_only: bool = False
    ) -> tuple[ErrorCode, str | None]:
        """Change finalized feature levels, all or none, with Kafka's FeatureControlManager rules:
        `updates` are (feature, level, upgrade type 1=UPGRADE 2=SAFE_DOWNGRADE 3=UNSAFE_DOWNGRADE);
        every registered broker and this controller must support the level, and a metadata.version
        downgrade across a level that changed the records is refused."""
        async with self._lock:
            self._check_active()
            records: list[mr.MetadataRecord] = []
            for name, level, upgrade_type in updates:
                reason = self._feature_update_problem(name, level, upgrade_type, updates)
                if reason is not None:
                    message = f"Invalid update version {level} for feature {name}. {reason}"
                    log.warning("[QuorumController id=%d] %s", self.node_id, message)
                    return ErrorCode.invalid_update_version, message
                if level != self.image.features.get(name, 0):
                    records.append(mr.FeatureLevelRecord(name, level))
            proposed = {**self.image.features, **{n: lvl for n, lvl, _ in updates}}
            if elr_enabled(proposed) and not elr_enabled(self.image.features):
                records.extend(self._elr_safety_records(proposed))
            elif elr_enabled(self.image.features) and not elr_enabled(proposed):
                records.append(mr.ClearElrRecord(""))  # elections no longer use it; nothing keeps it current
            if records and not validate_only:
                log.warning("[QuorumController id=%d] updating features: %s", self.node_id, records)
                await self._write(records)
            return ErrorCode.none, None

    def _feature_update_problem(
        self, name: str, level: int, upgrade_type: int, pending: list[tuple[str, int, int]]
    ) -> str | None:
        if upgrade_type not in (1, 2, 3):
            return "The controller does not support the given upgrade type."
        current = self.image.features.get(name, 0)
        if level < 0:
            return "A feature version cannot be less than 0."
        reason = reason_not_supported(level, SUPPORTED_FEATURES.get(name), f"Local controller {self.node_id}")
        if reason is not None:
            return reason
        for b in sorted(self.image.brokers.values(), key=lambda b: b.broker_id):
            ranges = {n: (lo, hi) for n, lo, hi in b.supported_features}
            reason = reason_not_supported(level, ranges.get(name), f"Broker {b.broker_id}")
            if reason is not None:
                return reason
        if level < current and upgrade_type == 1:
            return (
                "Can't downgrade the version of this feature without setting the upgrade type to either safe or "
                "unsafe downgrade."
            )
        if level > current and upgrade_type != 1:
            return "Can't downgrade to a newer version."
        if name == KRAFT_VERSION and level != current:
            return "kopfka cannot change kraft.version on a running quorum yet."
        proposed = {**self.image.features, **{n: lvl for n, lvl, _ in pending}}
        reason = missing_dependency(name, level, proposed)
        if reason is not None:
            return reason
        if name == METADATA_VERSION and level < current and downgrade_loses_metadata(current, level):
            if upgrade_type == 3:
                return "Unsafe metadata downgrade is not supported in this version."
            return "Refusing to perform the requested downgrade because it might delete metadata information."
        return None

    async def broker_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        current_metadata_offset: int,
        want_fence: bool,
        want_shutdown: bool,
        *,
        offline_log_dirs: tuple[str, ...] = (),
        cordoned_log_dirs: tuple[str, ...] | None = None,
    ) -> HeartbeatResult:
        async with self._lock:
            self._check_active()
            b = self.image.brokers.get(broker_id)
            if b is None or b.epoch != broker_epoch:
                raise KafkaError(
                    ErrorCode.stale_broker_epoch, f"Broker {broker_id} epoch {broker_epoch} is not current"
                )
            self._last_heartbeat[broker_id] = time.monotonic()
            self._metadata_offsets[broker_id] = current_metadata_offset
            caught_up = current_metadata_offset >= self._registration_offsets.get(broker_id, b.epoch)
            records: list[mr.MetadataRecord] = []
            if want_shutdown:
                self._shutdown_offsets.setdefault(broker_id, self.image.provenance.last_offset)
                records.extend(await self._controlled_shutdown_records(broker_id))
                if not b.in_controlled_shutdown:
                    records.append(
                        mr.BrokerRegistrationChangeRecord(broker_id, broker_epoch, in_controlled_shutdown=True)
                    )
            elif b.fenced and not want_fence and caught_up:
                records.append(mr.BrokerRegistrationChangeRecord(broker_id, broker_epoch, fenced=False))
                records.extend(self._elect_leaderless(broker_id, set(offline_log_dirs)))
            elif not b.fenced and want_fence:
                records.append(mr.BrokerRegistrationChangeRecord(broker_id, broker_epoch, fenced=True))
            records.extend(self._directory_records(b, offline_log_dirs, cordoned_log_dirs))
            if records:
                offset = await self._write(records)
                if want_shutdown:
                    self._shutdown_offsets[broker_id] = max(offset, self._shutdown_offsets[broker_id])
            b = self.image.brokers[broker_id]
            should_shutdown = want_shutdown and self._may_shut_down(b)
            if should_shutdown and not b.fenced:
                # Controlled shutdown is complete: fence the broker now, so that its next
                # incarnation can register at once instead of waiting out the old session.
                await self._write([mr.BrokerRegistrationChangeRecord(broker_id, broker_epoch, fenced=True)])
                self._last_heartbeat.pop(broker_id, None)
                b = self.image.brokers[broker_id]
            return HeartbeatResult(caught_up, b.fenced, should_shutdown)

    def _directory_records(
        self, b: BrokerRegistration, offline: tuple[str, ...], cordoned: tuple[str, ...] | None
    ) -> list[mr.MetadataRecord]:
        """Dirs reported in a heartbeat (KIP-858, cordoned dirs). A newly offline dir leaves the
        registration's online dirs, and the broker's replicas recorded in it leave the ISR / lose
        leadership (leaderless when it was the last ISR member), as for a fenced broker but only
        for that dir. Cordoned dirs are recorded when they change (placement avoids brokers whose
        dirs are all cordoned)."""
        out: list[mr.MetadataRecord] = []
        gone = {d for d in offline if d in b.log_dirs}
        if gone:
            for t in self.image.topics_by_id.values():
                for pid, p in t.partitions.items():
                    if b.broker_id not in p.replicas or len(p.directories) != len(p.replicas):
                        continue
                    if p.directories[p.replicas.index(b.broker_id)] not in gone:
                        continue
                    if b.broker_id not in p.isr and p.leader != b.broker_id:
                        continue
                    rest = tuple(r for r in p.isr if r != b.broker_id)
                    rec = self._change(t.topic_id, pid, p, isr=rest, unusable={b.broker_id})
                    if rec is not None:
                        out.append(rec)
            log.warning(
                "[QuorumController id=%d] broker %d reports offline log dir(s) %s",
                self.node_id,
                b.broker_id,
                ", ".join(sorted(gone)),
            )
            out.append(
                mr.BrokerRegistrationChangeRecord(
                    b.broker_id, b.epoch, log_dirs=tuple(d for d in b.log_dirs if d not in gone)
                )
            )
        if (
            cordoned is not None
            and cordoned_log_dirs_supported(self.image.features)
            and (b.cordoned_log_dirs is None or tuple(sorted(cordoned)) != tuple(sorted(b.cordoned_log_dirs)))
        ):
            out.append(
                mr.BrokerRegistrationChangeRecord(b.broker_id, b.epoch, cordoned_log_dirs=tuple(sorted(cordoned)))
            )
        return out

    def _may_shut_down(self, b: BrokerRegistration) -> bool:
        """Kafka's BrokerHeartbeatManager rule: a fenced broker may stop at once; one in controlled
        shutdown once it leads nothing and every active broker (unfenced, not shutting down) has
        applied the records that moved its leadership and ISR memberships away, so no leader still
        waits for it as a follower when it stops fetching. kopfka also waits for the broker itself
        to have applied them: its last produces are then answered NOT_LEADER_OR_FOLLOWER with the
        new leader (KIP-951), not cut by its closing connections."""
        if b.fenced:
            return True
        if self._leads_anything(b.broker_id):
            return False
        target = self._shutdown_offsets.get(b.broker_id, self.image.provenance.last_offset)
        if self._metadata_offsets.get(b.broker_id, -1) < target:
            return False
        active = [
            x.broker_id
            for x in self.image.brokers.values()
            if x.broker_id != b.broker_id and not x.fenced and not x.in_controlled_shutdown
        ]
        return all(self._metadata_offsets.get(x, -1) >= target for x in active)

    def _leads_anything(self, broker_id: int) -> bool:
        return any(
            p.leader == broker_id and len(p.isr) > 1
            for t in self.image.topics_by_id.values()
            for p in t.partitions.values()
        )

    async def _controlled_shutdown_records(self, broker_id: int) -> list[mr.MetadataRecord]:
        """Move leadership off the broker to another usable ISR member; shrink it out of ISRs
        (KIP-841: being in controlled shutdown, it cannot rejoin them)."""
        return self._move_leadership_off(broker_id, keep_sole=True)

    def _elect_leaderless(self, broker_id: int, offline: set[str] | None = None) -> list[mr.MetadataRecord]:
        """The broker is being unfenced: every offline partition it holds a replica of gets another
        election with it usable (Kafka's handleBrokerUnfenced): it leads those whose ISR (or, with the
        ISR empty, ELR) holds it, or whose last known leader it was, and, where
        unclean.leader.election.enable allows, those with no usable ISR member at all; never where its
        replica sits in a failed log dir (`offline`: reported in this heartbeat)."""
        out: list[mr.MetadataRecord] = []
        gone = frozenset(offline or ())
        for t in self.image.topics_by_id.values():
            for pid, p in t.partitions.items():
                if p.leader != -1 or broker_id not in p.replicas:
                    continue
                rec = self._change(t.topic_id, pid, p, also_usable=frozenset({broker_id}), offline_dirs=gone)
                if rec is not None:
                    out.append(rec)
        return out

    async def alter_client_quotas(
        self, entries: list[QuotaAlteration], validate_only: bool = False
    ) -> list[QuotaResult]:
        """AlterClientQuotas: validation and records in controller/client_quota_control.py."""
        async with self._lock:
            self._check_active()
            results, records = plan_alterations(entries)
            if records and not validate_only:
                await self._write(records)
            return results

    # --- security: ACLs and SCRAM credentials ------------------------------------------------
    async def create_acls(self, acls: list[StandardAcl]) -> list[AclResult]:
        """CreateAcls: validation and records in controller/acl_control.py."""
        async with self._lock:
            self._check_active()
            results, records = acl_control.plan_create(self.image.acls, acls)
            if records:
                await self._write(records)
            return results

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[AclResult]:
        async with self._lock:
            self._check_active()
            results, records = acl_control.plan_delete(self.image.acls, filters)
            if records:
                await self._write(records)
            return results

    async def alter_user_scram_credentials(
        self, deletions: list[scram_control.Deletion], upsertions: list[scram_control.Upsertion]
    ) -> list[scram_control.UserResult]:
        """AlterUserScramCredentials: validation and records in controller/scram_control.py."""
        async with self._lock:
            self._check_active()
            results, records = scram_control.plan_alterations(self.image.scram, deletions, upsertions)
            if records:
                await self._write(records)
            return results

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        async with self._lock:
            self._check_active()
            start = self.image.next_producer_id
            await self._write([mr.ProducerIdsRecord(broker_id, broker_epoch, start + PRODUCER_ID_BLOCK_SIZE)])
            return start, PRODUCER_ID_BLOCK_SIZE

    async def unregister_broker(self, broker_id: int) -> None:
        async with self._lock:
            self._check_active()
            b = self.image.brokers.get(broker_id)
            if b is None:
                raise KafkaError(ErrorCode.broker_id_not_registered, f"Broker {broker_id} is not registered")
            records: list[mr.MetadataRecord] = [
                *self._move_leadership_off(broker_id),
                mr.UnregisterBrokerRecord(broker_id, b.epoch),
            ]
            await self._write(records)
            self._last_heartbeat.pop(broker_id, None)

    async def assign_replicas_to_dirs(
        self, broker_id: int, broker_epoch: int, assignments: list[tuple[str, str, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        """AssignReplicasToDirs: record which log dir (directory id) holds each replica (JBOD)."""
        async with self._lock:
            self._check_active()
            b = self.image.brokers.get(broker_id)
            if b is None or b.epoch != broker_epoch:
                raise KafkaError(
                    ErrorCode.stale_broker_epoch, f"Broker {broker_id} epoch {broker_epoch} is not current"
                )
            if not directory_assignment_supported(self.image.features):
                raise KafkaError(ErrorCode.unsupported_version, "Directory assignment is not supported yet.")
            out: dict[tuple[str, int], ErrorCode] = {}
            records: list[mr.MetadataRecord] = []
            for dir_id, topic_id, pid in assignments:
                t = self.image.topics_by_id.get(topic_id)
                p = t.partitions.get(pid) if t is not None else None
                if p is None:
                    out[(topic_id, pid)] = ErrorCode.unknown_topic_or_partition
                    continue
                if broker_id not in p.replicas:
                    out[(topic_id, pid)] = ErrorCode.not_leader_or_follower
                    continue
                dirs = list(p.directories) if len(p.directories) == len(p.replicas) else [""] * len(p.replicas)
                dirs[p.replicas.index(broker_id)] = dir_id
                if tuple(dirs) != p.directories:
                    records.append(mr.PartitionChangeRecord(pid, topic_id, directories=tuple(dirs)))
                out[(topic_id, pid)] = ErrorCode.none
            if records:
                await self._write(records)
            return out

    async def close(self) -> None:
        for t in [self._fencer, self._rebalancer, self._unclean_elector, *self._background]:
            if t is not None:
                t.cancel()
