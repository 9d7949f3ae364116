"""RemoteController: the QuorumController's async surface, served by the active controller over RPC.

Request handlers and the BrokerLifecycleManager call `services.controller.x(...)`; on every node,
a combined one included (its broker reaches its own controller over the controller listener, as
Kafka's does), that is this channel, Kafka's NodeToControllerChannelManager: the active controller
is the raft leader this node learned from its metadata fetches; NOT_CONTROLLER, a dropped
connection or an unknown leader are retried against the (possibly new) leader until the request
timeout.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from kopfka import uuids
from kopfka.controller.quorum_controller import (
    AlterPartitionResult,
    CreateTopicResult,
    CreateTopicSpec,
    HeartbeatResult,
    OngoingReassignment,
    PartitionOutcome,
    ResultEntry,
)
from kopfka.metadata import records as mr
from kopfka.metadata.features import SUPPORTED_FEATURES
from kopfka.metadata.image import MetadataImage
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.raft.kafka_raft import KafkaRaftClient, RaftPeers
from kopfka.security.client import ClientSecurity

log = logging.getLogger(__name__)

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
RETRIABLE = {ErrorCode.not_controller, ErrorCode.request_timed_out}
FIRST_RETRY_BACKOFF_S = 0.005


def _errors_in(resp: Any) -> Iterable[ErrorCode]:
    code = getattr(resp, "error_code", None)
    if code is not None:
        yield code
    for attr in ("topics", "responses", "results", "filter_results"):
        for item in getattr(resp, attr, None) or ():
            c = getattr(item, "error_code", None)
            if c is not None:
                yield c


class RemoteController:
    def __init__(
        self,
        raft: KafkaRaftClient,
        *,
        node_id: int,
        cluster_id: str,
        image: Callable[[], MetadataImage] | None = None,
        timeout_s: float = 30.0,
        retry_backoff_s: float = 0.05,
        security: ClientSecurity | None = None,
    ) -> None:
        self.raft = raft
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.image = image
        self.timeout = timeout_s
        self.backoff = retry_backoff_s
        self.peers = RaftPeers(request_timeout_s=max(2.0, timeout_s / 3), security=security)

    async def _call(
        self,
        api_key: int,
        version: int,
        body: dict[str, Any],
        *,
        timeout: float | None = None,
        maybe_applied: list[str] | None = None,
        retriable: frozenset[ErrorCode] | set[ErrorCode] = RETRIABLE,
    ) -> Any:
        deadline = time.monotonic() + (timeout or self.timeout)
        last: str = "no active controller known"
        # exponential backoff (KIP-580) from a short first wait: the usual miss is a controller a
        # few ms from active (just elected, its log not yet claimed), e.g. a combined node's own
        backoff = min(self.backoff, FIRST_RETRY_BACKOFF_S)
        while True:
            ep = self.raft.leader_endpoint() if self.raft.leader_id >= 0 else None
            if ep is None and self.raft.leader_id >= 0:
                last = f"no endpoint known for controller {self.raft.leader_id}"
            if ep is not None:
                try:
                    resp = await self.peers.request(
                        ep[0],
                        ep[1],
                        api_key,
                        version,
                        body,
                        purpose="controller",
                        timeout=max(0.5, deadline - time.monotonic()),
                    )
                    codes = set(_errors_in(resp))
                    if not codes & retriable:
                        return resp
                    last = f"controller {self.raft.leader_id} answered {', '.join(c.name for c in codes & retriable)}"
                    if maybe_applied is not None and ErrorCode.request_timed_out in codes:
                        maybe_applied.append(last)  # written, maybe committed after the answer
                except ConnectionError as exc:
                    last = f"cannot reach controller {self.raft.leader_id}: {exc}"
                    if maybe_applied is not None:
                        maybe_applied.append(last)  # the request may have been processed, the answer lost
            if time.monotonic() >= deadline:
                raise KafkaError(ErrorCode.request_timed_out, f"controller request {api_key} timed out: {last}")
            await asyncio.sleep(backoff)
            backoff = min(self.backoff, backoff * 2)

    async def update_features(
        self, updates: list[tuple[str, int, int]], *, validate_only: bool = False
    ) -> tuple[ErrorCode, str | None]:
        body = {
            "timeout": 60000,
            "feature_updates": [{"feature": n, "max_version_level": lvl, "upgrade_type": t} for n, lvl, t in updates],
            "validate_only": validate_only,
        }
        resp = await self._call(57, 2, body)
        return ErrorCode(int(resp.error_code)), resp.error_message

    async def forward(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        """Send a client's request on to the active controller and return its answer (the
        forwarding Kafka's brokers do for controller-bound APIs such as DescribeQuorum). Only a
        missing or unreachable controller is retried; its answer, errors included, is the client's."""
        return await self._call(api_key, version, body, retriable={ErrorCode.not_controller})

    async def _await_image(self, cond: Callable[[MetadataImage], bool], timeout: float = 3.0) -> None:
        """Let the broker's own image reach a change it just made (read-your-writes for clients)."""
        if self.image is None:
            return
        deadline = time.monotonic() + timeout
        while not cond(self.image()) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    async def close(self) -> None:
        await self.peers.close()

    # --- admin requests (forwarded) --------------------------------------------------------------
    async def create_topics(
        self, specs: list[CreateTopicSpec], *, validate_only: bool = False
    ) -> list[CreateTopicResult]:
        body = {
            "timeout": int(self.timeout * 1000),
            "validate_only": validate_only,
            "topics": [
                {
                    "name": s.name,
                    "num_partitions": s.num_partitions,
                    "replication_factor": s.replication_factor,
                    "assignments": [{"partition_index": p, "broker_ids": b} for p, b in (s.assignments or {}).items()],
                    "configs": [{"name": k, "value": v} for k, v in s.configs.items()],
                }
                for s in specs
            ],
        }
        before = set(self.image().topics_by_name) if self.image is not None else None
        maybe_applied: list[str] = []
        resp = await self._call(19, 7, body, maybe_applied=maybe_applied)
        out = []
        by_name = {s.name: s for s in specs}
        for t in resp.topics:
            ok = t.error_code == ErrorCode.none
            if (
                t.error_code == ErrorCode.topic_already_exists
                and maybe_applied
                and not validate_only
                and before is not None
                and t.name not in before
                and t.name in by_name
            ):
                own = await self._own_earlier_creation(by_name[t.name])
                if own is not None:
                    out.append(own)
                    continue
            out.append(
                CreateTopicResult(
                    t.name,
                    t.error_code,
                    t.error_message,
                    uuids.to_str(t.topic_id) if ok and t.topic_id else None,
                    t.num_partitions,
                    t.replication_factor,
                    {c.name: c.value for c in (t.configs or ())},
                )
            )
        created = {r.name for r in out if r.error == ErrorCode.none}
        if created and not validate_only:
            await self._await_image(lambda img: created <= set(img.topics_by_name))
        return out

    async def _own_earlier_creation(self, spec: CreateTopicSpec) -> CreateTopicResult | None:
        """A retry after a lost answer got TOPIC_ALREADY_EXISTS: report success when the topic is
        what our earlier attempt would have created. The caller has checked that the topic did not
        exist in this broker's image when the call started and that an attempt may have been
        applied (connection lost / timed out); here the topic must match the spec exactly —
        partition count and replication factor when given, the explicit assignment, and exactly
        the requested config overrides. A concurrent creation by another client with an identical
        spec is indistinguishable and is also reported as success."""
        assert self.image is not None
        await self._await_image(lambda img: spec.name in img.topics_by_name)
        img = self.image()
        topic = img.topics_by_name.get(spec.name)
        if topic is None or not topic.partitions:
            return None
        parts = [topic.partitions[p] for p in sorted(topic.partitions)]
        rf = len(parts[0].replicas)
        if spec.num_partitions not in (-1, len(parts)) or spec.replication_factor not in (-1, rf):
            return None
        if spec.assignments and {p: list(r) for p, r in spec.assignments.items()} != {
            pid: list(topic.partitions[pid].replicas) for pid in topic.partitions
        }:
            return None
        wanted = {k: v for k, v in spec.configs.items() if v is not None}
        if dict(img.topic_config(spec.name)) != wanted:
            return None
        log.info("CreateTopics %s: the earlier attempt (answer lost) created it; reporting success", spec.name)
        return CreateTopicResult(spec.name, ErrorCode.none, None, topic.topic_id, len(parts), rf, wanted)

    async def delete_topics(self, names: Iterable[str | None], ids: Iterable[str | None] = ()) -> list[ResultEntry]:
        topics = [{"name": n, "topic_id": uuids.ZERO_UUID} for n in names if n is not None]
        topics += [{"name": None, "topic_id": uuids.from_str(t)} for t in ids if t is not None]
        resp = await self._call(20, 6, {"timeout": int(self.timeout * 1000), "topics": topics})
        out = [
            ResultEntry(
                r.name or "",
                r.error_code,
                r.error_message,
                uuids.to_str(r.topic_id) if r.topic_id and r.topic_id.int else None,
            )
            for r in resp.responses
        ]
        gone = {r.topic_id for r in out if r.error == ErrorCode.none and r.topic_id}
        if gone:
            await self._await_image(lambda img: not gone & set(img.topics_by_id))
        return out

    async def create_partitions(
        self, requests: list[tuple[str, int, list[list[int]] | None]], *, validate_only: bool = False
    ) -> list[ResultEntry]:
        body = {
            "timeout": int(self.timeout * 1000),
            "validate_only": validate_only,
            "topics": [
                {"name": n, "count": c, "assignments": None if a is None else [{"broker_ids": b} for b in a]}
                for n, c, a in requests
            ],
        }
        resp = await self._call(37, 3, body)
        return [ResultEntry(r.name, r.error_code, r.error_message) for r in resp.results]

    async def alter_client_quotas(self, entries: list[Any], validate_only: bool = False) -> list[Any]:
        """Forward AlterClientQuotas to the active controller (quota limits are cluster metadata)."""
        from kopfka.controller.client_quota_control import QuotaResult

        body = {
            "validate_only": validate_only,
            "entries": [
                {
                    "entity": [{"entity_type": t, "entity_name": n} for t, n in e.entity],
                    "ops": [{"key": k, "value": 0.0 if v is None else v, "remove": v is None} for k, v in e.ops],
                }
                for e in entries
            ],
        }
        resp = await self._call(49, 1, body)
        return [
            QuotaResult(
                tuple((c.entity_type, c.entity_name) for c in r.entity), ErrorCode(int(r.error_code)), r.error_message
            )
            for r in resp.entries
        ]

    # --- security (forwarded; the answer waits until this broker's image shows the change) ----------
    async def create_acls(self, acls: list[Any]) -> list[Any]:
        from kopfka.controller.acl_control import AclResult
        from kopfka.server.apis.acls import creation_dict

        resp = await self._call(30, 3, {"creations": [creation_dict(a) for a in acls]})
        results = [AclResult(ErrorCode(int(r.error_code)), r.error_message) for r in resp.results]
        created = {a for a, r in zip(acls, results, strict=False) if r.error == ErrorCode.none}
        await self._await_image(lambda img: created <= set(img.acls))
        return results

    async def delete_acls(self, filters: list[Any]) -> list[Any]:
        from kopfka.controller.acl_control import AclResult
        from kopfka.server.apis.acls import acl_from_matching, filter_dict

        resp = await self._call(31, 3, {"filters": [filter_dict(f) for f in filters]})
        results = [
            AclResult(ErrorCode(int(r.error_code)), r.error_message, [acl_from_matching(m) for m in r.matching_acls])
            for r in resp.filter_results
        ]
        gone = {a for r in results for a in r.matched}
        await self._await_image(lambda img: not gone & set(img.acls))
        return results

    async def alter_user_scram_credentials(self, deletions: list[Any], upsertions: list[Any]) -> list[Any]:
        from kopfka.controller.scram_control import UserResult

        body = {
            "deletions": [{"name": d.name, "mechanism": d.mechanism} for d in deletions],
            "upsertions": [
                {
                    "name": u.name,
                    "mechanism": u.mechanism,
                    "iterations": u.iterations,
                    "salt": u.salt,
                    "salted_password": u.salted_password,
                }
                for u in upsertions
            ],
        }
        resp = await self._call(51, 0, body)
        results = [UserResult(r.user, ErrorCode(int(r.error_code)), r.error_message) for r in resp.results]
        ok = {r.user for r in results if r.error == ErrorCode.none}
        wanted_salts = {(u.name, u.mechanism): u.salt for u in upsertions if u.name in ok}
        removed = {(d.name, d.mechanism) for d in deletions if d.name in ok}
        await self._await_image(
            lambda img: (
                all(getattr(img.scram.get(k), "salt", None) == s for k, s in wanted_salts.items())
                and not removed & set(img.scram)
            )
        )
        return results

    async def incremental_alter_configs(
        self, resources: list[tuple[int, str, list[tuple[str, int, str | None]]]], *, validate_only: bool = False
    ) -> list[ResultEntry]:
        body = {
            "validate_only": validate_only,
            "resources": [
                {
                    "resource_type": t,
                    "resource_name": n,
                    "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
                }
                for t, n, ops in resources
            ],
        }
        resp = await self._call(44, 1, body)
        return [
            ResultEntry(r.resource_name, r.error_code, r.error_message, resource_type=r.resource_type)
            for r in resp.responses
        ]

    async def alter_configs(
        self, resources: list[tuple[int, str, dict[str, str | None]]], *, validate_only: bool = False
    ) -> list[ResultEntry]:
        body = {
            "validate_only": validate_only,
            "resources": [
                {"resource_type": t, "resource_name": n, "configs": [{"name": k, "value": v} for k, v in vals.items()]}
                for t, n, vals in resources
            ],
        }
        resp = await self._call(33, 2, body)
        return [
            ResultEntry(r.resource_name, r.error_code, r.error_message, resource_type=r.resource_type)
            for r in resp.responses
        ]

    # --- lifecycle RPCs -----------------------------------------------------------------------------
    async def register_broker(
        self,
        broker_id: int,
        incarnation_id: str,
        endpoints: tuple[mr.Endpoint, ...],
        rack: str | None,
        log_dirs: tuple[str, ...],
        cluster_id: str,
        *,
        previous_broker_epoch: int = -1,
    ) -> int:
        body = {
            "broker_id": broker_id,
            "cluster_id": cluster_id,
            "incarnation_id": uuid.UUID(incarnation_id),
            "listeners": [
                {
                    "name": e.name,
                    "host": e.host,
                    "port": e.port,
                    "security_protocol": SECURITY_PROTOCOL_IDS.get(e.security_protocol, 0),
                }
                for e in endpoints
            ],
            "features": [
                {"name": n, "min_supported_version": lo, "max_supported_version": hi}
                for n, (lo, hi) in SUPPORTED_FEATURES.items()
            ],
            "rack": rack,
            "is_migrating_zk_broker": False,
            "log_dirs": [uuids.from_str(d) for d in log_dirs if d],
            "previous_broker_epoch": previous_broker_epoch,
        }
        resp = await self._call(62, 4, body, timeout=5.0)
        if resp.error_code != ErrorCode.none:
            raise KafkaError(resp.error_code, _registration_message(resp.error_code, broker_id))
        return int(resp.broker_epoch)

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
        body = {
            "broker_id": broker_id,
            "broker_epoch": broker_epoch,
            "current_metadata_offset": current_metadata_offset,
            "want_fence": want_fence,
            "want_shut_down": want_shutdown,
            "offline_log_dirs": [uuids.from_str(d) for d in offline_log_dirs],
            "cordoned_log_dirs": None if cordoned_log_dirs is None else [uuids.from_str(d) for d in cordoned_log_dirs],
        }
        resp = await self._call(63, 2, body, timeout=5.0)
        if resp.error_code != ErrorCode.none:
            raise KafkaError(resp.error_code, f"heartbeat refused: {resp.error_code.name}")
        return HeartbeatResult(bool(resp.is_caught_up), bool(resp.is_fenced), bool(resp.should_shut_down))

    async def unregister_broker(self, broker_id: int) -> None:
        resp = await self._call(64, 0, {"broker_id": broker_id})
        if resp.error_code != ErrorCode.none:
            raise KafkaError(resp.error_code, resp.error_message or resp.error_code.name)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        resp = await self._call(67, 0, {"broker_id": broker_id, "broker_epoch": broker_epoch})
        if resp.error_code != ErrorCode.none:
            raise KafkaError(resp.error_code, f"AllocateProducerIds failed: {resp.error_code.name}")
        return int(resp.producer_id_start), int(resp.producer_id_len)

    async def assign_replicas_to_dirs(
        self, broker_id: int, broker_epoch: int, assignments: list[tuple[str, str, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        by_dir: dict[str, dict[str, list[int]]] = {}
        for d, t, p in assignments:
            by_dir.setdefault(d, {}).setdefault(t, []).append(p)
        body = {
            "broker_id": broker_id,
            "broker_epoch": broker_epoch,
            "directories": [
                {
                    "id_": uuids.from_str(d),
                    "topics": [
                        {"topic_id": uuids.from_str(t), "partitions": [{"partition_index": p} for p in ps]}
                        for t, ps in topics.items()
                    ],
                }
                for d, topics in by_dir.items()
            ],
        }
        resp = await self._call(73, 0, body)
        if resp.error_code != ErrorCode.none:
            raise KafkaError(resp.error_code, resp.error_code.name)
        return {
            (uuids.to_str(t.topic_id), int(p.partition_index)): p.error_code
            for d in resp.directories
            for t in d.topics
            for p in t.partitions
        }

    # --- replication ----------------------------------------------------------------------------
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
        body = {
            "broker_id": broker_id,
            "broker_epoch": broker_epoch,
            "topics": [
                {
                    "topic_id": uuids.from_str(topic_id),
                    "partitions": [
                        {
                            "partition_index": partition,
                            "leader_epoch": leader_epoch,
                            "new_isr_with_epochs": [{"broker_id": b, "broker_epoch": e} for b, e in new_isr],
                            "leader_recovery_state": 0,
                            "partition_epoch": partition_epoch,
                        }
                    ],
                }
            ],
        }
        resp = await self._call(56, 3, body, timeout=5.0)
        if resp.error_code != ErrorCode.none:
            return AlterPartitionResult(resp.error_code)
        for t in resp.topics:
            for p in t.partitions:
                return AlterPartitionResult(
                    p.error_code,
                    int(p.leader_id),
                    int(p.leader_epoch),
                    tuple(int(b) for b in p.isr),
                    int(p.partition_epoch),
                )
        return AlterPartitionResult(ErrorCode.unknown_server_error)

    async def elect_leaders(self, election_type: int, wanted: list[tuple[str, int]] | None) -> list[PartitionOutcome]:
        topics: dict[str, list[int]] = {}
        for name, pid in wanted or ():
            topics.setdefault(name, []).append(pid)
        body = {
            "election_type": election_type,
            "timeout": int(self.timeout * 1000),
            "topic_partitions": None
            if wanted is None
            else [{"topic": n, "partitions": ps} for n, ps in topics.items()],
        }
        resp = await self._call(43, 2, body)
        if resp.error_code != ErrorCode.none:
            raise KafkaError(resp.error_code, resp.error_code.name)
        out = [
            PartitionOutcome(r.topic, int(p.partition_id), p.error_code, p.error_message)
            for r in resp.replica_election_results
            for p in r.partition_result
        ]
        await self._await_image(
            lambda img: all(
                (t := img.topics_by_name.get(o.topic)) is None
                or (pr := t.partitions.get(o.partition)) is None
                or pr.leader == pr.replicas[0]
                for o in out
                if o.error == ErrorCode.none and election_type == 0
            )
        )
        return out

    async def alter_partition_reassignments(
        self, items: list[tuple[str, int, list[int] | None]]
    ) -> list[PartitionOutcome]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for name, pid, replicas in items:
            topics.setdefault(name, []).append({"partition_index": pid, "replicas": replicas})
        body = {
            "timeout": int(self.timeout * 1000),
            "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
        }
        resp = await self._call(45, 0, body)
        if resp.error_code != ErrorCode.none:
            raise KafkaError(resp.error_code, resp.error_message or resp.error_code.name)
        return [
            PartitionOutcome(t.name, int(p.partition_index), p.error_code, p.error_message)
            for t in resp.responses
            for p in t.partitions
        ]

    async def list_partition_reassignments(self, wanted: list[tuple[str, int]] | None) -> list[OngoingReassignment]:
        topics: dict[str, list[int]] = {}
        for name, pid in wanted or ():
            topics.setdefault(name, []).append(pid)
        body = {
            "timeout": int(self.timeout * 1000),
            "topics": None if wanted is None else [{"name": n, "partition_indexes": ps} for n, ps in topics.items()],
        }
        resp = await self._call(46, 0, body)
        if resp.error_code != ErrorCode.none:
            raise KafkaError(resp.error_code, resp.error_message or resp.error_code.name)
        return [
            OngoingReassignment(
                t.name, int(p.partition_index), tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas)
            )
            for t in resp.topics
            for p in t.partitions
        ]


def _registration_message(code: ErrorCode, broker_id: int) -> str:
    if code == ErrorCode.duplicate_broker_registration:
        return (
            f"duplicate node id: another broker with node.id {broker_id} is registered and still "
            "heartbeating (give each node its own node.id)"
        )
    if code == ErrorCode.inconsistent_cluster_id:
        return "cluster id mismatch: this node's log dirs were formatted for another cluster than the controllers'"
    if code == ErrorCode.cluster_authorization_failed:
        return (
            "the controller refused this broker: the principal it reaches the controller listener as "
            "(User:ANONYMOUS on a PLAINTEXT one) needs ClusterAction: add it to super.users, or "
            "authenticate the controller listener (SASL, or SSL with client auth) as a super user"
        )
    return f"registration refused: {code.name}"
