"""Fetch: long-poll reads with fetch sessions, answered with a zero-copy response.

Records go out as file regions (sendfile); only the partition headers are encoded in Python.
A fetch carrying a replica id (v15+: replica_state) is a follower's: it reads up to the LEO,
records the follower's position on the leader (HW, ISR) and may answer a diverging epoch
instead of records; it is exempt from client quotas (replication has its own throttles).
"""

from __future__ import annotations

from typing import Any

from kopfka import uuids
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.protocol.fetch_response import FetchPartitionOut, FetchTopicOut, encode_fetch_response
from kopfka.quota.throttling import fetch_max_bytes, fetch_throttle_ms
from kopfka.server.apis.registry import RawResponse, api
from kopfka.server.auth_helper import AclOperation, ResourceType, authorize_cluster, authorized_names
from kopfka.server.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, CachedPartition
from kopfka.server.leader_discovery import FETCH_VERSION, NOT_HERE, LeaderHints
from kopfka.server.replica_manager import FetchPartitionData, FetchRequestPartition
from kopfka.server.replication_trace import TRACE
from kopfka.server.request_context import RequestContext


def _ms(v: Any) -> int:
    return int(v.total_seconds() * 1000) if hasattr(v, "total_seconds") else int(v)


def _requested(ctx: RequestContext, req: Any) -> tuple[list[CachedPartition], list[tuple[str | None, str | None, int]]]:
    """Resolve the request's partitions; unknown topic ids are returned separately with their id."""
    image = ctx.image
    out: list[CachedPartition] = []
    unknown: list[tuple[str | None, str | None, int]] = []
    for t in req.topics:
        name = getattr(t, "topic", None)
        tid = getattr(t, "topic_id", None)
        topic_id_str = None
        if tid is not None and ctx.api_version >= 13:
            topic_id_str = uuids.to_str(tid)
            topic = image.topics_by_id.get(topic_id_str)
            if topic is None:
                unknown.extend((None, topic_id_str, p.partition) for p in t.partitions)
                continue
            name = topic.name
        elif name in image.topics_by_name:
            topic_id_str = image.topics_by_name[name].topic_id
        for p in t.partitions:
            out.append(
                CachedPartition(
                    name or "",
                    p.partition,
                    topic_id_str,
                    p.fetch_offset,
                    p.partition_max_bytes,
                    getattr(p, "current_leader_epoch", -1),
                )
            )
    return out, unknown


def _forgotten(ctx: RequestContext, req: Any) -> list[tuple[str, int]]:
    out: list[tuple[str, int]] = []
    for t in getattr(req, "forgotten_topics_data", ()) or ():
        name = getattr(t, "topic", None)
        tid = getattr(t, "topic_id", None)
        if tid is not None and ctx.api_version >= 13:
            topic = ctx.image.topics_by_id.get(uuids.to_str(tid))
            if topic is None:
                continue
            name = topic.name
        if name is not None:
            out.extend((name, p) for p in t.partitions)
    return out


def error_partition(partition: int, error: ErrorCode) -> FetchPartitionOut:
    """A partition answered with an error, as Kafka writes it: no offsets (-1), empty records, and
    an empty aborted-transaction list when the partition was refused before any read (unknown
    topic, topic id or partition), none when the read itself failed (e.g. offset out of range)."""
    refused = error in (ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id)
    return FetchPartitionOut(partition, int(error), aborted_transactions=[] if refused else None, records=b"")


def _replica(req: Any) -> tuple[int, int]:
    rs = getattr(req, "replica_state", None)
    if rs is not None and int(rs.replica_id) >= 0:
        return int(rs.replica_id), int(rs.replica_epoch)
    rid = getattr(req, "replica_id", None)
    return (int(rid), -1) if rid is not None and int(rid) >= 0 else (-1, -1)


