"""Group coordinator APIs: FindCoordinator, the classic group protocol, KIP-848 heartbeats,
offset commit/fetch/delete and group administration. The logic lives in
kopfka.coordinator.group; these handlers only translate between kio entities and it, and
check the ACLs Kafka's KafkaApis checks (group READ to be a member or commit, DESCRIBE to look,
DELETE to delete; topic READ to commit, DESCRIBE to see committed offsets)."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

from kopfka.metadata.features import consumer_rebalance_protocol_supported
from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import (
    AclOperation,
    ResourceType,
    authorize,
    authorize_cluster,
    authorized_names,
    authorized_operations,
)
from kopfka.server.request_context import RequestContext

EXTRA_APIS.update(
    {
        8: (2, 10),  # OffsetCommit
        9: (1, 10),  # OffsetFetch
        10: (0, 6),  # FindCoordinator
        11: (0, 9),  # JoinGroup
        12: (0, 4),  # Heartbeat
        13: (0, 5),  # LeaveGroup
        14: (0, 5),  # SyncGroup
        15: (0, 6),  # DescribeGroups
        16: (0, 5),  # ListGroups
        42: (0, 2),  # DeleteGroups
        47: (0, 0),  # OffsetDelete
        68: (0, 1),  # ConsumerGroupHeartbeat
        69: (0, 1),  # ConsumerGroupDescribe
    }
)


def _ms(v: Any, default: int = -1) -> int:
    if v is None:
        return default
    if isinstance(v, datetime.timedelta):
        return round(v.total_seconds() * 1000)
    return int(v)


def _group_access(ctx: RequestContext, op: AclOperation, group_id: str) -> None:
    if not authorize(ctx, op, ResourceType.GROUP, group_id):
        raise KafkaError(ErrorCode.group_authorization_failed)


def _coordinator(ctx: RequestContext) -> Any:
    coord = ctx.services.group_coordinator
    if coord is None:
        raise KafkaError(ErrorCode.coordinator_not_available, "the group coordinator is not running")
    return coord


@api(10)
async def handle_find_coordinator(ctx: RequestContext, req: Any) -> dict[str, Any]:
    keys = list(req.coordinator_keys) if ctx.api_version >= 4 else [req.key]
    key_type = int(getattr(req, "key_type", 0))
    results = []
    for key in keys:
        try:
            if key_type == 0 and not authorize(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, key):
                raise KafkaError(ErrorCode.group_authorization_failed)
            if key_type == 1 and not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
                raise KafkaError(ErrorCode.transactional_id_authorization_failed)
            if key_type == 1 and ctx.services.txn_coordinator is not None:
                results.append(await ctx.services.txn_coordinator.find_coordinator(key, ctx.listener_name))
                continue
            if key_type == 2:  # SHARE (KIP-932): "group:topicId:partition", v6+, brokers only
                if ctx.api_version < 6:
                    raise KafkaError(ErrorCode.invalid_request, "The SHARE key type needs FindCoordinator v6")
                if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):
                    raise KafkaError(ErrorCode.cluster_authorization_failed)
                share = getattr(ctx.services, "share_coordinator", None)
                if share is None:
                    raise KafkaError(ErrorCode.coordinator_not_available, "the share coordinator is not running")
                results.append(await share.find_coordinator(key, ctx.listener_name))
                continue
            results.append(await _coordinator(ctx).find_coordinator(key, key_type, ctx.listener_name))
        except KafkaError as exc:
            results.append(
                {
                    "key": key,
                    "node_id": -1,
                    "host": "",
                    "port": -1,
                    "error_code": exc.code,
                    "error_message": exc.message,
                }
            )
    if ctx.api_version >= 4:
        return {"throttle_time": 0, "coordinators": results}
    return {"throttle_time": 0, **results[0]}


# --- classic group protocol -----------------------------------------------------------------------


@api(11)
async def handle_join_group(ctx: RequestContext, req: Any) -> dict[str, Any]:
    session_ms = _ms(req.session_timeout)
    try:
        _group_access(ctx, AclOperation.READ, req.group_id)
        coord = _coordinator(ctx)
    except KafkaError as exc:
        return {
            "throttle_time": 0,
            "error_code": exc.code,
            "generation_id": -1,
            "protocol_name": "",
            "leader": "",
            "member_id": req.member_id,
            "members": [],
        }
    resp: dict[str, Any] = await coord.classic.join(
        group_id=req.group_id,
        member_id=req.member_id,
        instance_id=getattr(req, "group_instance_id", None),
        protocol_type=req.protocol_type,
        protocols=[(p.name, p.metadata) for p in req.protocols],
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=_ms(getattr(req, "rebalance_timeout", None), session_ms),
        client_id=ctx.client_id or "",
        client_host=f"/{ctx.client_host}",
        api_version=ctx.api_version,
    )
    if ctx.api_version < 7 and resp.get("protocol_name") is None:
        resp = {**resp, "protocol_name": ""}
    return resp


@api(14)
async def handle_sync_group(ctx: RequestContext, req: Any) -> dict[str, Any]:
    try:
        _group_access(ctx, AclOperation.READ, req.group_id)
        coord = _coordinator(ctx)
    except KafkaError as exc:
        return {"throttle_time": 0, "error_code": exc.code, "assignment": b""}
    return await coord.classic.sync(  # type: ignore[no-any-return]
        group_id=req.group_id,
        generation=req.generation_id,
        member_id=req.member_id,
        instance_id=getattr(req, "group_instance_id", None),
        protocol_type=getattr(req, "protocol_type", None),
        protocol_name=getattr(req, "protocol_name", None),
        assignments={a.member_id: a.assignment for a in req.assignments},
    )


@api(12)
async def handle_heartbeat(ctx: RequestContext, req: Any) -> dict[str, Any]:
    try:
        _group_access(ctx, AclOperation.READ, req.group_id)
        code = await _coordinator(ctx).classic.heartbeat(
            group_id=req.group_id,
            generation=req.generation_id,
            member_id=req.member_id,
            instance_id=getattr(req, "group_instance_id", None),
        )
    except KafkaError as exc:
        code = exc.code
    return {"throttle_time": 0, "error_code": code}


@api(13)
async def handle_leave_group(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if ctx.api_version >= 3:
        members = [(m.member_id, m.group_instance_id) for m in req.members]
    else:
        members = [(req.member_id, None)]
    try:
        _group_access(ctx, AclOperation.READ, req.group_id)
        errors = await _coordinator(ctx).classic.leave(req.group_id, members)
    except KafkaError as exc:
        return {"throttle_time": 0, "error_code": exc.code, "members": []}
    if ctx.api_version < 3:
        return {"throttle_time": 0, "error_code": errors[0]}
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "members": [
            {"member_id": mid, "group_instance_id": iid, "error_code": err}
            for (mid, iid), err in zip(members, errors, strict=True)
        ],
    }


# --- KIP-848 --------------------------------------------------------------------------------------


def _check_consumer_protocol(ctx: RequestContext) -> None:
    """As Kafka: the consumer protocol needs `consumer` in group.coordinator.rebalance.protocols
    and a finalized group.version of 1 or more (format does that from release 4.0 on)."""
    if "consumer" not in ctx.services.config["group.coordinator.rebalance.protocols"]:
        raise KafkaError(ErrorCode.unsupported_version, "The consumer rebalance protocol is not enabled.")
    if not consumer_rebalance_protocol_supported(ctx.image.features):
        raise KafkaError(ErrorCode.unsupported_version, "The consumer rebalance protocol needs group.version 1.")


@api(68)
async def handle_consumer_group_heartbeat(ctx: RequestContext, req: Any) -> dict[str, Any]:
    try:
        _check_consumer_protocol(ctx)
        _group_access(ctx, AclOperation.READ, req.group_id)
        subscribed = list(req.subscribed_topic_names or ())
        # a member may not learn of topics it cannot describe by subscribing to them (Kafka 4)
        if subscribed and len(authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, subscribed)) < len(
            set(subscribed)
        ):
            raise KafkaError(ErrorCode.topic_authorization_failed)
        coord = _coordinator(ctx)
    except KafkaError as exc:
        return {
            "throttle_time": 0,
            "error_code": exc.code,
            "error_message": exc.message,
            "member_id": None,
            "member_epoch": -1,
            "heartbeat_interval": 0,
            "assignment": None,
        }
    owned = None if req.topic_partitions is None else [(t.topic_id, list(t.partitions)) for t in req.topic_partitions]
    names = None if req.subscribed_topic_names is None else list(req.subscribed_topic_names)
    return await coord.consumer.heartbeat(  # type: ignore[no-any-return]
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=_ms(req.rebalance_timeout),
        subscribed_topic_names=names,
        subscribed_topic_regex=getattr(req, "subscribed_topic_regex", None),
        server_assignor=req.server_assignor,
        owned=owned,
        client_id=ctx.client_id or "",
        client_host=f"/{ctx.client_host}",
        api_version=ctx.api_version,
    )


def describe_modern_groups(
    ctx: RequestContext,
    group_ids: Any,
    check: Callable[[RequestContext], None],
    cls: type,
    kind: str,
    describe: Callable[[Any, Any], dict[str, Any]],
) -> list[dict[str, Any]]:
    """ConsumerGroupDescribe / ShareGroupDescribe: each group, or the error that stands for it."""
    out = []
    for gid in group_ids:
        try:
            check(ctx)
            _group_access(ctx, AclOperation.DESCRIBE, gid)
            coord = _coordinator(ctx)
            group = coord.shard_for(gid).groups.get(gid)
            if not isinstance(group, cls) or getattr(group, "dead", False):
                why = f"Group {gid} not found." if group is None else f"Group {gid} is not a {kind} group."
                raise KafkaError(ErrorCode.group_id_not_found, why)
            out.append(describe(coord, group))
        except KafkaError as exc:
            out.append(
                {
                    "group_id": gid,
                    "group_state": "",
                    "group_epoch": -1,
                    "assignment_epoch": -1,
                    "assignor_name": "",
                    "members": [],
                    "error_code": exc.code,
                    "error_message": exc.message,
                }
            )
    return out


@api(69)
async def handle_consumer_group_describe(ctx: RequestContext, req: Any) -> dict[str, Any]:
    from kopfka.coordinator.group.group_metadata import ConsumerGroup

    def describe(coord: Any, group: Any) -> dict[str, Any]:
        described: dict[str, Any] = coord.consumer.describe(group)
        # as Kafka 4.3: a group whose members' current or target assignment names a topic the
        # principal may not describe is TOPIC_AUTHORIZATION_FAILED, without its members
        topics = {
            tp["topic_name"]
            for m in described["members"]
            for key in ("assignment", "target_assignment")
            for tp in m[key]["topic_partitions"]
            if tp["topic_name"]  # "" for a topic deleted since
        }
        if topics and len(authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topics)) < len(topics):
            raise KafkaError(
                ErrorCode.topic_authorization_failed,
                "The group has described topic(s) that the client is not authorized to describe.",
            )
        if getattr(req, "include_authorized_operations", False):
            described["authorized_operations"] = authorized_operations(ctx, ResourceType.GROUP, group.group_id)
        return described

    groups = describe_modern_groups(ctx, req.group_ids, _check_consumer_protocol, ConsumerGroup, "consumer", describe)
    return {"throttle_time": 0, "groups": groups}


# --- offsets --------------------------------------------------------------------------------------


@api(8)
async def handle_offset_commit(ctx: RequestContext, req: Any) -> dict[str, Any]:
    v = ctx.api_version
    by_id = v >= 10
    entries: list[tuple[str, int, int, int, str | None]] = []
    unknown_ids: set[Any] = set()
    names: dict[Any, str | None] = {}
    try:
        _group_access(ctx, AclOperation.READ, req.group_id)
        coord = _coordinator(ctx)
    except KafkaError as exc:
        coord, group_error = None, exc.code
    for t in req.topics:
        name = coord.topic_name(t.topic_id) if (by_id and coord is not None) else getattr(t, "name", None)
        key = t.topic_id if by_id else t.name
        names[key] = name
    may_read = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, (n for n in names.values() if n))
    for t in req.topics:
        key = t.topic_id if by_id else t.name
        name = names[key]
        if name is None:
            unknown_ids.add(key)
            continue
        if name not in may_read:
            continue  # answered TOPIC_AUTHORIZATION_FAILED below, never committed
        for p in t.partitions:
            entries.append(
                (
                    name,
                    p.partition_index,
                    p.committed_offset,
                    getattr(p, "committed_leader_epoch", -1),
                    p.committed_metadata,
                )
            )
    results: dict[tuple[str, int], ErrorCode] = {}
    if coord is not None:
        try:
            results = await coord.commit_offsets(
                req.group_id,
                req.member_id,
                req.generation_id_or_member_epoch,
                getattr(req, "group_instance_id", None),
                entries,
                api_version=v,
                retention_ms=_ms(getattr(req, "retention_time", None)),
            )
            group_error = ErrorCode.none
        except KafkaError as exc:
            group_error = exc.code
    topics = []
    for t in req.topics:
        key = t.topic_id if by_id else t.name
        name = names[key]
        parts = []
        for p in t.partitions:
            err: ErrorCode
            if group_error == ErrorCode.group_authorization_failed:
                err = group_error
            elif key in unknown_ids:
                err = ErrorCode.unknown_topic_id
            elif name not in may_read:
                err = ErrorCode.topic_authorization_failed
            elif group_error != ErrorCode.none:
                err = group_error
            else:
                err = results.get((name, p.partition_index), ErrorCode.none)  # type: ignore[arg-type,assignment]
            parts.append({"partition_index": p.partition_index, "error_code": err})
        topics.append(
            {"name": key, "topic_id": key, "partitions": parts} if not by_id else {"topic_id": key, "partitions": parts}
        )
    if not by_id:
        for t in topics:
            t.pop("topic_id", None)
    return {"throttle_time": 0, "topics": topics}


async def _fetch_group(
    ctx: RequestContext,
    group_id: str,
    topics: Any,
    member_id: str | None,
    member_epoch: int,
    by_id: bool,
    require_stable: bool = False,
) -> dict[str, Any]:
    partitions_out: dict[Any, list[dict[str, Any]]] = {}
    wanted: list[tuple[str, list[int]]] | None = None
    id_of: dict[str, Any] = {}
    unknown: list[Any] = []
    coord: Any = None
    refused: list[tuple[Any, list[int]]] = []  # topics named but not describable
    try:
        _group_access(ctx, AclOperation.DESCRIBE, group_id)
        coord = _coordinator(ctx)
        if topics is not None:
            wanted = []
            for t in topics:
                name = coord.topic_name(t.topic_id) if by_id else t.name
                if name is None:
                    unknown.append(t)
                    continue
                if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                    refused.append((t.topic_id if by_id else name, list(t.partition_indexes)))
                    continue
                id_of[name] = t.topic_id if by_id else name
                wanted.append((name, list(t.partition_indexes)))
        committed = await coord.fetch_offsets(
            group_id, wanted, member_id=member_id, member_epoch=member_epoch, require_stable=require_stable
        )
        if topics is None:  # all topics: those the principal may not describe are left out
            visible = authorized_names(
                ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, {n for n, _ in committed}, log_denied=False
            )
            committed = {k: v for k, v in committed.items() if k[0] in visible}
        error = ErrorCode.none
    except KafkaError as exc:
        error = exc.code
        if error == ErrorCode.group_authorization_failed:
            return {"group_id": group_id, "error_code": error, "topics": []}
        committed = {(n, p): None for n, ps in (wanted or []) for p in ps}
    for (name, p), off in sorted(committed.items()):
        key = id_of.get(name) if name in id_of else (coord.topic_id(name) if by_id else name)
        if by_id and key is not None and getattr(key, "int", 1) == 0:
            continue  # the topic is gone: its offsets cannot be named by id
        if isinstance(off, ErrorCode):  # UNSTABLE_OFFSET_COMMIT: a transaction may still move it
            partitions_out.setdefault(key, []).append(
                {
                    "partition_index": p,
                    "committed_offset": -1,
                    "committed_leader_epoch": -1,
                    "metadata": "",
                    "error_code": off,
                }
            )
            continue
        partitions_out.setdefault(key, []).append(
            {
                "partition_index": p,
                "committed_offset": off.offset if off else -1,
                "committed_leader_epoch": off.leader_epoch if off else -1,
                "metadata": off.metadata if off else "",
                "error_code": error,
            }
        )
    for t in unknown:
        partitions_out[t.topic_id] = [
            {
                "partition_index": p,
                "committed_offset": -1,
                "committed_leader_epoch": -1,
                "metadata": "",
                "error_code": ErrorCode.unknown_topic_id,
            }
            for p in t.partition_indexes
        ]
    for key, parts in refused:
        partitions_out[key] = [
            {
                "partition_index": p,
                "committed_offset": -1,
                "committed_leader_epoch": -1,
                "metadata": "",
                "error_code": ErrorCode.topic_authorization_failed,
            }
            for p in parts
        ]
    field = "topic_id" if by_id else "name"
    return {
        "group_id": group_id,
        "error_code": error,
        "topics": [{field: k, "partitions": ps} for k, ps in partitions_out.items()],
    }


@api(9)
async def handle_offset_fetch(ctx: RequestContext, req: Any) -> dict[str, Any]:
    v = ctx.api_version
    stable = bool(getattr(req, "require_stable", False))
    if v < 8:
        g = await _fetch_group(ctx, req.group_id, req.topics, None, -1, False, stable)
        return {"throttle_time": 0, "topics": g["topics"], "error_code": g["error_code"]}
    groups = [
        await _fetch_group(
            ctx, g.group_id, g.topics, getattr(g, "member_id", None), getattr(g, "member_epoch", -1), v >= 10, stable
        )
        for g in req.groups
    ]
    return {"throttle_time": 0, "groups": groups}


@api(47)
async def handle_offset_delete(ctx: RequestContext, req: Any) -> dict[str, Any]:
    """DELETE on the group first, then READ on each topic (TOPIC_AUTHORIZATION_FAILED for its
    partitions). A request-level error answers no topics, as Kafka's OffsetDeleteRequest error
    response (and its response builder's merge of a coordinator error) does."""
    try:
        _group_access(ctx, AclOperation.DELETE, req.group_id)
        may_read = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
        tps = [(t.name, p.partition_index) for t in req.topics for p in t.partitions if t.name in may_read]
        results: dict[tuple[str, int], ErrorCode] = {
            (t.name, p.partition_index): ErrorCode.topic_authorization_failed
            for t in req.topics if t.name not in may_read for p in t.partitions
        }
        results.update(await _coordinator(ctx).delete_offsets(req.group_id, tps))
    except KafkaError as exc:
        return {"error_code": exc.code, "throttle_time": 0, "topics": []}
    return {
        "error_code": ErrorCode.none,
        "throttle_time": 0,
        "topics": [
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": results.get((t.name, p.partition_index), ErrorCode.none),
                    }
                    for p in t.partitions
                ],
            }
            for t in req.topics
        ],
    }


