"""CreateTopics, DeleteTopics, CreatePartitions (forwarded to the controller) and DeleteRecords."""

from __future__ import annotations

from typing import Any

from kopfka import uuids
from kopfka.config.log_config import TOPIC_CONFIG
from kopfka.controller.quorum_controller import CreateTopicResult, CreateTopicSpec, ResultEntry
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.quota.throttling import delete_permits, partition_permits, run_with_mutation_quota, topic_permits
from kopfka.server.apis.configs import describe_topic_config_entries
from kopfka.server.apis.registry import api
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
    topics = []
    for r in results:
        out: dict[str, Any] = {
            "name": r.name,
            "error_code": r.error,
            "error_message": r.message,
            "topic_id": uuids.from_str(r.topic_id) if r.topic_id and r.error == ErrorCode.none else uuids.ZERO_UUID,
            "num_partitions": r.num_partitions if r.error == ErrorCode.none else -1,
            "replication_factor": r.replication_factor if r.error == ErrorCode.none else -1,
            "configs": None,
        }
        if r.error == ErrorCode.none and ctx.api_version >= 5:
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

    async def delete(admitted: list[tuple[str | None, str | None]]) -> list[ResultEntry]:
        names = [n for n, _ in admitted if n is not None]
        ids = [i for n, i in admitted if n is None]
        out = await ctx.services.controller.delete_topics(names, ids)
        by_name, by_id = iter(out[: len(names)]), iter(out[len(names) :])
        fallback = out[0] if out else ResultEntry("", ErrorCode.unknown_server_error)
        return [next(by_name, fallback) if n is not None else next(by_id, fallback) for n, _ in admitted]

    results = await run_with_mutation_quota(  # controller_mutation_rate (KIP-599): partitions deleted
        ctx,
        items,
        lambda it: delete_permits(ctx, it[0], it[1]),
        delete,
        lambda it, code, msg: ResultEntry(it[0] or "", code, msg, it[1]),
        lambda r: r.error != ErrorCode.none,
    )
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
    reqs = [
        (t.name, t.count, [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None)
        for t in req.topics
    ]
    results = await run_with_mutation_quota(  # controller_mutation_rate (KIP-599)
        ctx,
        reqs,
        lambda r: 0 if req.validate_only else partition_permits(ctx, r[0], r[1]),
        lambda admitted: ctx.services.controller.create_partitions(admitted, validate_only=req.validate_only),
        lambda r, code, msg: ResultEntry(r[0], code, msg),
        lambda r: r.error != ErrorCode.none,
    )
    return {
        "throttle_time": 0,
        "results": [{"name": r.name, "error_code": r.error, "error_message": r.message} for r in results],
    }


@api(21)
async def handle_delete_records(ctx: RequestContext, req: Any) -> dict[str, Any]:
    rm = ctx.services.replica_manager
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            out: dict[str, Any] = {
                "partition_index": p.partition_index,
                "low_watermark": -1,
                "error_code": ErrorCode.none,
            }
            try:
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