async def _handle_follower_fetch(ctx: RequestContext, req: Any, replica_id: int, replica_epoch: int) -> RawResponse:
    svc = ctx.services
    version = ctx.api_version
    requested, unknown = _requested(ctx, req)
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):  # only brokers may fetch as a replica
        return _all_refused(ctx, requested, unknown)
    last_epochs: dict[tuple[str | None, int], int] = {}
    for t in req.topics:
        key_name = getattr(t, "topic", None)
        tid = getattr(t, "topic_id", None)
        if tid is not None and version >= 13:
            topic = ctx.image.topics_by_id.get(uuids.to_str(tid))
            key_name = topic.name if topic is not None else None
        for p in t.partitions:
            last_epochs[(key_name, p.partition)] = int(getattr(p, "last_fetched_epoch", -1))
    reads = [
        FetchRequestPartition(
            (p.topic, p.partition),
            p.fetch_offset,
            p.max_bytes,
            p.current_leader_epoch,
            last_epochs.get((p.topic, p.partition), -1),
        )
        for p in requested
    ]
    results = await svc.replica_manager.fetch_for_follower(
        replica_id,
        replica_epoch,
        reads,
        max_bytes=min(getattr(req, "max_bytes", 2**31 - 1), 2**31 - 1),
        min_bytes=req.min_bytes,
        max_wait_ms=_ms(req.max_wait),
    )
    if TRACE.enabled:
        _trace_follower(svc.replica_manager, reads, results, replica_id)
    hints = LeaderHints(ctx, FETCH_VERSION)
    topics: list[FetchTopicOut] = []
    by_topic: dict[tuple[str, str | None], FetchTopicOut] = {}
    for p in requested:
        data = results[(p.topic, p.partition)]
        tkey = (p.topic, p.topic_id)
        tout = by_topic.get(tkey)
        if tout is None:
            tout = by_topic[tkey] = FetchTopicOut(p.topic, uuids.from_str(p.topic_id) if p.topic_id else None)
            topics.append(tout)
        out = FetchPartitionOut(
            p.partition,
            int(data.error),
            data.high_watermark,
            data.last_stable_offset,
            data.log_start_offset,
            None,
            -1,
            data.records if data.records is not None else b"",
        )
        if data.diverging_epoch is not None and version >= 12:
            out.diverging_epoch = data.diverging_epoch
        _hint_leader(hints, out, p.topic, data.error)
        tout.partitions.append(out)
    for _name, tid, partition in unknown:
        tout = FetchTopicOut("", uuids.from_str(tid) if tid else None)
        tout.partitions.append(error_partition(partition, ErrorCode.unknown_topic_id))
        topics.append(tout)
    chunks, size = encode_fetch_response(
        version, ctx.correlation_id, topics, session_id=0, node_endpoints=_endpoints(hints)
    )
    return RawResponse(chunks, size)


@api(1)
async def handle_fetch(ctx: RequestContext, req: Any) -> RawResponse:
    svc = ctx.services
    version = ctx.api_version
    replica_id, replica_epoch = _replica(req)
    if replica_id >= 0:
        return await _handle_follower_fetch(ctx, req, replica_id, replica_epoch)
    sid = getattr(req, "session_id", 0)
    epoch = getattr(req, "session_epoch", FINAL_EPOCH)
    requested, unknown = _requested(ctx, req)
    cache = svc.fetch_sessions
    session = None
    incremental = False
    resp_session_id = 0
    try:
        if sid == 0 and epoch == FINAL_EPOCH:
            parts = requested
        elif sid == 0 and epoch == INITIAL_EPOCH:
            session = cache.new_session()
            parts = requested
            if session is not None:
                session.partitions = {(p.topic, p.partition): p for p in requested}
                resp_session_id = session.session_id
        elif sid != 0 and epoch == FINAL_EPOCH:
            cache.remove(sid)
            parts = requested
        elif sid != 0 and epoch > 0:
            session = cache.get(sid, epoch)
            for p in requested:
                session.partitions[(p.topic, p.partition)] = (
                    p
                    if (p.topic, p.partition) not in session.partitions
                    else _update(session.partitions[(p.topic, p.partition)], p)
                )
            for key in _forgotten(ctx, req):
                session.partitions.pop(key, None)
            parts = list(session.partitions.values())
            incremental = True
            resp_session_id = sid
        else:
            raise KafkaError(ErrorCode.invalid_fetch_session_epoch, "session id 0 needs epoch 0 or -1")
    except KafkaError as exc:
        chunks, size = encode_fetch_response(version, ctx.correlation_id, [], error_code=exc.code, session_id=0)
        return RawResponse(chunks, size)

    allowed = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, (p.topic for p in parts))
    reads = [
        FetchRequestPartition((p.topic, p.partition), p.fetch_offset, p.max_bytes, p.current_leader_epoch)
        for p in parts
        if p.topic in allowed
    ]
    isolation = "txn_committed" if getattr(req, "isolation_level", 0) == 1 else "high_watermark"
    max_bytes = fetch_max_bytes(ctx, min(getattr(req, "max_bytes", 2**31 - 1), int(svc.config["fetch.max.bytes"])))
    results = (
        await svc.replica_manager.fetch_messages(
            reads, max_bytes=max_bytes, min_bytes=req.min_bytes, max_wait_ms=_ms(req.max_wait), isolation=isolation
        )
        if reads
        else {}
    )
    for p in parts:  # as Kafka: a partition of a topic the principal may not READ answers this
        if p.topic not in allowed:
            results[(p.topic, p.partition)] = REFUSED
    if fetch_throttle_ms(ctx, results) > 0:  # throttled: no data (the charge was taken back)
        if session is not None:
            session.epoch = (epoch + 1) if incremental else 1
        chunks, size = encode_fetch_response(
            version, ctx.correlation_id, [], session_id=resp_session_id, throttle_time_ms=ctx.throttle_ms
        )
        return RawResponse(chunks, size)

    requested_keys = {(p.topic, p.partition) for p in requested}
    hints = LeaderHints(ctx, FETCH_VERSION)
    topics: list[FetchTopicOut] = []
    by_topic: dict[tuple[str, str | None], FetchTopicOut] = {}
    for p in parts:
        key = (p.topic, p.partition)
        data = results[key]
        if incremental:
            changed = (
                key in requested_keys
                or data.size > 0
                or data.error != ErrorCode.none
                or data.high_watermark != p.high_watermark
                or data.last_stable_offset != p.last_stable_offset
                or data.log_start_offset != p.log_start_offset
            )
            if not changed:
                continue
        if session is not None:
            p.high_watermark, p.last_stable_offset, p.log_start_offset = (
                data.high_watermark,
                data.last_stable_offset,
                data.log_start_offset,
            )
        tkey = (p.topic, p.topic_id)
        tout = by_topic.get(tkey)
        if tout is None:
            tout = FetchTopicOut(p.topic, uuids.from_str(p.topic_id) if p.topic_id else None)
            by_topic[tkey] = tout
            topics.append(tout)
        if TRACE.enabled and data.size > 0:
            TRACE.mark("consumer_out", p.topic, p.partition, p.fetch_offset, data.high_watermark)
        if data.error == ErrorCode.none:
            out = FetchPartitionOut(
                p.partition,
                0,
                data.high_watermark,
                data.last_stable_offset,
                data.log_start_offset,
                data.aborted_transactions,
                -1,
                data.records if data.records is not None else b"",
            )
        else:
            out = error_partition(p.partition, data.error)
        _hint_leader(hints, out, p.topic, data.error)
        tout.partitions.append(out)
    for _name, tid, partition in unknown:
        tout = FetchTopicOut("", uuids.from_str(tid) if tid else None)
        tout.partitions.append(error_partition(partition, ErrorCode.unknown_topic_id))
        topics.append(tout)
    if session is not None:
        session.epoch = (epoch + 1) if incremental else 1
    chunks, size = encode_fetch_response(
        version,
        ctx.correlation_id,
        topics,
        session_id=resp_session_id,
        throttle_time_ms=ctx.throttle_ms,
        node_endpoints=_endpoints(hints),
    )
    return RawResponse(chunks, size)


