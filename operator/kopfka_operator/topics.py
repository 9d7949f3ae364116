"""Topic resources reconciled into Kafka, many topics of one cluster per batch.

The resource is the source of truth (as in Strimzi's unidirectional topic operator): a batch
reads what Kafka has for every topic in it (one Metadata, one DescribeConfigs, one
ListPartitionReassignments), works out each topic's changes, and applies them kind by kind with
one request each: CreateTopics, IncrementalAlterConfigs (set and delete), CreatePartitions, and
AlterPartitionReassignments behind replication throttles for a replication-factor change.

A change Kafka cannot make (fewer partitions, an invalid config) is refused with Kafka's own
error and leaves the topic as it was; a change found while the resource's generation had
already been applied is drift, put back and reported. Outcomes are data (`TopicOutcome`); the
kopf handlers turn them into status, events and retries.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kopfka import uuids
from kopfka.client.admin import Admin, AdminError, CreatedTopic, NewTopic, Reassignment, TopicInfo
from kopfka.protocol.errors import ErrorCode

from .kafka_pool import Outcome, reason_of
from .throttles import (
    DELETE,
    REPLICA_KEYS,
    SET,
    TOPIC,
    NodeAdmin,
    alter_brokers,
    clear_broker_throttles,
    rate_ops,
    replica_throttles,
)

DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs config_source of a topic override
# Set on the topic by the reassignment while it runs, not part of spec.config.
THROTTLE_KEYS = frozenset(REPLICA_KEYS)

# Kafka errors that no retry can fix: the spec must change.
REFUSALS = frozenset(
    {
        ErrorCode.invalid_config,
        ErrorCode.invalid_partitions,
        ErrorCode.invalid_replication_factor,
        ErrorCode.invalid_replica_assignment,
        ErrorCode.invalid_topic_exception,
        ErrorCode.policy_violation,
        ErrorCode.invalid_request,
    }
)


@dataclass(frozen=True)
class TopicWork:
    """One Topic resource's desired state, and what its status says was done before."""

    resource: tuple[str, str]  # (namespace, name)
    topic_name: str
    partitions: int | None = None  # None: the broker default at creation, never changed
    replication_factor: int | None = None
    config: Mapping[str, str] = field(default_factory=dict)
    known_id: str | None = None  # status.topicId
    adopted: bool = False  # status.adopted
    in_sync: bool = False  # this generation was applied: a difference found now is drift
    reassignment: Mapping[str, Any] | None = None  # status.reassignment
    delete: bool = False


@dataclass
class TopicOutcome(Outcome):
    status: dict[str, Any] = field(default_factory=dict)  # status fields besides conditions
    requeue: bool = False  # one more round right away (new partitions exist: now the replicas)
    progress: str = ""  # Reconciling=True message while a reassignment runs


@dataclass
class _Existing:
    info: TopicInfo
    overrides: dict[str, str]
    moves: dict[int, Reassignment]

    @property
    def topic_id(self) -> str:
        return uuids.to_str(self.info.topic_id) if isinstance(self.info.topic_id, uuid.UUID) else ""

    def target_replicas(self, partition: int) -> list[int]:
        """The replica set a partition has, or is moving to."""
        part = self.info.partitions[partition]
        move = self.moves.get(partition)
        if move is None:
            return list(part.replicas)
        return [r for r in move.replicas if r not in move.removing]

    @property
    def replication_factor(self) -> int:
        sizes = {len(self.target_replicas(p)) for p in range(len(self.info.partitions))}
        return max(sizes) if sizes else 0


def _state_of(existing: _Existing) -> dict[str, Any]:
    return {
        "topicId": existing.topic_id,
        "partitions": len(existing.info.partitions),
        "replicationFactor": existing.replication_factor,
        "config": dict(sorted(existing.overrides.items())),
    }


def plan_replicas(current: list[int], target_rf: int, brokers: Sequence[int], load: dict[int, int]) -> list[int]:
    """The replica list after a replication-factor change: the current replicas keep their
    order (the preferred leader stays first); new ones go to the least loaded brokers; removed
    ones come off the end."""
    if target_rf <= len(current):
        return current[:target_rf]
    out = list(current)
    for broker in sorted((b for b in brokers if b not in current), key=lambda b: (load.get(b, 0), b)):
        if len(out) == target_rf:
            break
        out.append(broker)
        load[broker] = load.get(broker, 0) + 1
    return out


@dataclass
class TopicSettings:
    throttle_bytes_per_second: int = 10 * 1024 * 1024
    transient_retry_seconds: float = 5.0


