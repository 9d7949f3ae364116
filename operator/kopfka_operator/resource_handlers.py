"""kopf handlers for Topic and Quota resources: `register_topics(registry, config)`.

A Topic or Quota names its KafkaCluster with the label `kopfka.io/cluster` (as Strimzi's
`strimzi.io/cluster`). Its handlers read the cluster's bootstrap address from an in-memory kopf
index of the KafkaClusters (no API call per resource) and hand their work to the cluster's
batcher (kafka_pool); the outcome becomes the resource's status, events and retries:

- refused by Kafka (fewer partitions, invalid config): Ready=False with Kafka's error, and no
  retry until the spec changes (the periodic resync looks again);
- cluster unreachable or a transient Kafka error: Ready=False and a retry with exponential
  backoff; other clusters' resources are not held up (one batcher and connection per cluster);
- a replication-factor change: Ready=True, Reconciling=True with its progress, polled by a
  timer that runs only while status.reassignment exists;
- drift found by the resync: put back, with a Warning event saying what differed.

Two Topics of a cluster with the same Kafka name, or two Quotas setting the same key of the
same entity, are resolved by age through kopf indexes: the older resource owns the topic or key,
the newer one reports the conflict and changes nothing of it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import kopf
from kopfka.security.client import ClientSecurity

from . import GROUP, VERSION
from .kafka_pool import Batcher, ClusterAdmin, ClusterKey, ClusterPool, ClusterUnavailable
from .kube import KubeApi
from .naming import LABEL_CLUSTER
from .quotas import (
    KAFKA_KEY,
    QuotaOutcome,
    QuotaSpecError,
    QuotaWork,
    entity_of,
    entity_text,
    values_of,
)
from .quotas import reconcile_batch as reconcile_quotas
from .security.credentials import admin_bootstrap, is_secured
from .security.users import UserOutcome, UserWork
from .security.users import reconcile_batch as reconcile_users
from .status import condition
from .topics import TopicOutcome, TopicSettings, TopicWork
from .topics import reconcile_batch as reconcile_topics

DELETE_POLICY = f"{GROUP}/delete-policy"
READY, RECONCILING = "Ready", "Reconciling"

log = logging.getLogger(__name__)


def default_bootstrap(cluster: Mapping[str, Any]) -> str | None:
    """The cluster's bootstrap Service (in-cluster DNS), once its status names it (the
    REPLICATION listener of a secured cluster: security/credentials.py)."""
    return admin_bootstrap(cluster)


@dataclass
class ResourceConfig:
    # Every Topic and Quota is compared with Kafka this often: drift is put back.
    resync_seconds: float = 300.0
    # Replication throttle (bytes/s per broker) of the moves of a replication-factor change.
    reassignment_throttle: int = field(
        default_factory=lambda: int(os.environ.get("KOPFKA_REASSIGNMENT_THROTTLE") or 10 * 1024 * 1024)
    )
    reassignment_poll_seconds: float = 2.0
    # Retries after a cluster was unreachable or Kafka failed transiently: every 5 s, doubling
    # up to 2 minutes (the retry timer ticks every retry_base_seconds).
    retry_base_seconds: float = 5.0
    retry_max_seconds: float = 120.0
    gather_seconds: float = 0.05
    connect_timeout: float = 5.0
    request_timeout: float = 60.0
    # KafkaCluster body -> bootstrap servers (tests point it at a local broker).
    bootstrap: Callable[[Mapping[str, Any]], str | None] = default_bootstrap
    # (namespace, KafkaCluster) -> the operator's credentials, asked for secured clusters only.
    security: Callable[[ClusterKey], Awaitable[ClientSecurity | None]] | None = None
    # The Kubernetes API (User resources keep passwords and certificates in Secrets); without
    # it the User handlers are not registered.
    kube: Callable[[], KubeApi] | None = None
    settings: TopicSettings = field(default_factory=TopicSettings)


class _Cluster:
    """Everything the operator keeps per KafkaCluster: the pooled admin and two batchers."""

    def __init__(self, admin: ClusterAdmin, config: ResourceConfig) -> None:
        self.admin = admin
        self.config = config
        self.topics: Batcher[TopicWork, TopicOutcome] = Batcher(self._run_topics, config.gather_seconds)
        self.quotas: Batcher[QuotaWork, QuotaOutcome] = Batcher(self._run_quotas, config.gather_seconds)
        self.users: Batcher[UserWork, UserOutcome] = Batcher(self._run_users, config.gather_seconds)

    async def _run_topics(self, items: Sequence[TopicWork]) -> Sequence[TopicOutcome | BaseException]:
        unique, where = _dedupe(items, lambda w: (w.resource, w.delete))
        async with self.admin.session() as kafka:
            results = await reconcile_topics(kafka, unique, self.config.settings, self.admin.node)
        return [results[n] for n in where]

    async def _run_quotas(self, items: Sequence[QuotaWork]) -> Sequence[QuotaOutcome | BaseException]:
        unique, where = _dedupe(items, lambda w: (w.resource, w.delete))
        async with self.admin.session() as kafka:
            results = await reconcile_quotas(kafka, unique)
        return [results[n] for n in where]

    async def _run_users(self, items: Sequence[UserWork]) -> Sequence[UserOutcome | BaseException]:
        unique, where = _dedupe(items, lambda w: (w.resource, w.delete))
        async with self.admin.session() as kafka:
            results = await reconcile_users(kafka, unique)
        return [results[n] for n in where]

    async def close(self) -> None:
        await self.topics.close()
        await self.quotas.close()
        await self.users.close()


def _dedupe(items: Sequence[Any], key: Callable[[Any], Any]) -> tuple[list[Any], list[int]]:
    """The last item per key, and for every item the index of the one that stands for it
    (a create handler and a timer of one resource may land in the same batch)."""
    last: dict[Any, int] = {}
    for i, item in enumerate(items):
        last[key(item)] = i
    unique = sorted(set(last.values()))
    where = {idx: n for n, idx in enumerate(unique)}
    return [items[i] for i in unique], [where[last[key(item)]] for item in items]


class Clusters:
    """The per-cluster state, created on first use; a new bootstrap address gets a new
    connection."""

    def __init__(self, config: ResourceConfig) -> None:
        self.config = config
        self.pool = ClusterPool(config.connect_timeout, config.request_timeout)
        self.clusters: dict[ClusterKey, _Cluster] = {}

    async def get(self, key: ClusterKey, endpoint: Endpoint) -> _Cluster:
        security = None
        if endpoint.secured and self.config.security is not None:
            security = await self.config.security(key)
            if security is None:
                raise ClusterUnavailable("the operator's certificate for this cluster is not there yet")
        admin = await self.pool.admin(key, endpoint.bootstrap, security)
        cluster = self.clusters.get(key)
        if cluster is None:
            cluster = self.clusters[key] = _Cluster(admin, self.config)
        cluster.admin = admin
        return cluster

    async def close(self) -> None:
        for cluster in self.clusters.values():
            await cluster.close()
        self.clusters.clear()
        await self.pool.close()


# ---------------------------------------------------------------------------------------------
# Status and conditions


def _in_sync(body: Mapping[str, Any]) -> bool:
    """The resource's current generation was applied and found Ready: a difference now is drift."""
    status = body.get("status") or {}
    ready: Mapping[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == READY), {})
    return status.get("observedGeneration") == body["metadata"].get("generation") and ready.get("status") == "True"


