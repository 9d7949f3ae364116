"""ShareFetch and ShareAcknowledge (KIP-932) on the partition leaders.

As Kafka's KafkaApis: UNSUPPORTED_VERSION until share.version 1; a group id, group READ and a
member id (1-36 characters) are required; the share session (kopfka.server.share.share_session)
decides which partitions a fetch covers; topic READ is needed per partition. Acknowledgements
(piggybacked on ShareFetch, or in ShareAcknowledge) are checked as Kafka checks them
(INVALID_REQUEST for a batch whose offsets run backwards or overlap the previous one, whose
types do not match its length, or whose type is unknown; RENEW only in a renew request) and
applied before the fetch; a fetch with epoch -1 releases the member's records afterwards.
"""

from __future__ import annotations

from typing import Any

from kopfka import uuids
from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.apis.registry import api
from kopfka.server.apis.share_groups import check_share_groups_enabled
from kopfka.server.auth_helper import AclOperation, ResourceType, authorize, authorized_names
from kopfka.server.leader_discovery import NOT_HERE, LeaderHints
from kopfka.server.request_context import RequestContext
from kopfka.server.share.share_session import FINAL_EPOCH, INITIAL_EPOCH

SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79
EXTRA_APIS.update({SHARE_FETCH: (1, 2), SHARE_ACKNOWLEDGE: (1, 2)})

TP = tuple[str, int]  # (topic id, partition)
AckBatches = list[tuple[int, int, list[int]]]


def _manager(ctx: RequestContext) -> Any:
    mgr = getattr(ctx.services, "share_partitions", None)
    if mgr is None:
        raise KafkaError(ErrorCode.coordinator_not_available, "share groups are not running on this broker")
    return mgr


def _check_request(ctx: RequestContext, group_id: str | None, member_id: str | None) -> None:
    check_share_groups_enabled(ctx)
    if group_id is None:
        raise KafkaError(ErrorCode.invalid_request, "Invalid group id in the request.")
    if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, group_id):
        raise KafkaError(ErrorCode.group_authorization_failed)
    if not member_id or len(member_id) > 36:
        raise KafkaError(ErrorCode.invalid_request, "Invalid member id in the request.")


def _valid_acks(batches: AckBatches, renew: bool, max_type: int) -> bool:
    """Kafka's validateAcknowledgementBatches for one partition."""
    prev_end = -1
    for first, last, types in batches:
        if first > last or first < prev_end or not types:
            return False
        if len(types) > 1 and last - first != len(types) - 1:
            return False
        if any(t < 0 or t > max_type for t in types) or (4 in types and not renew):
            return False
        prev_end = last
    return True


async def _apply_acks(
    ctx: RequestContext, mgr: Any, group_id: str, member_id: str, topics: Any, renew: bool
) -> dict[TP, ErrorCode]:
    """Validate and apply the acknowledgements of a request; (topic id, partition) -> error."""
    image = ctx.image
    out: dict[TP, ErrorCode] = {}
    wanted: dict[TP, AckBatches] = {}
    names: dict[TP, str] = {}
    for t in topics:
        tid = uuids.to_str(t.topic_id)
        topic = image.topics_by_id.get(tid)
        for p in t.partitions:
            batches = [
                (b.first_offset, b.last_offset, [int(x) for x in b.acknowledge_types])
                for b in p.acknowledgement_batches
            ]
            key = (tid, p.partition_index)
            if topic is None:
                out[key] = ErrorCode.unknown_topic_id
            elif not _valid_acks(batches, renew, 4 if ctx.api_version >= 2 else 3):
                out[key] = ErrorCode.invalid_request
            elif batches:
                wanted[key] = batches
                names[key] = topic.name
            else:
                out[key] = ErrorCode.none
    allowed = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, names.values())
    for key in [k for k in wanted if names[k] not in allowed]:
        out[key] = ErrorCode.topic_authorization_failed
        del wanted[key]
    for key in [k for k in wanted if p_missing(image, names[k], k[1])]:
        out[key] = ErrorCode.unknown_topic_or_partition
        del wanted[key]
    if wanted:
        out.update(await mgr.acknowledge(group_id, member_id, wanted))
    return out