async def delete_batch(admin: Admin, items: Sequence[TopicWork]) -> dict[int, TopicOutcome]:
    """DeleteTopics by id (exactly the topic this resource created or adopted); a topic already
    gone is success."""
    out: dict[int, TopicOutcome] = {}
    by_id: dict[uuid.UUID, list[int]] = {}
    for i, w in enumerate(items):
        if not w.known_id:
            out[i] = TopicOutcome(message="no Kafka topic was created for this resource")
            continue
        by_id.setdefault(uuids.from_str(w.known_id), []).append(i)
    results = await admin.delete_topics(ids=list(by_id))
    for topic_id, indexes in by_id.items():
        err = results.get(topic_id)
        for i in indexes:
            if err is None or err.code in (ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id):
                out[i] = TopicOutcome(message=f"deleted topic {items[i].topic_name}")
            else:
                out[i] = TopicOutcome(ready=False, reason=reason_of(err.code), message=str(err), retry_after=5.0)
    return out


async def reconcile_batch(
    admin: Admin, items: Sequence[TopicWork], settings: TopicSettings, node_admin: NodeAdmin | None = None
) -> list[TopicOutcome | BaseException]:
    """Bring every topic of the batch to its spec; one outcome per item, in order."""
    outcomes: dict[int, TopicOutcome] = {}
    deletes = [i for i, w in enumerate(items) if w.delete]
    if deletes:
        done = await delete_batch(admin, [items[i] for i in deletes])
        outcomes.update({deletes[j]: o for j, o in done.items()})
    applies = [i for i, w in enumerate(items) if not w.delete]
    if applies:
        nodes = node_admin or (lambda _node, address: _unrouted(admin, address))
        outcomes.update(await _apply_batch(admin, items, applies, settings, nodes))
    return [outcomes[i] for i in range(len(items))]


async def _unrouted(admin: Admin, _address: str) -> Admin:
    return admin


