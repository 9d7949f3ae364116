"""DescribeTopicPartitions (KIP-966): topic descriptions paged by a partition limit and a cursor,
as the Java admin client's describeTopics uses them from Kafka 3.7 on.

Topics are answered in name order, from the cursor's topic and partition on; once the limit is
reached the response carries the next cursor (the partition to resume from, or partition 0 of
the next topic). The limit is the request's, capped by `max.request.partition.size.limit`.
An explicit list names unknown topics with an error; listing all topics (empty list) does not.
"""

from __future__ import annotations

from typing import Any

from kopfka import uuids
from kopfka.controller.topic_validation import INTERNAL_TOPICS, validate_topic_name
from kopfka.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.apis.metadata import AUTHORIZED_OPERATIONS_OMITTED, offline_replicas
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import AclOperation, ResourceType, authorized_names
from kopfka.server.request_context import RequestContext

DESCRIBE_TOPIC_PARTITIONS = 75
EXTRA_APIS[DESCRIBE_TOPIC_PARTITIONS] = (0, 0)


def _partition(image: MetadataImage, pid: int, p: PartitionRegistration, listener: str) -> dict[str, Any]:
    leader = image.brokers.get(p.leader)
    return {
        "error_code": ErrorCode.none,
        "partition_index": pid,
        "leader_id": p.leader if leader is not None and leader.endpoint(listener) is not None else -1,
        "leader_epoch": p.leader_epoch,
        "replica_nodes": list(p.replicas),
        "isr_nodes": list(p.isr),
        "eligible_leader_replicas": list(p.elr),  # KIP-966, kept by the controller while ELR is enabled
        "last_known_elr": list(p.last_known_elr),
        "offline_replicas": offline_replicas(image, p, listener),
    }


def _topic(name: str, topic_id: Any, error: ErrorCode, partitions: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "error_code": error,
        "name": name,
        "topic_id": topic_id,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": partitions,
        "topic_authorized_operations": AUTHORIZED_OPERATIONS_OMITTED,
    }


def _unknown(name: str) -> dict[str, Any]:
    try:
        validate_topic_name(name)
        error = ErrorCode.unknown_topic_or_partition
    except KafkaError:
        error = ErrorCode.invalid_topic_exception
    return _topic(name, uuids.ZERO_UUID, error, [])


def describe(
    image: MetadataImage, names: list[str], listener: str, limit: int, cursor: tuple[str, int] | None, list_all: bool
) -> dict[str, Any]:
    remaining = limit
    topics_out: list[dict[str, Any]] = []
    next_cursor = None
    for name in names:
        if remaining <= 0:
            next_cursor = {"topic_name": name, "partition_index": 0}
            break
        topic: TopicImage | None = image.topics_by_name.get(name)
        if topic is None:
            if not list_all:
                topics_out.append(_unknown(name))
            continue
        start = cursor[1] if cursor is not None and name == cursor[0] else 0
        count = len(topic.partitions)
        upper = min(count, start + remaining)
        parts = [
            _partition(image, pid, topic.partitions[pid], listener)
            for pid in range(start, upper)
            if pid in topic.partitions
        ]
        topics_out.append(_topic(name, uuids.from_str(topic.topic_id), ErrorCode.none, parts))
        if upper < count:
            next_cursor = {"topic_name": name, "partition_index": upper}
            break
        remaining -= len(parts)
    return {"throttle_time": 0, "topics": topics_out, "next_cursor": next_cursor}


@api(DESCRIBE_TOPIC_PARTITIONS)
async def handle_describe_topic_partitions(ctx: RequestContext, req: Any) -> dict[str, Any]:
    image = ctx.image
    requested = [t.name for t in req.topics]
    list_all = not requested
    # topics the principal may not describe: left out of a listing, refused by name (never revealed)
    visible = authorized_names(
        ctx,
        AclOperation.DESCRIBE,
        ResourceType.TOPIC,
        image.topics_by_name if list_all else requested,
        log_denied=not list_all,
    )
    refused = [n for n in dict.fromkeys(requested) if n not in visible]
    requested = [n for n in requested if n in visible]
    cursor = (req.cursor.topic_name, int(req.cursor.partition_index)) if req.cursor is not None else None
    first = cursor[0] if cursor is not None else ""
    names = sorted({n for n in (visible if list_all else requested) if n >= first})
    if cursor is not None and ((not list_all and cursor[0] not in names) or cursor[1] < 0):
        # Kafka answers an InvalidRequestException with the error on every requested topic
        return {
            "throttle_time": 0,
            "topics": [
                {**_topic(n, uuids.ZERO_UUID, ErrorCode.invalid_request, []), "is_internal": False} for n in requested
            ],
            "next_cursor": None,
        }
    limit = max(min(int(ctx.services.config["max.request.partition.size.limit"]), int(req.response_partition_limit)), 1)
    out = describe(image, names, ctx.listener_name, limit, cursor, list_all)
    out["topics"] += [_topic(n, uuids.ZERO_UUID, ErrorCode.topic_authorization_failed, []) for n in refused]
    return out