# --- administration -------------------------------------------------------------------------------


@api(16)
async def handle_list_groups(ctx: RequestContext, req: Any) -> dict[str, Any]:
    try:
        coord = _coordinator(ctx)
    except KafkaError as exc:
        return {"throttle_time": 0, "error_code": exc.code, "groups": []}
    groups = coord.list_groups(getattr(req, "states_filter", ()), getattr(req, "types_filter", ()))
    if not authorize_cluster(ctx, AclOperation.DESCRIBE, log_denied=False):  # else only describable groups
        visible = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.GROUP, (g["group_id"] for g in groups),
                                   log_denied=False)
        groups = [g for g in groups if g["group_id"] in visible]
    error = ErrorCode.coordinator_load_in_progress if coord.loading() else ErrorCode.none
    return {"throttle_time": 0, "error_code": error, "groups": groups}


@api(15)
async def handle_describe_groups(ctx: RequestContext, req: Any) -> dict[str, Any]:
    from kopfka.coordinator.group.group_metadata import ClassicGroup, ClassicState

    out = []
    for gid in req.groups:
        base = {
            "group_id": gid,
            "group_state": "",
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
            "error_message": None,
        }
        try:
            _group_access(ctx, AclOperation.DESCRIBE, gid)
            coord = _coordinator(ctx)
            group = coord.shard_for(gid).groups.get(gid)
            if isinstance(group, ClassicGroup) and not group.is_(ClassicState.DEAD):
                described = coord.classic.describe(group)
                if getattr(req, "include_authorized_operations", False):
                    described["authorized_operations"] = authorized_operations(ctx, ResourceType.GROUP, gid)
                out.append(described)
                continue
            if ctx.api_version >= 6:
                raise KafkaError(
                    ErrorCode.group_id_not_found,
                    f"Group {gid} not found." if group is None else f"Group {gid} is not a classic group.",
                )
            out.append({**base, "error_code": ErrorCode.none, "group_state": "Dead"})
        except KafkaError as exc:
            state = "Dead" if exc.code == ErrorCode.group_id_not_found else ""  # as Kafka's coordinator
            out.append({**base, "error_code": exc.code, "error_message": exc.message, "group_state": state})
    return {"throttle_time": 0, "groups": out}


@api(42)
async def handle_delete_groups(ctx: RequestContext, req: Any) -> dict[str, Any]:
    names = list(req.groups_names)
    may_delete = authorized_names(ctx, AclOperation.DELETE, ResourceType.GROUP, names)
    results: dict[str, ErrorCode] = {g: ErrorCode.group_authorization_failed for g in names if g not in may_delete}
    try:
        allowed = [g for g in names if g in may_delete]
        if allowed:
            results.update(await _coordinator(ctx).delete_groups(allowed))
    except KafkaError as exc:
        results.update(dict.fromkeys([g for g in names if g in may_delete], exc.code))
    return {"throttle_time": 0, "results": [{"group_id": g, "error_code": results[g]} for g in names]}
