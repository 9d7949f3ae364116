"""ListOffsets (earliest, latest, by timestamp, max timestamp) and OffsetForLeaderEpoch."""

from __future__ import annotations

from typing import Any

from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import AclOperation, ResourceType, authorize_cluster, authorized_names
from kopfka.server.request_context import RequestContext

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
MIN_TIMESTAMP_FOR_VERSION = {0: -2, 7: -3, 8: -4, 9: -5, 11: -6}


def _min_special(version: int) -> int:
    best = -2
    for v, m in MIN_TIMESTAMP_FOR_VERSION.items():
        if version >= v:
            best = min(best, m)
    return best


@api(2)
async def handle_list_offsets(ctx: RequestContext, req: Any) -> dict[str, Any]:
    rm = ctx.services.replica_manager
    read_committed = getattr(req, "isolation_level", 0) == 1
    min_special = _min_special(ctx.api_version)
    topics = []
    seen: set[tuple[str, int]] = set()
    allowed = authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name for t in req.topics))
    for t in req.topics:
        parts = []
        for p in t.partitions:
            out: dict[str, Any] = {
                "partition_index": p.partition_index,
                "error_code": ErrorCode.none,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            parts.append(out)
            try:
                if t.name not in allowed:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                if (t.name, p.partition_index) in seen:
                    raise KafkaError(ErrorCode.invalid_request, "duplicate partition in ListOffsets")
                seen.add((t.name, p.partition_index))
                ts = int(p.timestamp)
                if ts < min_special:
                    raise KafkaError(
                        ErrorCode.unsupported_version, f"timestamp {ts} not supported at v{ctx.api_version}"
                    )
                part = rm.get_leader_partition((t.name, p.partition_index), getattr(p, "current_leader_epoch", -1))
                ulog = part.log
                if ts == LATEST:
                    out["offset"] = ulog.last_stable_offset if read_committed else ulog.high_watermark
                    out["leader_epoch"] = part.leader_epoch
                elif ts in (EARLIEST, EARLIEST_LOCAL):
                    earliest = ulog.fetch_offset_by_timestamp(ts)  # the epoch cache's earliest entry
                    out["offset"] = ulog.log_start_offset
                    epoch = earliest.leader_epoch if earliest is not None else None
                    out["leader_epoch"] = -1 if epoch is None else epoch
                else:
                    found = ulog.fetch_offset_by_timestamp(ts)
                    bound = ulog.last_stable_offset if read_committed else ulog.high_watermark
                    if found is not None and found.offset >= 0 and found.offset < max(bound, 0):
                        out["timestamp"] = found.timestamp
                        out["offset"] = found.offset
                        le = getattr(found, "leader_epoch", None)
                        out["leader_epoch"] = le if isinstance(le, int) else _epoch_at(ulog, found.offset)
            except KafkaError as exc:
                out["error_code"] = exc.code
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


def _epoch_at(ulog: Any, offset: int) -> int:
    e = ulog.leader_epoch_cache.epoch_for_offset(offset)
    return -1 if e is None else int(e)


@api(23)
async def handle_offset_for_leader_epoch(ctx: RequestContext, req: Any) -> dict[str, Any]:
    rm = ctx.services.replica_manager
    topics = []
    # followers (ClusterAction) may ask about any partition; others need DESCRIBE on the topic
    allowed = (
        None
        if authorize_cluster(ctx, AclOperation.CLUSTER_ACTION, log_denied=False)
        else authorized_names(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in req.topics))
    )
    for t in req.topics:
        parts = []
        for p in t.partitions:
            out: dict[str, Any] = {
                "error_code": ErrorCode.none,
                "partition": p.partition,
                "leader_epoch": -1,
                "end_offset": -1,
            }
            try:
                if allowed is not None and t.topic not in allowed:
                    raise KafkaError(ErrorCode.topic_authorization_failed)
                part = rm.get_leader_partition((t.topic, p.partition), p.current_leader_epoch)
                found = part.log.end_offset_for_epoch(p.leader_epoch)
                # an epoch the log does not know: UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET
                out["leader_epoch"], out["end_offset"] = found if found is not None else (-1, -1)
            except KafkaError as exc:
                out["error_code"] = exc.code
            parts.append(out)
        topics.append({"topic": t.topic, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}
