"""Metadata (with auto topic creation) and DescribeCluster, answered from the metadata image.

Fenced brokers are left out of broker lists (seed 000: the metadata cache filters them); a
partition whose leader is not alive reports LEADER_NOT_AVAILABLE.

Authorization (Kafka's KafkaApis): a topic the principal may not DESCRIBE is left out of an
all-topics answer and, when named, answered TOPIC_AUTHORIZATION_FAILED without revealing
whether it exists; auto-creation needs CREATE on the cluster or on the topic.
"""

from __future__ import annotations

import random
from typing import Any

from kopfka import uuids
from kopfka.controller.quorum_controller import CreateTopicSpec
from kopfka.controller.topic_validation import INTERNAL_TOPICS, validate_topic_name
from kopfka.metadata.image import MetadataImage, PartitionRegistration, TopicImage, replica_dir_online
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    authorize_cluster,
    authorized_names,
    authorized_operations,
)
from kopfka.server.request_context import RequestContext

AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def alive_brokers(ctx: RequestContext, image: MetadataImage) -> list[dict[str, Any]]:
    out = []
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        if b.fenced:
            continue
        ep = b.endpoint(ctx.listener_name)
        if ep is None:
            continue
        out.append({"node_id": b.broker_id, "broker_id": b.broker_id, "host": ep.host, "port": ep.port, "rack": b.rack})
    return out


def offline_replicas(image: MetadataImage, p: PartitionRegistration, listener: str) -> list[int]:
    """Replicas that cannot serve, as Kafka's metadata cache names them: the broker unregistered,
    fenced or without this listener, or the replica in one of its offline log dirs (KIP-858)."""
    out = []
    for r in p.replicas:
        b = image.brokers.get(r)
        if b is None or b.fenced or b.endpoint(listener) is None or not replica_dir_online(image, r, p):
            out.append(r)
    return out