def _conditions(
    body: Mapping[str, Any],
    ready: bool,
    reason: str,
    message: str,
    reconciling: bool = False,
    reconciling_reason: str | None = None,
    reconciling_message: str = "",
) -> list[dict[str, Any]]:
    generation = int(body["metadata"].get("generation") or 0)
    previous = (body.get("status") or {}).get("conditions") or []
    return [
        condition(READY, ready, reason, message, generation, previous),
        condition(
            RECONCILING, reconciling, reconciling_reason or reason, reconciling_message or message, generation, previous
        ),
    ]


def _write_status(body: Mapping[str, Any], patch: kopf.Patch, updates: Mapping[str, Any]) -> None:
    """Only what differs goes into the patch (None removes a field): an unchanged resource
    costs no write."""
    current = body.get("status") or {}
    for key, value in updates.items():
        if current.get(key) != value:
            patch.status[key] = _replacing(current.get(key), value)


def _replacing(old: Any, new: Any) -> Any:
    """A merge-patch value that turns `old` into `new`: a map's keys that went away are
    deleted (None), not merged into what was there."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out = {k: None for k in old if k not in new}
        out.update({k: _replacing(old.get(k), v) for k, v in new.items() if old.get(k) != v})
        return out
    return new


RETRY_REASONS = frozenset({"Retrying", "WaitingForCluster"})


def _retrying(conditions: Any) -> bool:
    """Whether the conditions say the last attempt must be retried (Reconciling=True for a
    retry, not for a running reassignment)."""
    for c in conditions or []:
        if c.get("type") == RECONCILING:
            return c.get("status") == "True" and c.get("reason") in RETRY_REASONS
    return False


def _backoff(config: ResourceConfig, retry: int, base: float | None = None) -> float:
    return min(config.retry_max_seconds, (base or config.retry_base_seconds) * 2 ** min(retry, 10))


def _post(body: kopf.Body, events: Sequence[tuple[str, str, str]]) -> None:
    for type_, reason, message in events:
        kopf.event(body, type=type_, reason=reason, message=message[:1000])


class Endpoint(NamedTuple):
    """Where a cluster's Kafka API is, and whether the operator needs its credentials there."""

    bootstrap: str
    secured: bool = False