async def _apply_batch(
    admin: Admin, items: Sequence[TopicWork], indexes: list[int], settings: TopicSettings, nodes: NodeAdmin
) -> dict[int, TopicOutcome]:
    out: dict[int, TopicOutcome] = {}
    names = sorted({items[i].topic_name for i in indexes})
    described = await admin.describe_topics(names)
    found = {n: t for n, t in described.items() if isinstance(t, TopicInfo)}
    configs = await admin.describe_config_entries([(TOPIC, n) for n in found])
    ongoing = await admin.list_partition_reassignments() if found else {}
    existing: dict[str, _Existing] = {}
    for name, info in found.items():
        entries = configs.get((TOPIC, name))
        if isinstance(entries, AdminError):  # deleted between the two calls: next round
            continue
        overrides = {
            e.name: e.value or ""
            for e in entries or []
            if e.source == DYNAMIC_TOPIC_CONFIG and e.name not in THROTTLE_KEYS
        }
        moves = {p: m for (t, p), m in ongoing.items() if t == name}
        existing[name] = _Existing(info, overrides, moves)

    creates: dict[str, NewTopic] = {}
    decreases: dict[str, int] = {}
    alters: dict[tuple[int, str], list[tuple[str, int, str | None]]] = {}
    increases: dict[str, int] = {}
    rf_changes: dict[int, int] = {}  # item index -> target replication factor
    finished: list[int] = []  # items whose reassignment has completed: throttles come off
    for i in indexes:
        w = items[i]
        name = w.topic_name
        ex = existing.get(name)
        if ex is None:
            err = described.get(name)
            if isinstance(err, AdminError) and err.code != ErrorCode.unknown_topic_or_partition:
                out[i] = _transient(err, settings)
            elif name in found:  # described but its configs were not: gone meanwhile
                out[i] = TopicOutcome(ready=False, reason="TopicChanging", message=f"{name} is changing", requeue=True)
            else:
                creates[name] = NewTopic(name, w.partitions or -1, w.replication_factor or -1, dict(w.config))
            continue
        out[i] = outcome = TopicOutcome(status={"topicName": name, **_state_of(ex)})
        if w.partitions is not None and w.partitions < len(ex.info.partitions):
            decreases[name] = w.partitions
            continue
        ops: list[tuple[str, int, str | None]] = [
            (k, SET, v) for k, v in sorted(w.config.items()) if ex.overrides.get(k) != v
        ]
        ops += [(k, DELETE, None) for k in sorted(ex.overrides) if k not in w.config]
        if ops:
            outcome.drift += [_config_drift(k, op, ex.overrides.get(k), v) for k, op, v in ops]
        if w.reassignment is not None and not ex.moves:
            finished.append(i)
            ops += [(k, DELETE, None) for k in sorted(THROTTLE_KEYS)]
        if ops:
            alters[(TOPIC, name)] = ops
        if w.partitions is not None and w.partitions > len(ex.info.partitions):
            increases[name] = w.partitions
            outcome.drift.append(f"partitions {len(ex.info.partitions)} (spec {w.partitions})")
        elif w.replication_factor is not None and not ex.moves and ex.replication_factor != w.replication_factor:
            rf_changes[i] = w.replication_factor
            outcome.drift.append(f"replication factor {ex.replication_factor} (spec {w.replication_factor})")

    created = await admin.create_topics(list(creates.values()))
    refused_decrease = await admin.create_partitions_many(decreases, validate_only=True)
    altered = await admin.incremental_alter_configs_many(alters)
    grow = {n: c for n, c in increases.items() if altered.get((TOPIC, n)) is None}
    grown = await admin.create_partitions_many(grow)

    for i in indexes:
        w = items[i]
        name = w.topic_name
        if name in creates:
            out[i] = _created(w, created.get(name), settings)
            continue
        outcome = out[i]
        if outcome.retry_after is not None or outcome.requeue or name not in existing:
            continue
        ex = existing[name]
        if name in decreases:
            err = refused_decrease.get(name) or AdminError(
                ErrorCode.invalid_partitions,
                f"Topic currently has {len(ex.info.partitions)} partitions, which is higher than the "
                f"requested {w.partitions}.",
            )
            _refuse(outcome, err)
            outcome.drift = []
            continue
        err = altered.get((TOPIC, name))
        if err is not None:
            _fail(outcome, err, settings)
            outcome.drift = []
            rf_changes.pop(i, None)
            continue
        outcome.status["config"] = dict(sorted(w.config.items()))
        if name in grow:
            err = grown.get(name)
            if err is not None:
                _fail(outcome, err, settings)
                continue
            outcome.status["partitions"] = grow[name]
            if w.replication_factor is not None and ex.replication_factor != w.replication_factor:
                outcome.requeue = True  # the new partitions first, then the replica change
        if i in finished:
            outcome.status["reassignment"] = None
            outcome.events.append(("Normal", "ReassignmentDone", f"replication factor is {ex.replication_factor}"))
        elif ex.moves:
            _progress(outcome, w, ex, settings)
        if not w.in_sync:
            outcome.drift = []
        if w.known_id and w.known_id != ex.topic_id and ex.topic_id:
            outcome.drift.insert(0, f"topic id {w.known_id} is now {ex.topic_id} (recreated outside)")
        if not w.known_id:
            outcome.status["adopted"] = True
            outcome.events.append(("Normal", "Adopted", f"topic {name} existed in Kafka; now managed by this resource"))
        elif w.adopted:
            outcome.status["adopted"] = True

    started = await _change_replication(admin, nodes, items, rf_changes, existing, out, settings) if rf_changes else 0
    if finished and not ongoing and not started:
        await clear_broker_throttles(admin, nodes)
    return out


def _config_drift(key: str, op: int, current: str | None, wanted: str | None) -> str:
    if op == DELETE:
        return f"config {key}={current} (not in spec)"
    if current is None:
        return f"config {key} missing (spec {wanted})"
    return f"config {key}={current} (spec {wanted})"


def _created(w: TopicWork, result: CreatedTopic | AdminError | None, settings: TopicSettings) -> TopicOutcome:
    if isinstance(result, CreatedTopic):
        outcome = TopicOutcome(
            status={
                "topicName": w.topic_name,
                "topicId": uuids.to_str(result.topic_id) if result.topic_id else "",
                "partitions": result.partitions,
                "replicationFactor": result.replication_factor,
                "config": dict(sorted(w.config.items())),
                "adopted": None,
                "reassignment": None,
            }
        )
        if w.in_sync and w.known_id:
            outcome.drift = [f"topic {w.topic_name} was deleted in Kafka: created again"]
        return outcome
    outcome = TopicOutcome(status={"topicName": w.topic_name})
    err = result or AdminError(ErrorCode.unknown_server_error, "no answer for this topic")
    if err.code == ErrorCode.topic_already_exists:  # created meanwhile: adopt it next round
        outcome.ready, outcome.requeue = False, True
        outcome.reason, outcome.message = reason_of(err.code), str(err)
        return outcome
    return _fail(outcome, err, settings)


def _fail(outcome: TopicOutcome, err: AdminError, settings: TopicSettings) -> TopicOutcome:
    """A refusal when no retry can help, else a retry after a while."""
    return _refuse(outcome, err) if err.code in REFUSALS else _retry(outcome, err, settings)


