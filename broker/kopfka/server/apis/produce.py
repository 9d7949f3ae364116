"""Produce: validate acks, resolve topics (names, or ids from v13), append through ReplicaManager.

acks=0 produces no response; if such a request fails, the connection is closed so the client
refreshes its metadata — Kafka's behaviour, since there is no response to carry the error.
"""

from __future__ import annotations

import time
from typing import Any

from kopfka import uuids
from kopfka.protocol.errors import ErrorCode
from kopfka.protocol.records import first_batch_is_transactional, read_header
from kopfka.quota.throttling import produce_throttle_ms
from kopfka.server.apis.registry import DeferredResponse, api
from kopfka.server.auth_helper import AclOperation, ResourceType, authorize, authorized_names
from kopfka.server.delayed_produce import complete_waits, register_waits
from kopfka.server.leader_discovery import PRODUCE_VERSION, LeaderHints
from kopfka.server.replication_trace import TRACE
from kopfka.server.request_context import RequestContext


class CloseConnection(Exception):
    """Close the connection without answering (e.g. a failed acks=0 produce)."""


def _partition_error(index: int, code: ErrorCode, message: str | None = None) -> dict[str, Any]:
    return {
        "index": index,
        "error_code": code,
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": message,
    }


def _refuse_all(req: Any, code: ErrorCode) -> list[dict[str, Any]]:
    return [
        {
            "name": getattr(t, "name", None) or "",
            "topic_id": getattr(t, "topic_id", None) or uuids.ZERO_UUID,
            "partition_responses": [_partition_error(p.index, code) for p in t.partition_data],
        }
        for t in req.topic_data
    ]


@api(0)
async def handle_produce(ctx: RequestContext, req: Any) -> dict[str, Any] | DeferredResponse | None:
    started = time.perf_counter() if TRACE.enabled else 0.0
    svc = ctx.services
    image = ctx.image
    acks = req.acks
    responses: list[dict[str, Any]] = []
    entries: list[tuple[tuple[str, int], bytes | None]] = []
    slots: list[tuple[dict[str, Any], int, tuple[str, int]]] = []
    transactional = any(first_batch_is_transactional(p.records) for t in req.topic_data for p in t.partition_data)
    if transactional and (
        req.transactional_id is None
        or not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)
    ):
        # as Kafka: transactional records need a transactional id (authorized for WRITE), else the
        # whole request fails; accepted, they would open a transaction nothing can end
        if acks == 0:
            raise CloseConnection("transactional records without a transactional id")
        return {"responses": _refuse_all(req, ErrorCode.transactional_id_authorization_failed), "throttle_time": 0}
    allowed = authorized_names(
        ctx, AclOperation.WRITE, ResourceType.TOPIC, (_topic_name(t, image) or "" for t in req.topic_data)
    )
    refused = False  # an acks=0 request with a refused partition closes the connection, as any failure
    for t in req.topic_data:
        name = getattr(t, "name", None)
        tid = getattr(t, "topic_id", None)
        topic_id_str = None
        if name is None and tid is not None:
            topic = image.topics_by_id.get(uuids.to_str(tid))
            name = topic.name if topic else None
            topic_id_str = topic.topic_id if topic else None
        elif name is not None and name in image.topics_by_name:
            topic_id_str = image.topics_by_name[name].topic_id
        if tid is None:
            tid = uuids.from_str(topic_id_str) if topic_id_str else uuids.ZERO_UUID
        tout: dict[str, Any] = {"name": name or "", "topic_id": tid, "partition_responses": []}
        responses.append(tout)
        for p in t.partition_data:
            if acks not in (-1, 0, 1):
                tout["partition_responses"].append(_partition_error(p.index, ErrorCode.invalid_required_acks))
            elif name is None:
                tout["partition_responses"].append(_partition_error(p.index, ErrorCode.unknown_topic_id))
            elif name not in allowed:
                refused = True
                tout["partition_responses"].append(_partition_error(p.index, ErrorCode.topic_authorization_failed))
            else:
                slot = {"index": p.index}
                tout["partition_responses"].append(slot)
                entries.append(((name, p.index), p.records))
                slots.append((slot, p.index, (name, p.index)))
    guards = None
    if req.transactional_id is not None and entries and svc.config["transaction.partition.verification.enable"]:
        guards = await _verify_transaction(ctx, req.transactional_id, entries, slots)
    results = svc.replica_manager.append_records(entries, acks, verification_guards=guards) if entries else {}
    if TRACE.enabled:
        _trace(results, "append", started)

    def respond() -> dict[str, Any] | None:
        produce_throttle_ms(ctx, entries, results)
        failed = False
        hints = LeaderHints(ctx, PRODUCE_VERSION)
        for slot, index, tp in slots:
            r = results[tp]
            failed |= r.error != ErrorCode.none
            slot.update(
                {
                    "index": index,
                    "error_code": r.error,
                    "base_offset": r.base_offset,
                    "log_append_time": r.log_append_time_ms,
                    "log_start_offset": r.log_start_offset,
                    "record_errors": [],
                    "error_message": r.message,
                }
            )
            if r.error == ErrorCode.not_leader_or_follower and (leader := hints.lookup(*tp)) is not None:
                slot["current_leader"] = leader.as_dict()  # KIP-951
        if TRACE.enabled and acks == -1:
            _trace(results, "produce_done")
        if acks == 0:
            if failed or refused:
                raise CloseConnection("acks=0 produce failed")
            return None
        return {
            "responses": responses,
            "throttle_time": ctx.throttle_ms,
            "node_endpoints": [n.as_dict() for n in hints.endpoints()],
        }

    waits = register_waits(svc.replica_manager, results) if acks == -1 and results else []
    if not waits:  # acks 0/1, or an ISR of one: answered now, the purgatory is never entered
        return respond()
    timeout = int(req.timeout.total_seconds() * 1000) if hasattr(req.timeout, "total_seconds") else int(req.timeout)
    if _may_pipeline(ctx):
        # the appends are done, in request order: let the connection handle the next produce
        # while this one waits for the ISR, so pipelined requests share follower fetch rounds
        # instead of each paying a whole replication round trip after the previous one
        async def finish() -> dict[str, Any] | None:
            await complete_waits(waits, results, timeout)
            return respond()

        return DeferredResponse(finish())
    await complete_waits(waits, results, timeout)
    return respond()