def _cluster_of(
    body: Mapping[str, Any], endpoints: kopf.Index[ClusterKey, tuple[str | None, bool, bool]]
) -> tuple[ClusterKey | None, Endpoint | None, str, str]:
    """(cluster key, endpoint, reason, message): an endpoint, or why there is none."""
    meta = body["metadata"]
    name = (meta.get("labels") or {}).get(LABEL_CLUSTER)
    if not name:
        return None, None, "ClusterLabelMissing", f"label {LABEL_CLUSTER} names no KafkaCluster"
    key = (meta.get("namespace") or "", name)
    found = list(endpoints.get(key, []))
    if not found:
        return key, None, "ClusterNotFound", f"KafkaCluster {key[0]}/{name} does not exist"
    bootstrap, deleting, secured = found[0]
    if deleting:
        return key, None, "ClusterDeleting", f"KafkaCluster {key[0]}/{name} is being deleted"
    if not bootstrap:
        return key, None, "ClusterNotReady", f"KafkaCluster {key[0]}/{name} has no bootstrap address yet"
    return key, Endpoint(bootstrap, secured), "", ""


def _age(body: Mapping[str, Any]) -> tuple[str, str]:
    meta = body["metadata"]
    return (str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))


# ---------------------------------------------------------------------------------------------
# Topics


def topic_name_of(body: Mapping[str, Any]) -> str:
    return str((body.get("spec") or {}).get("topicName") or body["metadata"]["name"])


def topic_work(body: Mapping[str, Any], delete: bool = False) -> TopicWork:
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    meta = body["metadata"]
    return TopicWork(
        resource=(meta.get("namespace") or "", meta["name"]),
        topic_name=topic_name_of(body),
        partitions=spec.get("partitions"),
        replication_factor=spec.get("replicationFactor"),
        config={str(k): str(v) for k, v in (spec.get("config") or {}).items()},
        known_id=status.get("topicId") or None,
        adopted=bool(status.get("adopted")),
        in_sync=_in_sync(body),
        reassignment=status.get("reassignment"),
        delete=delete,
    )


