"""CreateTopics, DeleteTopics, CreatePartitions (forwarded to the controller) and DeleteRecords.

Authorization as Kafka's KafkaApis: CreateTopics needs CREATE on the cluster or the topic,
DeleteTopics DESCRIBE and DELETE on the topic, CreatePartitions ALTER, DeleteRecords DELETE;
refused topics never reach the controller.
"""

from __future__ import annotations

from typing import Any

from kopfka import uuids
from kopfka.config.log_config import TOPIC_CONFIG
from kopfka.controller.quorum_controller import CreateTopicResult, CreateTopicSpec, ResultEntry
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.quota.throttling import delete_permits, partition_permits, run_with_mutation_quota, topic_permits
from kopfka.server.apis.configs import describe_topic_config_entries
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import AclOperation, ResourceType, authorize_cluster, authorized_names
from kopfka.server.request_context import RequestContext


@api(19)
async def handle_create_topics(ctx: RequestContext, req: Any) -> dict[str, Any]:
    specs = []
    for t in req.topics:
        assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments} if t.assignments else None
        specs.append(
            CreateTopicSpec(
                t.name, t.num_partitions, t.replication_factor, assignments, {c.name: c.value for c in t.configs}
            )
        )
    if authorize_cluster(ctx, AclOperation.CREATE, log_denied=False):
        may_create = {s.name for s in specs}
    else:
        may_create = authorized_names(ctx, AclOperation.CREATE, ResourceType.TOPIC, (s.name for s in specs))
    may_describe_configs = authorized_names(
        ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, (s.name for s in specs), log_denied=False
    )
    refused = {s.name: CreateTopicResult(s.name, ErrorCode.topic_authorization_failed, "Authorization failed.")
               for s in specs if s.name not in may_create}
    specs_in_order, specs = specs, [s for s in specs if s.name in may_create]
    try:
        validate_only = req.validate_only if ctx.api_version >= 1 else False
        results = await run_with_mutation_quota(  # controller_mutation_rate (KIP-599)
            ctx,
            specs,
            lambda s: 0 if validate_only else topic_permits(ctx, s),
            lambda admitted: ctx.services.controller.create_topics(admitted, validate_only=validate_only),
            lambda s, code, msg: CreateTopicResult(s.name, code, msg),
            lambda r: r.error != ErrorCode.none,
        )
    except KafkaError as exc:
        return {
            "throttle_time": 0,
            "topics": [
                {
                    "name": s.name,
                    "error_code": exc.code,
                    "error_message": exc.message,
                    "num_partitions": -1,
                    "replication_factor": -1,
                }
                for s in specs
            ],
        }
    answered = iter(results)  # in the order of the specs sent
    results = [refused.get(s.name) or next(answered) for s in specs_in_order]
    topics = []
    for r in results:
        out: dict[str, Any] = {
            "name": r.name,
            "error_code": r.error,
            "error_message": r.message,
            "topic_id": uuids.from_str(r.topic_id) if r.topic_id and r.error == ErrorCode.none else uuids.ZERO_UUID,
            "num_partitions": r.num_partitions if r.error == ErrorCode.none else -1,
            "replication_factor": r.replication_factor if r.error == ErrorCode.none else -1,
            "configs": [],
        }
        if r.error == ErrorCode.none and ctx.api_version >= 5 and r.name not in may_describe_configs:
            out["topic_config_error_code"] = ErrorCode.topic_authorization_failed
        elif r.error == ErrorCode.none and ctx.api_version >= 5:
            entries = describe_topic_config_entries(ctx, r.name, overrides=r.configs, include_synonyms=False)
            out["configs"] = [
                {
                    "name": e["name"],
                    "value": e["value"],
                    "read_only": e["read_only"],
                    "config_source": e["config_source"],
                    "is_sensitive": e["is_sensitive"],
                }
                for e in entries
            ]
        topics.append(out)
    return {"throttle_time": 0, "topics": topics}