def _refuse(outcome: TopicOutcome, err: AdminError) -> TopicOutcome:
    outcome.ready, outcome.refused = False, True
    outcome.reason, outcome.message = reason_of(err.code), str(err)
    outcome.events.append(("Warning", outcome.reason, outcome.message))
    return outcome


def _retry(outcome: TopicOutcome, err: AdminError, settings: TopicSettings) -> TopicOutcome:
    outcome.ready = False
    outcome.reason, outcome.message = reason_of(err.code), str(err)
    outcome.retry_after = settings.transient_retry_seconds
    return outcome


def _transient(err: AdminError, settings: TopicSettings) -> TopicOutcome:
    return _retry(TopicOutcome(), err, settings)


def _progress(outcome: TopicOutcome, w: TopicWork, ex: _Existing, settings: TopicSettings) -> None:
    previous = dict(w.reassignment or {})
    total = int(previous.get("partitions") or len(ex.info.partitions))
    done = max(0, total - len(ex.moves))
    target = int(previous.get("targetReplicationFactor") or ex.replication_factor)
    outcome.status["reassignment"] = {**previous, "targetReplicationFactor": target, "partitions": total, "done": done}
    outcome.progress = f"replication factor change to {target}: {done}/{total} partitions moved"


async def _change_replication(
    admin: Admin,
    nodes: NodeAdmin,
    items: Sequence[TopicWork],
    rf_changes: dict[int, int],
    existing: dict[str, _Existing],
    out: dict[int, TopicOutcome],
    settings: TopicSettings,
) -> int:
    """Start the replica moves of every topic whose replication factor changes, throttled as
    kafka-reassign-partitions --throttle does: the current replicas serve the copy (leader
    side), the added ones fetch it (follower side), at the operator's rate on every broker
    either set involves."""
    brokers, _, _ = await admin.metadata([])
    live = sorted(brokers)
    addresses = {b: f"{host}:{port}" for b, (host, port, _) in brokers.items()}
    load: dict[int, int] = {}
    for ex in existing.values():
        for p in ex.info.partitions:
            for r in p.replicas:
                load[r] = load.get(r, 0) + 1
    moves: dict[tuple[str, int], list[int]] = {}
    throttles: dict[tuple[int, str], list[tuple[str, int, str | None]]] = {}
    involved: set[int] = set()
    started: list[int] = []
    for i, target in rf_changes.items():
        w, outcome = items[i], out[i]
        ex = existing[w.topic_name]
        if target > len(live):
            _refuse(
                outcome,
                AdminError(
                    ErrorCode.invalid_replication_factor,
                    f"Unable to replicate the partition {target} time(s): The target replication factor "
                    f"of {target} cannot be reached because only {len(live)} broker(s) are registered.",
                ),
            )
            outcome.drift = []
            continue
        topic_moves = []
        for p in ex.info.partitions:
            now = list(p.replicas)
            wanted = plan_replicas(now, target, live, load)
            if wanted == now:
                continue
            moves[(w.topic_name, p.partition)] = wanted
            topic_moves.append((w.topic_name, p.partition, now, wanted))
        ops, brokers_involved = replica_throttles(topic_moves)
        involved |= brokers_involved
        throttles[(TOPIC, w.topic_name)] = ops.get(w.topic_name, [])
        started.append(i)
    if not started:
        return 0
    rates = rate_ops(settings.throttle_bytes_per_second)
    await alter_brokers(nodes, {b: rates for b in sorted(involved) if b in addresses}, addresses)
    throttled = await admin.incremental_alter_configs_many(throttles)
    results = await admin.alter_partition_reassignments(moves)
    for i in started:
        w, outcome = items[i], out[i]
        err = throttled.get((TOPIC, w.topic_name))
        failed = [e for (t, _), e in results.items() if t == w.topic_name and e is not None]
        if err is None and failed:
            err = failed[0]
        if err is not None:
            _fail(outcome, err, settings)
            outcome.drift = []
            continue
        count = sum(1 for t, _ in moves if t == w.topic_name)
        outcome.status["reassignment"] = {
            "targetReplicationFactor": rf_changes[i],
            "partitions": count,
            "done": 0,
            "throttleBytesPerSecond": settings.throttle_bytes_per_second,
            "startedAt": _now(),
        }
        outcome.progress = f"replication factor change to {rf_changes[i]}: 0/{count} partitions moved"
        outcome.events.append(
            (
                "Normal",
                "ReassignmentStarted",
                f"moving {count} partition(s) to replication factor {rf_changes[i]}, "
                f"throttled to {settings.throttle_bytes_per_second} B/s per broker",
            )
        )
    return len(started)


def _now() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