def topic_metadata(
    image: MetadataImage, topic: TopicImage, listener: str, error: ErrorCode = ErrorCode.none
) -> dict[str, Any]:
    alive = {b.broker_id for b in image.brokers.values() if not b.fenced}
    partitions = []
    for pid in sorted(topic.partitions):
        p = topic.partitions[pid]
        perr = ErrorCode.none if p.leader in alive else ErrorCode.leader_not_available
        partitions.append(
            {
                "error_code": perr,
                "partition_index": pid,
                "leader_id": p.leader if p.leader in alive else -1,
                "leader_epoch": p.leader_epoch,
                "replica_nodes": list(p.replicas),
                "isr_nodes": list(p.isr),
                "offline_replicas": offline_replicas(image, p, listener),
            }
        )
    return {
        "error_code": error,
        "name": topic.name,
        "topic_id": uuids.from_str(topic.topic_id),
        "is_internal": topic.name in INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def _error_topic(name: str | None, topic_id: Any, error: ErrorCode) -> dict[str, Any]:
    return {
        "error_code": error,
        "name": name,
        "topic_id": topic_id,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def controller_id_for_clients(ctx: RequestContext, image: MetadataImage) -> int:
    """KRaft brokers advertise a random live broker: clients send controller-bound requests to
    any broker, which forwards them to the active controller."""
    brokers = alive_brokers(ctx, image)
    if any(b["node_id"] == ctx.services.node_id for b in brokers):
        return ctx.services.node_id
    return random.choice(brokers)["node_id"] if brokers else -1


async def _auto_create(ctx: RequestContext, names: list[str]) -> None:
    specs = [CreateTopicSpec(n) for n in names]
    await ctx.services.controller.create_topics(specs)


@api(3)
async def handle_metadata(ctx: RequestContext, req: Any) -> dict[str, Any]:
    image = ctx.image
    svc = ctx.services
    topics_out: list[dict[str, Any]] = []
    if req.topics is None or (ctx.api_version == 0 and not req.topics):
        # all topics: those the principal may not describe are simply not there
        visible = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, image.topics_by_name,
                                   log_denied=False)
        for topic_name in sorted(visible):
            topics_out.append(topic_metadata(image, image.topics_by_name[topic_name], ctx.listener_name))
    else:
        allow_auto = getattr(req, "allow_auto_topic_creation", True) and bool(svc.config["auto.create.topics.enable"])
        to_create: list[str] = []
        requested: list[tuple[str | None, Any]] = []
        for t in req.topics:
            name = getattr(t, "name", None)
            tid = getattr(t, "topic_id", None)
            if name is None and tid is not None and tid.int != 0:
                topic = image.topics_by_id.get(uuids.to_str(tid))
                requested.append((topic.name if topic else None, tid))
                continue
            requested.append((name, None))
        named = [n for n, _ in requested if n is not None]
        visible = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, named)
        for wanted in dict.fromkeys(named):
            creatable = allow_auto and wanted not in INTERNAL_TOPICS
            if creatable and wanted in visible and wanted not in image.topics_by_name:
                try:
                    validate_topic_name(wanted)
                    to_create.append(wanted)
                except KafkaError:
                    pass
        create_refused: set[str] = set()
        if to_create and not authorize_cluster(ctx, AclOperation.CREATE, log_denied=False):
            may_create = authorized_names(ctx, AclOperation.CREATE, ResourceType.TOPIC, to_create)
            create_refused = set(to_create) - may_create
            to_create = [n for n in to_create if n in may_create]
        if to_create:
            try:
                await _auto_create(ctx, to_create)
            except KafkaError:
                pass
            image = ctx.image
        for name, tid in requested:
            if name is None:
                topics_out.append(_error_topic(None, tid, ErrorCode.unknown_topic_id))
                continue
            if name not in visible:  # never say whether it exists; a topic id request keeps the id
                topics_out.append(
                    _error_topic(None if tid is not None else name, tid if tid is not None else uuids.ZERO_UUID,
                                 ErrorCode.topic_authorization_failed)
                )
                continue
            if name in create_refused:
                topics_out.append(_error_topic(name, uuids.ZERO_UUID, ErrorCode.topic_authorization_failed))
                continue
            topic = image.topics_by_name.get(name)
            if topic is None:
                try:
                    validate_topic_name(name)
                    err = ErrorCode.unknown_topic_or_partition
                except KafkaError:
                    err = ErrorCode.invalid_topic_exception
                topics_out.append(_error_topic(name, uuids.ZERO_UUID, err))
            else:
                topics_out.append(topic_metadata(image, topic, ctx.listener_name))
    if getattr(req, "include_topic_authorized_operations", False) and ctx.api_version >= 8:
        for t in topics_out:
            if t["name"] is not None and t["error_code"] == ErrorCode.none:
                t["topic_authorized_operations"] = authorized_operations(ctx, ResourceType.TOPIC, t["name"])
    return {
        "throttle_time": 0,
        "brokers": alive_brokers(ctx, image),
        "cluster_id": svc.cluster_id,
        "controller_id": controller_id_for_clients(ctx, image),
        "topics": topics_out,
        "cluster_authorized_operations": _cluster_operations(ctx, req),
        "error_code": ErrorCode.none,
    }


def _cluster_operations(ctx: RequestContext, req: Any) -> int:
    """Metadata v8-10 and DescribeCluster: the bit field when asked for, 0 without DESCRIBE."""
    if not getattr(req, "include_cluster_authorized_operations", False):
        return AUTHORIZED_OPERATIONS_OMITTED
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return 0
    return authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)


@api(60)
async def handle_describe_cluster(ctx: RequestContext, req: Any) -> dict[str, Any]:
    image = ctx.image
    endpoint_type = getattr(req, "endpoint_type", 1)
    if endpoint_type not in (1,):
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.unsupported_endpoint_type,
            "error_message": "only broker endpoints are supported",
            "endpoint_type": endpoint_type,
            "cluster_id": ctx.services.cluster_id,
            "controller_id": -1,
            "brokers": [],
            "cluster_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
        }
    include_fenced = getattr(req, "include_fenced_brokers", False)
    brokers = []
    for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
        ep = b.endpoint(ctx.listener_name)
        if ep is None or (b.fenced and not include_fenced):
            continue
        brokers.append(
            {"broker_id": b.broker_id, "host": ep.host, "port": ep.port, "rack": b.rack, "is_fenced": b.fenced}
        )
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "endpoint_type": endpoint_type,
        "cluster_id": ctx.services.cluster_id,
        "controller_id": controller_id_for_clients(ctx, image),
        "brokers": brokers,
        "cluster_authorized_operations": _cluster_operations(ctx, req),
    }