def p_missing(image: Any, topic: str, partition: int) -> bool:
    t = image.topics_by_name.get(topic)
    return t is None or partition not in t.partitions


def _error_response(ctx: RequestContext, exc: KafkaError, *, fetch: bool) -> dict[str, Any]:
    out = {
        "throttle_time": 0,
        "error_code": exc.code,
        "error_message": exc.message,
        "responses": [],
        "node_endpoints": [],
        "acquisition_lock_timeout": 0,
    }
    return out


@api(SHARE_FETCH)
async def handle_share_fetch(ctx: RequestContext, req: Any) -> dict[str, Any]:
    try:
        _check_request(ctx, req.group_id, req.member_id)
        renew = bool(getattr(req, "is_renew_ack", False)) and ctx.api_version >= 2
        if renew and (req.max_bytes or req.min_bytes or req.max_records or _ms(req.max_wait)):
            raise KafkaError(
                ErrorCode.invalid_request,
                "maxBytes, minBytes, maxRecords and maxWaitMs must be set to 0 if isRenewAck is true.",
            )
        mgr = _manager(ctx)
        group_id, member_id, epoch = req.group_id, req.member_id, req.share_session_epoch
        image = ctx.image
        requested: dict[TP, str | None] = {}
        for t in req.topics:
            tid = uuids.to_str(t.topic_id)
            topic = image.topics_by_id.get(tid)
            for p in t.partitions:
                requested[(tid, p.partition_index)] = topic.name if topic is not None else None
        has_acks = any(p.acknowledgement_batches for t in req.topics for p in t.partitions)
        if epoch == INITIAL_EPOCH:
            if has_acks:
                raise KafkaError(ErrorCode.invalid_request, "Acknowledge data present in the initial fetch request.")
            session = mgr.sessions.open(group_id, member_id, ctx.connection, {})
            session.partitions.update({k: v for k, v in requested.items() if v is not None})
        else:
            session = mgr.sessions.existing(group_id, member_id, epoch)
            if epoch != FINAL_EPOCH:
                for t in getattr(req, "forgotten_topics_data", ()) or ():
                    for p in t.partitions:
                        session.partitions.pop((uuids.to_str(t.topic_id), p), None)
                session.partitions.update({k: v for k, v in requested.items() if v is not None})
    except KafkaError as exc:
        return _error_response(ctx, exc, fetch=True)

    ack_results = await _apply_acks(ctx, mgr, group_id, member_id, req.topics, renew) if has_acks else {}
    partitions: dict[TP, dict[str, Any]] = {}
    unknown = [k for k, v in requested.items() if v is None]
    for key in unknown:
        partitions[key] = _partition(key[1], ErrorCode.unknown_topic_id)
    if epoch != FINAL_EPOCH and not renew:
        fetchable = (
            dict(session.partitions)
            if epoch != INITIAL_EPOCH
            else {k: v for k, v in requested.items() if v is not None}
        )
        allowed = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, fetchable.values())
        to_fetch = []
        for (tid, p), name in fetchable.items():
            if name not in allowed:
                partitions[(tid, p)] = _partition(p, ErrorCode.topic_authorization_failed)
            elif p_missing(image, name, p):
                partitions[(tid, p)] = _partition(p, ErrorCode.unknown_topic_or_partition)
            else:
                to_fetch.append((name, tid, p))
        max_bytes = min(int(req.max_bytes), int(ctx.services.config["fetch.max.bytes"]))
        results = await mgr.fetch(
            group_id,
            member_id,
            to_fetch,
            max_wait_ms=_ms(req.max_wait),
            min_bytes=int(req.min_bytes),
            max_bytes=max_bytes,
            max_records=int(req.max_records),
            record_limit=int(getattr(req, "share_acquire_mode", 0)) == 1,
            rotation=session.epoch,
        )
        for (tid, p), res in results.items():
            if res.error == ErrorCode.none and not res.acquired:
                continue  # as Kafka: a partition is answered when it has records or an error
            partitions[(tid, p)] = _partition(p, res.error, res.message, res.records, res.acquired)
    for key, code in ack_results.items():
        row = partitions.setdefault(key, _partition(key[1], ErrorCode.none))
        row["acknowledge_error_code"] = code
    if epoch == FINAL_EPOCH:
        mgr.close_session_later(group_id, member_id)
    return _response(ctx, partitions, group_id, fetch=True)