@api(20)
async def handle_delete_topics(ctx: RequestContext, req: Any) -> dict[str, Any]:
    items: list[tuple[str | None, str | None]] = []  # (name, id), in request order
    if ctx.api_version >= 6:
        for t in req.topics:
            if t.name is not None:
                items.append((t.name, None))
            elif t.topic_id is not None:
                items.append((None, uuids.to_str(t.topic_id)))
    else:
        items = [(n, None) for n in req.topic_names]
    image = ctx.image

    def name_of(it: tuple[str | None, str | None]) -> str | None:
        if it[0] is not None:
            return it[0]
        topic = image.topics_by_id.get(it[1] or "")
        return topic.name if topic is not None else None

    names = [n for n in map(name_of, items) if n is not None]
    may_describe = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, names, log_denied=False)
    may_delete = authorized_names(ctx, AclOperation.DELETE, ResourceType.TOPIC, names)
    refused: dict[int, ResultEntry] = {}
    for i, it in enumerate(items):
        name = name_of(it)
        if name is None:
            continue  # an unknown topic id: the controller answers UNKNOWN_TOPIC_ID
        if name not in may_describe:  # a topic id request must not learn the name
            refused[i] = ResultEntry(it[0] or "", ErrorCode.topic_authorization_failed, None, it[1])
        elif name not in may_delete:
            refused[i] = ResultEntry(it[0] or "", ErrorCode.topic_authorization_failed, None, it[1])
    all_items, items = items, [it for i, it in enumerate(items) if i not in refused]

    async def delete(admitted: list[tuple[str | None, str | None]]) -> list[ResultEntry]:
        names = [n for n, _ in admitted if n is not None]
        ids = [i for n, i in admitted if n is None]
        out = await ctx.services.controller.delete_topics(names, ids)
        by_name, by_id = iter(out[: len(names)]), iter(out[len(names) :])
        fallback = out[0] if out else ResultEntry("", ErrorCode.unknown_server_error)
        return [next(by_name, fallback) if n is not None else next(by_id, fallback) for n, _ in admitted]

    done = iter(
        await run_with_mutation_quota(  # controller_mutation_rate (KIP-599): partitions deleted
            ctx,
            items,
            lambda it: delete_permits(ctx, it[0], it[1]),
            delete,
            lambda it, code, msg: ResultEntry(it[0] or "", code, msg, it[1]),
            lambda r: r.error != ErrorCode.none,
        )
        if items
        else []
    )
    results = [refused[i] if i in refused else next(done) for i in range(len(all_items))]
    return {
        "throttle_time": 0,
        "responses": [
            {
                "name": r.name or None,
                "topic_id": uuids.from_str(r.topic_id) if r.topic_id else uuids.ZERO_UUID,
                "error_code": r.error,
                "error_message": r.message,
            }
            for r in results
        ],
    }


@api(37)
async def handle_create_partitions(ctx: RequestContext, req: Any) -> dict[str, Any]:
    all_reqs = [
        (t.name, t.count, [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None)
        for t in req.topics
    ]
    may_alter = authorized_names(ctx, AclOperation.ALTER, ResourceType.TOPIC, (r[0] for r in all_reqs))
    reqs = [r for r in all_reqs if r[0] in may_alter]
    done = iter(
        await run_with_mutation_quota(  # controller_mutation_rate (KIP-599)
            ctx,
            reqs,
            lambda r: 0 if req.validate_only else partition_permits(ctx, r[0], r[1]),
            lambda admitted: ctx.services.controller.create_partitions(admitted, validate_only=req.validate_only),
            lambda r, code, msg: ResultEntry(r[0], code, msg),
            lambda r: r.error != ErrorCode.none,
        )
        if reqs
        else []
    )
    results = [
        next(done)
        if r[0] in may_alter
        else ResultEntry(r[0], ErrorCode.topic_authorization_failed, "The topic authorization is failed.")
        for r in all_reqs
    ]
    return {
        "throttle_time": 0,
        "results": [{"name": r.name, "error_code": r.error, "error_message": r.message} for r in results],
    }


@api(21)
async def handle_delete_records(ctx: RequestContext, req: Any) -> dict[str, Any]:
    rm = ctx.services.replica_manager
    topics = []
    may_delete = authorized_names(ctx, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in req.topics))
    for t in req.topics:
        parts = []
        for p in t.partitions:
            out: dict[str, Any] = {
                "partition_index": p.partition_index,
                "low_watermark": -1,
                "error_code": ErrorCode.none,
            }
            try:
                if t.name not in may_delete:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                part = rm.get_leader_partition((t.name, p.partition_index))
                ulog = part.log
                if not ulog.config.delete:  # as Kafka: compacted-only records are not deletable
                    raise KafkaError(
                        ErrorCode.policy_violation,
                        f"Records of partition {t.name}-{p.partition_index} can not be deleted due to the "
                        "configured policy",
                    )
                target = ulog.high_watermark if p.offset == -1 else p.offset
                if target < 0 or target > ulog.high_watermark:
                    raise KafkaError(
                        ErrorCode.offset_out_of_range,
                        f"Cannot increment the log start offset to {target}: "
                        f"it is beyond the high watermark {ulog.high_watermark}",
                    )
                ulog.maybe_increment_log_start_offset(target, "client delete records")
                out["low_watermark"] = ulog.log_start_offset
                part.notify()
            except KafkaError as exc:
                out["error_code"] = exc.code
            parts.append(out)
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


__all__ = ["TOPIC_CONFIG"]