def register_topics(registry: kopf.OperatorRegistry, config: ResourceConfig | None = None) -> Clusters:
    """Topic and Quota handlers, and the indexes they share, into `registry`."""
    cfg = config or ResourceConfig()
    cfg.settings.throttle_bytes_per_second = cfg.reassignment_throttle
    clusters = Clusters(cfg)

    @kopf.index(GROUP, VERSION, "kafkaclusters", registry=registry, id="kopfka_cluster_endpoints")  # id: the kwarg name
    def kopfka_cluster_endpoints(body: kopf.Body, namespace: str | None, name: str, **_: Any) -> dict[Any, Any]:
        deleting = bool(body.metadata.get("deletionTimestamp"))
        return {(namespace, name): (cfg.bootstrap(body), deleting, is_secured(body))}

    @kopf.index(GROUP, VERSION, "topics", registry=registry, id="kopfka_topic_claims")  # id: the kwarg name
    def kopfka_topic_claims(body: kopf.Body, namespace: str | None, **_: Any) -> dict[Any, Any]:
        cluster = body.metadata.labels.get(LABEL_CLUSTER)
        return {(namespace, cluster, topic_name_of(body)): _age(body)} if cluster else {}

    @kopf.index(GROUP, VERSION, "quotas", registry=registry, id="kopfka_quota_claims")  # id: the kwarg name
    def kopfka_quota_claims(body: kopf.Body, namespace: str | None, **_: Any) -> dict[Any, Any]:
        cluster = body.metadata.labels.get(LABEL_CLUSTER)
        try:
            entity = entity_of(body.get("spec") or {})
        except QuotaSpecError:
            return {}
        keys = frozenset(values_of(body.get("spec") or {}))
        return {(namespace, cluster, entity): (*_age(body), keys)} if cluster else {}

    @kopf.on.cleanup(registry=registry)
    async def close_clusters(**_: Any) -> None:
        await clusters.close()

    backoff: dict[str, tuple[float, float]] = {}  # uid -> (next attempt, delay after it)

    def reconcile_on_change_and_resync(plural: str, claims: str | None, apply: Callable[..., Awaitable[None]]) -> None:
        """One kind's handlers: create, update and resume (after an operator restart); the
        periodic resync, which puts drift back; and the retry timer, which runs only while the
        status says Retrying or WaitingForCluster, with exponential backoff. A failure never
        raises into kopf: its status says why, and nothing is written while it lasts."""

        async def changed(body: kopf.Body, patch: kopf.Patch, **kw: Any) -> None:
            backoff.pop(body.metadata.uid or "", None)
            await apply(body, patch, kw["kopfka_cluster_endpoints"], kw[claims] if claims else None)

        async def resync(body: kopf.Body, patch: kopf.Patch, **kw: Any) -> None:
            await _quietly(apply(body, patch, kw["kopfka_cluster_endpoints"], kw[claims] if claims else None))

        async def retry(body: kopf.Body, patch: kopf.Patch, **kw: Any) -> None:
            uid, now = body.metadata.uid or "", time.monotonic()
            due, delay = backoff.get(uid, (0.0, cfg.retry_base_seconds))
            if now < due:
                return
            backoff[uid] = (now + delay, min(2 * delay, cfg.retry_max_seconds))
            await _quietly(apply(body, patch, kw["kopfka_cluster_endpoints"], kw[claims] if claims else None))
            if not _retrying(patch.status.get("conditions") or body.get("status", {}).get("conditions")):
                backoff.pop(uid, None)

        for on in (kopf.on.resume, kopf.on.create, kopf.on.update):
            on(GROUP, VERSION, plural, registry=registry, id=f"{plural}-changed")(changed)
        every = cfg.resync_seconds
        kopf.timer(
            GROUP, VERSION, plural, registry=registry, id=f"{plural}-resync", interval=every, initial_delay=every
        )(resync)
        tick = cfg.retry_base_seconds
        kopf.timer(
            GROUP,
            VERSION,
            plural,
            registry=registry,
            id=f"{plural}-retry",
            interval=tick,
            initial_delay=tick,
            when=lambda status, **_: _retrying(status.get("conditions")),
        )(retry)

    def waiting_for_cluster(
        body: kopf.Body, patch: kopf.Patch, endpoints: kopf.Index[Any, Any]
    ) -> tuple[ClusterKey | None, Endpoint | None]:
        """The resource's cluster and its bootstrap address; else the status says why (and the
        retry timer looks again, unless there is no label: nothing to wait for until it changes)."""
        key, bootstrap, why, message = _cluster_of(body, endpoints)
        if key is None or bootstrap is None:
            waiting = key is not None
            conditions = _conditions(body, False, why, message, waiting, "WaitingForCluster" if waiting else why)
            _write_status(body, patch, {"conditions": conditions})
        return key, bootstrap

    async def apply_topic(
        body: kopf.Body,
        patch: kopf.Patch,
        endpoints: kopf.Index[Any, Any],
        claims: kopf.Index[Any, Any],
    ) -> None:
        key, bootstrap = waiting_for_cluster(body, patch, endpoints)
        if key is None or bootstrap is None:
            return
        name = topic_name_of(body)
        status = body.get("status") or {}
        if status.get("topicName") and status["topicName"] != name:
            msg = f"spec.topicName cannot change from {status['topicName']} to {name} (Kafka cannot rename a topic)"
            _write_status(body, patch, {"conditions": _conditions(body, False, "TopicNameChanged", msg)})
            return
        owner = min(claims.get((*key, name), [_age(body)]))
        if owner != _age(body):
            msg = f"topic {name} of cluster {key[1]} is managed by Topic {key[0]}/{owner[1]}"
            _write_status(body, patch, {"conditions": _conditions(body, False, "TopicConflict", msg)})
            return
        work = topic_work(body)
        try:
            cluster = await clusters.get(key, bootstrap)
            for _round in range(3):
                outcome = await cluster.topics.submit(work)
                if not outcome.requeue:
                    break
                work = dataclasses.replace(work, known_id=outcome.status.get("topicId") or work.known_id)
        except ClusterUnavailable as exc:
            msg = str(exc)
            _write_status(body, patch, {"conditions": _conditions(body, False, exc.reason, msg, True, "Retrying")})
            return
        updates: dict[str, Any] = {"observedGeneration": body.metadata.get("generation"), **outcome.status}
        if outcome.progress:
            conds = _conditions(body, True, "Reconciled", "", True, "ReassigningReplicas", outcome.progress)
        elif outcome.retry_after is not None or outcome.requeue:
            conds = _conditions(body, False, outcome.reason, outcome.message, True, "Retrying")
        else:
            conds = _conditions(body, outcome.ready, outcome.reason, outcome.message)
        updates["conditions"] = conds
        _write_status(body, patch, updates)
        events = list(outcome.events)
        if outcome.drift:
            events.insert(0, ("Warning", "Drift", "put back to the spec: " + "; ".join(outcome.drift)))
        if not (outcome.refused and not _changed(body, updates)):
            _post(body, events)  # a refusal repeated by the resync is not re-announced

    reconcile_on_change_and_resync("topics", "kopfka_topic_claims", apply_topic)

    @kopf.timer(
        GROUP,
        VERSION,
        "topics",
        registry=registry,
        interval=cfg.reassignment_poll_seconds,
        when=lambda status, **_: bool(status.get("reassignment")),
    )
    async def topic_reassignment_progress(
        body: kopf.Body,
        patch: kopf.Patch,
        **kw: Any,
    ) -> None:
        await _quietly(apply_topic(body, patch, kw["kopfka_cluster_endpoints"], kw["kopfka_topic_claims"]))

    @kopf.on.delete(GROUP, VERSION, "topics", registry=registry)
    async def topic_deleted(
        body: kopf.Body,
        retry: int,
        logger: logging.Logger | logging.LoggerAdapter[Any],
        **kw: Any,
    ) -> None:
        name = topic_name_of(body)
        status = body.get("status") or {}
        if body.metadata.annotations.get(DELETE_POLICY) == "retain":
            logger.info("delete-policy retain: topic %s stays in Kafka", name)
            return
        if not status.get("topicId"):
            return  # never created or adopted
        key, bootstrap, why, message = _cluster_of(body, kw["kopfka_cluster_endpoints"])
        if key is None or why in ("ClusterNotFound", "ClusterDeleting"):
            return  # the topic goes with its cluster
        claims = sorted(kw["kopfka_topic_claims"].get((*key, name), []))
        if (claims and claims[0] != _age(body)) or len(claims) > 1:
            logger.info("topic %s stays: another Topic resource names it", name)
            return
        if bootstrap is None:
            raise kopf.TemporaryError(message, delay=_backoff(cfg, retry, 5.0))
        try:
            outcome = await (await clusters.get(key, bootstrap)).topics.submit(topic_work(body, delete=True))
        except ClusterUnavailable as exc:
            raise kopf.TemporaryError(str(exc), delay=_backoff(cfg, retry)) from None
        if outcome.retry_after is not None:
            raise kopf.TemporaryError(outcome.message, delay=_backoff(cfg, retry, outcome.retry_after))
        logger.info("%s", outcome.message)

    # -----------------------------------------------------------------------------------------
    # Quotas

    def quota_plan(body: Mapping[str, Any], claims: kopf.Index[Any, Any], key: ClusterKey) -> tuple[Any, ...]:
        """(entity, owned values, keys to release, conflicts {spec key: other resource})."""
        spec = body.get("spec") or {}
        entity = entity_of(spec)
        mine = _age(body)
        wanted = values_of(spec)
        others = [c for c in claims.get((*key, entity), []) if (c[0], c[1]) != mine]
        conflicts = {k: o[1] for o in sorted(others) if (o[0], o[1]) < mine for k in o[2] if k in wanted}
        owned = {k: v for k, v in wanted.items() if k not in conflicts}
        claimed_by_others = {k for o in others for k in o[2]}
        applied = set(((body.get("status") or {}).get("applied") or {}).keys()) & set(KAFKA_KEY)
        release = frozenset(k for k in applied if k not in owned and k not in claimed_by_others)
        return entity, owned, release, conflicts

    async def apply_quota(
        body: kopf.Body,
        patch: kopf.Patch,
        endpoints: kopf.Index[Any, Any],
        claims: kopf.Index[Any, Any],
    ) -> None:
        key, bootstrap = waiting_for_cluster(body, patch, endpoints)
        if key is None or bootstrap is None:
            return
        try:
            entity, owned, release, conflicts = quota_plan(body, claims, key)
        except QuotaSpecError as exc:
            _write_status(body, patch, {"conditions": _conditions(body, False, "InvalidSpec", str(exc))})
            return
        was = (body.get("status") or {}).get("entity")
        if was and was != entity_text(entity):
            msg = f"spec.entity cannot change from {was} to {entity_text(entity)}: create another Quota for it"
            _write_status(body, patch, {"conditions": _conditions(body, False, "EntityChanged", msg)})
            return
        meta = body.metadata
        work = QuotaWork((meta.namespace or "", meta.name or ""), entity, owned, release, _in_sync(body))
        try:
            outcome = await (await clusters.get(key, bootstrap)).quotas.submit(work)
        except ClusterUnavailable as exc:
            msg = str(exc)
            _write_status(body, patch, {"conditions": _conditions(body, False, exc.reason, msg, True, "Retrying")})
            return
        ready, reason, msg = outcome.ready, outcome.reason, outcome.message
        if conflicts and ready:
            ready, reason = False, "Conflict"
            msg = "; ".join(
                f"{k} of {entity_text(entity)} is set by Quota {key[0]}/{other}"
                for k, other in sorted(conflicts.items())
            )
        updates: dict[str, Any] = {
            "observedGeneration": meta.get("generation"),
            "entity": entity_text(entity),
            "applied": dict(sorted(outcome.applied.items())),
        }
        retrying = outcome.retry_after is not None
        updates["conditions"] = _conditions(body, ready, reason, msg, retrying, "Retrying" if retrying else None)
        events = list(outcome.events)
        if conflicts and _changed(body, updates):
            events.append(("Warning", "Conflict", msg))
        if outcome.drift:
            events.insert(0, ("Warning", "Drift", "put back to the spec: " + "; ".join(outcome.drift)))
        _write_status(body, patch, updates)
        _post(body, events)

    reconcile_on_change_and_resync("quotas", "kopfka_quota_claims", apply_quota)

    if cfg.kube is not None:
        from .security.user_handlers import register_users  # it builds on this module's helpers

        register_users(registry, cfg, clusters, reconcile_on_change_and_resync, waiting_for_cluster)

    @kopf.on.delete(GROUP, VERSION, "quotas", registry=registry)
    async def quota_deleted(
        body: kopf.Body,
        retry: int,
        logger: logging.Logger | logging.LoggerAdapter[Any],
        **kw: Any,
    ) -> None:
        key, bootstrap, why, message = _cluster_of(body, kw["kopfka_cluster_endpoints"])
        if key is None or why in ("ClusterNotFound", "ClusterDeleting"):
            return
        try:
            entity, _owned, _release, _conflicts = quota_plan(body, kw["kopfka_quota_claims"], key)
        except QuotaSpecError:
            return
        others = [c for c in kw["kopfka_quota_claims"].get((*key, entity), []) if (c[0], c[1]) != _age(body)]
        claimed_by_others = {k for o in others for k in o[2]}
        applied = set(((body.get("status") or {}).get("applied") or {}).keys()) & set(KAFKA_KEY)
        release = frozenset(k for k in applied if k not in claimed_by_others)
        if not release:
            return
        if bootstrap is None:
            raise kopf.TemporaryError(message, delay=_backoff(cfg, retry, 5.0))
        meta = body.metadata
        work = QuotaWork((meta.namespace or "", meta.name or ""), entity, {}, release, delete=True)
        try:
            outcome = await (await clusters.get(key, bootstrap)).quotas.submit(work)
        except ClusterUnavailable as exc:
            raise kopf.TemporaryError(str(exc), delay=_backoff(cfg, retry)) from None
        if outcome.retry_after is not None or not outcome.ready:
            raise kopf.TemporaryError(outcome.message, delay=_backoff(cfg, retry, outcome.retry_after))
        logger.info("%s", outcome.message)

    return clusters


def _changed(body: Mapping[str, Any], updates: Mapping[str, Any]) -> bool:
    """Whether the status would change, conditions' timestamps aside."""
    current = body.get("status") or {}

    def strip(conds: Any) -> Any:
        return [{k: v for k, v in c.items() if k != "lastTransitionTime"} for c in conds or []]

    for key, value in updates.items():
        if key == "conditions":
            if strip(current.get(key)) != strip(value):
                return True
        elif current.get(key) != value:
            return True
    return False


async def _quietly(work: Any) -> None:
    """A timer's run: its status is written; a failure waits for the next tick (or the change
    handler's own backoff) instead of kopf's error backoff of the timer."""
    try:
        await work
    except kopf.TemporaryError:
        pass
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except Exception:
        log.exception("resync failed")