def _ms(v: Any) -> int:
    return int(v.total_seconds() * 1000) if hasattr(v, "total_seconds") else int(v)


def _partition(
    p: int,
    error: ErrorCode,
    message: str | None = None,
    records: bytes = b"",
    acquired: list[tuple[int, int, int]] | None = None,
) -> dict[str, Any]:
    return {
        "partition_index": p,
        "error_code": error,
        "error_message": message if error != ErrorCode.none else None,
        "acknowledge_error_code": ErrorCode.none,
        "acknowledge_error_message": None,
        "current_leader": {"leader_id": -1, "leader_epoch": -1},
        "records": records,
        "acquired_records": [
            {"first_offset": a, "last_offset": b, "delivery_count": c} for a, b, c in (acquired or [])
        ],
    }


def _response(
    ctx: RequestContext, partitions: dict[TP, dict[str, Any]], group_id: str, *, fetch: bool
) -> dict[str, Any]:
    hints = LeaderHints(ctx)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (tid, p), row in partitions.items():
        codes = (row["error_code"], row.get("acknowledge_error_code"))
        topic = ctx.image.topics_by_id.get(tid)
        if topic is not None and any(c in NOT_HERE for c in codes) and (leader := hints.lookup(topic.name, p)):
            row["current_leader"] = leader.as_dict()
        if not fetch:
            row = {
                "partition_index": p,
                "error_code": row.get("acknowledge_error_code", ErrorCode.none),
                "error_message": None,
                "current_leader": row["current_leader"],
            }
        by_topic.setdefault(tid, []).append(row)
    mgr = getattr(ctx.services, "share_partitions", None)
    lock_ms = int(mgr.settings(group_id)("share.record.lock.duration.ms")) if mgr is not None else 0
    return {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "acquisition_lock_timeout": lock_ms,
        "responses": [{"topic_id": uuids.from_str(tid), "partitions": rows} for tid, rows in by_topic.items()],
        "node_endpoints": [n.as_dict() for n in hints.endpoints()],
    }


@api(SHARE_ACKNOWLEDGE)
async def handle_share_acknowledge(ctx: RequestContext, req: Any) -> dict[str, Any]:
    try:
        _check_request(ctx, req.group_id, req.member_id)
        mgr = _manager(ctx)
        epoch = req.share_session_epoch
        if epoch == INITIAL_EPOCH:
            raise KafkaError(ErrorCode.invalid_share_session_epoch, "The share session epoch is invalid.")
        mgr.sessions.existing(req.group_id, req.member_id, epoch)
    except KafkaError as exc:
        return _error_response(ctx, exc, fetch=False)
    renew = bool(getattr(req, "is_renew_ack", False)) and ctx.api_version >= 2
    results = await _apply_acks(ctx, mgr, req.group_id, req.member_id, req.topics, renew)
    partitions = {
        k: {**_partition(k[1], ErrorCode.none), "acknowledge_error_code": code} for k, code in results.items()
    }
    if epoch == FINAL_EPOCH:
        mgr.close_session_later(req.group_id, req.member_id)
    return _response(ctx, partitions, req.group_id, fetch=False)