def _trace_follower(rm: Any, reads: list[FetchRequestPartition], results: dict[Any, Any], replica_id: int) -> None:
    """The records answered: from the fetch offset up to the LEO at the read (same loop step)."""
    for r in reads:
        data = results.get(r.tp)
        part = rm.partitions.get(r.tp)
        if data is not None and data.size > 0 and part is not None:
            TRACE.mark("fetch_out", r.tp[0], r.tp[1], r.fetch_offset, part.log.log_end_offset, replica_id)


REFUSED = FetchPartitionData(ErrorCode.topic_authorization_failed)


def _hint_leader(hints: LeaderHints, out: FetchPartitionOut, topic: str, error: ErrorCode) -> None:
    """KIP-951: a partition that is not led here names its current leader."""
    if error in NOT_HERE and (leader := hints.lookup(topic, out.partition_index)) is not None:
        out.current_leader = (leader.leader_id, leader.leader_epoch) if leader.known else None


def _endpoints(hints: LeaderHints) -> list[tuple[int, str, int, str | None]]:
    return [(n.node_id, n.host, n.port, n.rack) for n in hints.endpoints()]


def _all_refused(ctx: RequestContext, requested: list[CachedPartition], unknown: list[Any]) -> RawResponse:
    topics: list[FetchTopicOut] = []
    for p in requested:
        tout = FetchTopicOut(p.topic, uuids.from_str(p.topic_id) if p.topic_id else None)
        tout.partitions.append(FetchPartitionOut(p.partition, int(ErrorCode.topic_authorization_failed)))
        topics.append(tout)
    for _name, tid, partition in unknown:
        tout = FetchTopicOut("", uuids.from_str(tid) if tid else None)
        tout.partitions.append(FetchPartitionOut(partition, int(ErrorCode.topic_authorization_failed)))
        topics.append(tout)
    chunks, size = encode_fetch_response(ctx.api_version, ctx.correlation_id, topics, session_id=0)
    return RawResponse(chunks, size)


def _update(cached: CachedPartition, new: CachedPartition) -> CachedPartition:
    cached.fetch_offset = new.fetch_offset
    cached.max_bytes = new.max_bytes
    cached.current_leader_epoch = new.current_leader_epoch
    if new.topic_id:
        cached.topic_id = new.topic_id
    return cached
