"""Share-group APIs on the group coordinator (KIP-932): ShareGroupHeartbeat, ShareGroupDescribe,
Describe/Alter/DeleteShareGroupOffsets. Like Kafka they answer UNSUPPORTED_VERSION until
share.version 1 is finalized, and check Kafka's ACLs: group READ to be a member or alter
offsets, DESCRIBE to look, DELETE to delete offsets; topic DESCRIBE to subscribe or see
offsets, READ to alter or delete them. The logic is in kopfka.coordinator.group.share_protocol."""

from __future__ import annotations

from typing import Any

from kopfka import uuids
from kopfka.metadata.features import share_groups_supported
from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.apis.groups import _coordinator, _group_access, describe_modern_groups
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import AclOperation, ResourceType, authorized_names, authorized_operations
from kopfka.server.request_context import RequestContext

SHARE_GROUP_HEARTBEAT, SHARE_GROUP_DESCRIBE = 76, 77
DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 90, 91, 92
EXTRA_APIS.update(
    {
        SHARE_GROUP_HEARTBEAT: (1, 1),
        SHARE_GROUP_DESCRIBE: (1, 1),
        DESCRIBE_OFFSETS: (0, 1),
        ALTER_OFFSETS: (0, 0),
        DELETE_OFFSETS: (0, 0),
    }
)


def check_share_groups_enabled(ctx: RequestContext) -> None:
    """Kafka's isShareGroupProtocolEnabled: share.version 1 or more is finalized."""
    if not share_groups_supported(ctx.image.features):
        raise KafkaError(ErrorCode.unsupported_version, "Share groups need share.version 1.")


@api(SHARE_GROUP_HEARTBEAT)
async def handle_share_group_heartbeat(ctx: RequestContext, req: Any) -> dict[str, Any]:
    try:
        check_share_groups_enabled(ctx)
        _group_access(ctx, AclOperation.READ, req.group_id)
        names = None if req.subscribed_topic_names is None else list(req.subscribed_topic_names)
        if names and len(authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)) < len(set(names)):
            raise KafkaError(ErrorCode.topic_authorization_failed)
        coord = _coordinator(ctx)
    except KafkaError as exc:
        from kopfka.coordinator.group.share_protocol import heartbeat_error  # the coordinator's, built on need

        return heartbeat_error(exc)
    return await coord.share.heartbeat(  # type: ignore[no-any-return]
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        rack_id=req.rack_id,
        subscribed_topic_names=names,
        client_id=ctx.client_id or "",
        client_host=f"/{ctx.client_host}",
    )


@api(SHARE_GROUP_DESCRIBE)
async def handle_share_group_describe(ctx: RequestContext, req: Any) -> dict[str, Any]:
    from kopfka.coordinator.group.group_metadata import ShareGroup

    def describe(coord: Any, group: Any) -> dict[str, Any]:
        described: dict[str, Any] = coord.share.describe(group)
        topics = {tp["topic_name"] for m in described["members"] for tp in m["assignment"]["topic_partitions"]}
        if topics and len(authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics)) < len(topics):
            raise KafkaError(
                ErrorCode.topic_authorization_failed,
                "The group has described topic(s) that the client is not authorized to describe.",
            )
        if getattr(req, "include_authorized_operations", False):
            described["authorized_operations"] = authorized_operations(ctx, ResourceType.GROUP, group.group_id)
        return described

    groups = describe_modern_groups(ctx, req.group_ids, check_share_groups_enabled, ShareGroup, "share", describe)
    return {"throttle_time": 0, "groups": groups}


@api(DESCRIBE_OFFSETS)
async def handle_describe_share_group_offsets(ctx: RequestContext, req: Any) -> dict[str, Any]:
    from kopfka.coordinator.group.share_protocol import offsetless_topic  # the coordinator's, built on need

    groups = []
    for g in req.groups:
        try:
            check_share_groups_enabled(ctx)
            _group_access(ctx, AclOperation.DESCRIBE, g.group_id)
            coord = _coordinator(ctx)
            if g.topics is None:
                result = await coord.share.describe_offsets(g.group_id, None)
                visible = authorized_names(
                    ctx,
                    AclOperation.DESCRIBE,
                    ResourceType.TOPIC,
                    (t["topic_name"] for t in result["topics"]),
                    log_denied=False,
                )
                result["topics"] = [t for t in result["topics"] if t["topic_name"] in visible]
            else:
                names = [t.topic_name for t in g.topics]
                allowed = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
                wanted = [(t.topic_name, list(t.partitions)) for t in g.topics if t.topic_name in allowed]
                result = (
                    await coord.share.describe_offsets(g.group_id, wanted)
                    if wanted
                    else {"group_id": g.group_id, "topics": [], "error_code": ErrorCode.none, "error_message": None}
                )
                result["topics"] += [
                    offsetless_topic(
                        t.topic_name,
                        list(t.partitions),
                        ErrorCode.topic_authorization_failed,
                        "Topic authorization failed.",
                    )
                    for t in g.topics
                    if t.topic_name not in allowed
                ]
            groups.append(result)
        except KafkaError as exc:
            groups.append({"group_id": g.group_id, "topics": [], "error_code": exc.code, "error_message": exc.message})
    return {"throttle_time": 0, "groups": groups}


@api(ALTER_OFFSETS)
async def handle_alter_share_group_offsets(ctx: RequestContext, req: Any) -> dict[str, Any]:
    try:
        check_share_groups_enabled(ctx)
        _group_access(ctx, AclOperation.READ, req.group_id)
        coord = _coordinator(ctx)
        names = [t.topic_name for t in req.topics]
        allowed = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, names)
        refused = [
            {
                "topic_name": t.topic_name,
                "topic_id": uuids.ZERO_UUID,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": ErrorCode.topic_authorization_failed,
                        "error_message": "Topic authorization failed.",
                    }
                    for p in t.partitions
                ],
            }
            for t in req.topics
            if t.topic_name not in allowed
        ]
        wanted = [
            (t.topic_name, [(p.partition_index, p.start_offset) for p in t.partitions])
            for t in req.topics
            if t.topic_name in allowed
        ]
        responses = await coord.share.alter_offsets(req.group_id, wanted) if wanted else []
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "error_message": None,
            "responses": responses + refused,
        }
    except KafkaError as exc:
        return {"throttle_time": 0, "error_code": exc.code, "error_message": exc.message, "responses": []}


@api(DELETE_OFFSETS)
async def handle_delete_share_group_offsets(ctx: RequestContext, req: Any) -> dict[str, Any]:
    try:
        check_share_groups_enabled(ctx)
        _group_access(ctx, AclOperation.DELETE, req.group_id)
        if not req.group_id:
            raise KafkaError(ErrorCode.invalid_group_id, "The group id is empty")
        coord = _coordinator(ctx)
        names = [t.topic_name for t in req.topics]
        allowed = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, names)
        refused = [
            {
                "topic_name": n,
                "topic_id": uuids.ZERO_UUID,
                "error_code": ErrorCode.topic_authorization_failed,
                "error_message": "Topic authorization failed.",
            }
            for n in names
            if n not in allowed
        ]
        wanted = [n for n in names if n in allowed]
        responses = await coord.share.delete_offsets(req.group_id, wanted) if wanted else []
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.none,
            "error_message": None,
            "responses": responses + refused,
        }
    except KafkaError as exc:
        return {"throttle_time": 0, "error_code": exc.code, "error_message": exc.message, "responses": []}