Slot = tuple[dict[str, Any], int, tuple[str, int]]


async def _verify_transaction(
    ctx: RequestContext, transactional_id: str, entries: list[tuple[tuple[str, int], Any]], slots: list[Slot]
) -> dict[tuple[str, int], object]:
    """KIP-890: verify (or, for transaction version 2, add) the partitions where this producer's
    transaction is not open yet; drops failed partitions from `entries` with their error."""
    svc = ctx.services
    rm = svc.replica_manager
    guards: dict[tuple[str, int], object] = {}
    producers: set[tuple[int, int]] = set()
    for tp, records in entries:
        if not first_batch_is_transactional(records):
            continue
        h = read_header(records, 0)
        producers.add((h.producer_id, h.producer_epoch))
        part = rm.partitions.get(tp)
        if part is None or not part.is_leader:
            continue  # the append answers NOT_LEADER_OR_FOLLOWER
        guard = part.log.producer_state.start_verification(h.producer_id, h.producer_epoch)
        if guard is not None:
            guards[tp] = guard
    failed: dict[tuple[str, int], ErrorCode] = {}
    if len(producers) > 1:
        failed = {tp: ErrorCode.invalid_producer_id_mapping for tp, _ in entries}
    elif guards:
        ((pid, epoch),) = producers
        add = ctx.api_version >= 12 and int(ctx.image.features.get("transaction.version", 0)) >= 2
        errors = await svc.txn_verifier.verify(
            transactional_id, pid, epoch, list(guards), add=add, abortable_supported=ctx.api_version >= 11
        )
        failed = {tp: code for tp, code in errors.items() if code != ErrorCode.none}
    if failed:
        entries[:] = [e for e in entries if e[0] not in failed]
        for slot, index, tp in slots:
            if tp in failed:
                why = (
                    "the partition is not part of the transaction"
                    if failed[tp] == ErrorCode.invalid_txn_state
                    else None
                )
                slot.update(_partition_error(index, failed[tp], why))
        slots[:] = [s for s in slots if s[2] not in failed]
    return guards


def _trace(results: dict[tuple[str, int], Any], stage: str, extra: float = -1.0) -> None:
    for (topic, partition), r in results.items():
        if r.error == ErrorCode.none and r.last_offset >= r.base_offset >= 0:
            TRACE.mark(stage, topic, partition, r.base_offset, r.last_offset + 1, extra)


def _topic_name(t: Any, image: Any) -> str | None:
    name = getattr(t, "name", None)
    tid = getattr(t, "topic_id", None)
    if name is None and tid is not None:
        topic = image.topics_by_id.get(uuids.to_str(tid))
        return topic.name if topic else None
    return name


def _may_pipeline(ctx: RequestContext) -> bool:
    """Not with produce or request quotas: their throttle mutes the connection for the next request."""
    qm = ctx.services.quota_manager
    return qm is None or not (qm.produce.quota_types_enabled or qm.request.quota_types_enabled)
