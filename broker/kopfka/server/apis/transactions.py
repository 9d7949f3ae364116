"""Transaction APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
WriteTxnMarkers, TxnOffsetCommit, DescribeTransactions, ListTransactions (DescribeProducers is in
describe_producers).

The logic lives in kopfka.coordinator.transaction (coordinator side), kopfka.server.txn_markers
(partition leader side) and the group coordinator (transactional offsets); these handlers
translate between kio entities and it, and check Kafka's ACLs: WRITE on the transactional id for
the producer's requests, READ on the group for its offsets, WRITE/READ on the topics, ClusterAction
for the broker-to-broker ones (AddPartitionsToTxn v4+, WriteTxnMarkers), DESCRIBE to look.
"""

from __future__ import annotations

import datetime
import re
from typing import Any

from kopfka.coordinator.keys import OFFSETS_TOPIC, partition_for
from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import (
    AclOperation,
    ResourceType,
    authorize,
    authorize_by_resource_type,
    authorize_cluster,
    authorized_names,
)
from kopfka.server.request_context import RequestContext
from kopfka.server.txn_markers import TxnMarker, write_txn_markers

EXTRA_APIS.update(
    {
        24: (0, 5),  # AddPartitionsToTxn (v4+: broker-to-broker, KIP-890)
        25: (0, 4),  # AddOffsetsToTxn
        26: (0, 5),  # EndTxn (v5: transaction version 2, epoch bump per transaction)
        27: (1, 2),  # WriteTxnMarkers
        28: (0, 5),  # TxnOffsetCommit
        65: (0, 0),  # DescribeTransactions
        66: (0, 2),  # ListTransactions
    }
)


def _ms(v: Any) -> int:
    return round(v.total_seconds() * 1000) if isinstance(v, datetime.timedelta) else int(v)


def _instant(ms: int) -> datetime.datetime:
    """A non-nullable timestamp field, -1 (none) included."""
    return datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(milliseconds=ms)


def _txn_id_access(ctx: RequestContext, op: AclOperation, transactional_id: str) -> None:
    if not authorize(ctx, op, ResourceType.TRANSACTIONAL_ID, transactional_id):
        raise KafkaError(ErrorCode.transactional_id_authorization_failed)


def _txn(ctx: RequestContext) -> Any:
    coord = ctx.services.txn_coordinator
    if coord is None:
        raise KafkaError(ErrorCode.coordinator_not_available, "the transaction coordinator is not running")
    return coord


@api(22)
async def handle_init_producer_id(ctx: RequestContext, req: Any) -> dict[str, Any]:
    base = {
        "throttle_time": 0,
        "producer_id": -1,
        "producer_epoch": -1,
        "ongoing_txn_producer_id": -1,
        "ongoing_txn_producer_epoch": -1,
    }
    expected = None
    pid = int(getattr(req, "producer_id", -1))
    if pid >= 0:
        expected = (pid, int(getattr(req, "producer_epoch", -1)))
    try:
        if getattr(req, "enable2_pc", False) or getattr(req, "keep_prepared_txn", False):
            raise KafkaError(
                ErrorCode.transactional_id_authorization_failed,
                "two-phase commit (KIP-939) is not enabled (transaction.two.phase.commit.enable)",
            )
        if req.transactional_id is not None:
            _txn_id_access(ctx, AclOperation.WRITE, req.transactional_id)
        elif not authorize_cluster(ctx, AclOperation.IDEMPOTENT_WRITE, log_denied=False) and not (
            authorize_by_resource_type(ctx, AclOperation.WRITE, ResourceType.TOPIC)
        ):  # an idempotent producer: IdempotentWrite, or WRITE on some topic (KIP-679)
            raise KafkaError(ErrorCode.cluster_authorization_failed)
        if req.transactional_id is None:
            new_pid, epoch = await ctx.services.producer_ids.generate(), 0
        else:
            new_pid, epoch = await _txn(ctx).init_producer_id(
                req.transactional_id, _ms(req.transaction_timeout), expected
            )
    except KafkaError as exc:
        return {**base, "error_code": _fenced_code(ctx, exc.code, 4)}
    return {**base, "error_code": ErrorCode.none, "producer_id": new_pid, "producer_epoch": epoch}


def _existing(ctx: RequestContext, topics: list[tuple[str, list[int]]]) -> dict[tuple[str, int], bool]:
    image = ctx.image
    out = {}
    for name, parts in topics:
        t = image.topics_by_name.get(name)
        for p in parts:
            out[(name, p)] = t is not None and p in t.partitions
    return out


def _topic_results(errors: dict[tuple[str, int], ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (t, p), code in errors.items():
        by_topic.setdefault(t, []).append({"partition_index": p, "partition_error_code": code})
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


async def _add_one(
    ctx: RequestContext,
    tid: str,
    pid: int,
    epoch: int,
    topics: list[tuple[str, list[int]]],
    *,
    verify_only: bool,
    from_broker: bool,
) -> dict[tuple[str, int], ErrorCode]:
    exists = _existing(ctx, topics)
    if not from_broker:  # a producer's request (v3 and below): its transactional id and topics
        if not authorize(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
            return dict.fromkeys(exists, ErrorCode.transactional_id_authorization_failed)
        may_write = authorized_names(ctx, AclOperation.WRITE, ResourceType.TOPIC, (t for t, _ in topics))
        refused = {tp: ErrorCode.topic_authorization_failed for tp in exists if tp[0] not in may_write}
        unknown = {tp: ErrorCode.unknown_topic_or_partition for tp, ok in exists.items() if not ok}
        if refused or unknown:
            return {tp: refused.get(tp) or unknown.get(tp) or ErrorCode.operation_not_attempted for tp in exists}
    try:
        coord = _txn(ctx)
        if verify_only:
            return dict(coord.verify_partitions(tid, pid, epoch, list(exists)))
        await coord.add_partitions(tid, pid, epoch, list(exists), client_tv=2 if from_broker else 0)
        return dict.fromkeys(exists, ErrorCode.none)
    except KafkaError as exc:
        return dict.fromkeys(exists, exc.code)


@api(24)
async def handle_add_partitions_to_txn(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if ctx.api_version <= 3:
        topics = [(t.name, list(t.partitions)) for t in req.v3_and_below_topics]
        errors = await _add_one(
            ctx,
            req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            topics,
            verify_only=False,
            from_broker=False,
        )
        if ctx.api_version < 2:  # PRODUCER_FENCED arrived with v2; older clients know INVALID_PRODUCER_EPOCH
            errors = {
                tp: ErrorCode.invalid_producer_epoch if c == ErrorCode.producer_fenced else c
                for tp, c in errors.items()
            }
        return {"throttle_time": 0, "results_by_topic_v3_and_below": _topic_results(errors)}
    if not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION):  # v4+: only brokers verify transactions
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "results_by_transaction": []}
    results = []
    for txn in req.transactions:
        topics = [(t.name, list(t.partitions)) for t in txn.topics]
        errors = await _add_one(
            ctx,
            txn.transactional_id,
            txn.producer_id,
            txn.producer_epoch,
            topics,
            verify_only=bool(txn.verify_only),
            from_broker=True,
        )
        if ctx.api_version < 5:  # TRANSACTION_ABORTABLE arrived with v5
            errors = {
                tp: ErrorCode.invalid_txn_state if c == ErrorCode.transaction_abortable else c
                for tp, c in errors.items()
            }
        results.append({"transactional_id": txn.transactional_id, "topic_results": _topic_results(errors)})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "results_by_transaction": results}


def _fenced_code(ctx: RequestContext, code: ErrorCode, fenced_since: int) -> ErrorCode:
    """Before `fenced_since`, clients know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH."""
    return (
        ErrorCode.invalid_producer_epoch
        if code == ErrorCode.producer_fenced and ctx.api_version < fenced_since
        else code
    )


@api(25)
async def handle_add_offsets_to_txn(ctx: RequestContext, req: Any) -> dict[str, Any]:
    try:
        _txn_id_access(ctx, AclOperation.WRITE, req.transactional_id)
        if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
            raise KafkaError(ErrorCode.group_authorization_failed)
        gc = ctx.services.group_coordinator
        n = gc.num_partitions if gc is not None else int(ctx.services.config["offsets.topic.num.partitions"])
        tp = (OFFSETS_TOPIC, partition_for(req.group_id, n))
        await _txn(ctx).add_partitions(req.transactional_id, req.producer_id, req.producer_epoch, [tp])
        code = ErrorCode.none
    except KafkaError as exc:
        code = exc.code
    return {"throttle_time": 0, "error_code": _fenced_code(ctx, code, 2)}


@api(26)
async def handle_end_txn(ctx: RequestContext, req: Any) -> dict[str, Any]:
    try:
        _txn_id_access(ctx, AclOperation.WRITE, req.transactional_id)
        pid, epoch = await _txn(ctx).end_transaction(
            req.transactional_id,
            req.producer_id,
            req.producer_epoch,
            bool(req.committed),
            client_tv=2 if ctx.api_version >= 5 else 0,
        )
        return {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": pid, "producer_epoch": epoch}
    except KafkaError as exc:
        return {
            "throttle_time": 0,
            "error_code": _fenced_code(ctx, exc.code, 2),
            "producer_id": -1,
            "producer_epoch": -1,
        }


@api(27)
async def handle_write_txn_markers(ctx: RequestContext, req: Any) -> dict[str, Any]:
    markers = [
        TxnMarker(
            int(m.producer_id),
            int(m.producer_epoch),
            int(m.coordinator_epoch),
            bool(m.transaction_result),
            tuple((t.name, int(p)) for t in m.topics for p in t.partition_indexes),
            int(getattr(m, "transaction_version", 0)),
        )
        for m in req.markers
    ]
    if not authorize_cluster(ctx, AclOperation.ALTER, log_denied=False) and not authorize_cluster(
        ctx, AclOperation.CLUSTER_ACTION
    ):  # only transaction coordinators (brokers) write markers
        results = [dict.fromkeys(m.partitions, ErrorCode.cluster_authorization_failed) for m in markers]
    else:
        results = await write_txn_markers(ctx.services, markers)
    out = []
    for m, errors in zip(markers, results, strict=True):
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (t, p), code in errors.items():
            by_topic.setdefault(t, []).append({"partition_index": p, "error_code": code})
        out.append(
            {"producer_id": m.producer_id, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
        )
    return {"markers": out}


@api(28)
async def handle_txn_offset_commit(ctx: RequestContext, req: Any) -> dict[str, Any]:
    entries = [
        (
            t.name,
            p.partition_index,
            p.committed_offset,
            int(getattr(p, "committed_leader_epoch", -1)),
            p.committed_metadata,
        )
        for t in req.topics
        for p in t.partitions
    ]
    results: dict[tuple[str, int], ErrorCode] = {}
    may_read = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    try:
        _txn_id_access(ctx, AclOperation.WRITE, req.transactional_id)
        if not authorize(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
            raise KafkaError(ErrorCode.group_authorization_failed)
        results = {(t, p): ErrorCode.topic_authorization_failed for t, p, *_ in entries if t not in may_read}
        entries = [e for e in entries if e[0] in may_read]
        gc = ctx.services.group_coordinator
        if gc is None:
            raise KafkaError(ErrorCode.coordinator_not_available, "the group coordinator is not running")
        await _verify_offsets_partition(ctx, req, gc)
        results.update(
            await gc.commit_offsets(
                req.group_id,
                getattr(req, "member_id", ""),
                int(getattr(req, "generation_id", -1)),
                getattr(req, "group_instance_id", None),
                entries,
                api_version=ctx.api_version,
                producer=(int(req.producer_id), int(req.producer_epoch)),
            )
            if entries
            else {}
        )
        group_error = ErrorCode.none
    except KafkaError as exc:
        group_error = exc.code
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code = (
                group_error
                if group_error != ErrorCode.none
                else results.get((t.name, p.partition_index), ErrorCode.none)
            )
            parts.append({"partition_index": p.partition_index, "error_code": _fenced_code(ctx, code, 3)})
        topics.append({"name": t.name, "partitions": parts})
    return {"throttle_time": 0, "topics": topics}


async def _verify_offsets_partition(ctx: RequestContext, req: Any, gc: Any) -> None:
    """KIP-890: the group's offsets partition must be in the transaction (AddOffsetsToTxn) — or,
    for a transaction version 2 client (v5), is added to it here on the producer's behalf."""
    svc = ctx.services
    add = ctx.api_version >= 5 and int(ctx.image.features.get("transaction.version", 0)) >= 2
    if not add and not svc.config["transaction.partition.verification.enable"]:
        return
    tp = (OFFSETS_TOPIC, partition_for(req.group_id, gc.num_partitions))
    codes = await svc.txn_verifier.ask(
        req.transactional_id, int(req.producer_id), int(req.producer_epoch), [tp], add=add
    )
    code = codes.get(tp, ErrorCode.none)
    if code == ErrorCode.transaction_abortable and ctx.api_version < 5:
        code = ErrorCode.invalid_txn_state
    elif code == ErrorCode.network_exception:
        # the transaction coordinator could not be reached: Kafka's group coordinator answers
        # COORDINATOR_LOAD_IN_PROGRESS, which every client retries in place, where NETWORK_EXCEPTION
        # makes librdkafka abort the whole transaction
        code = ErrorCode.coordinator_load_in_progress
    if code != ErrorCode.none:
        raise KafkaError(code, "the offsets partition is not part of the transaction")


@api(65)
async def handle_describe_transactions(ctx: RequestContext, req: Any) -> dict[str, Any]:
    states = []
    for tid in req.transactional_ids:
        try:
            _txn_id_access(ctx, AclOperation.DESCRIBE, tid)
            d = _txn(ctx).describe(tid)
            # the transaction's topics the principal may not describe are left out (as Kafka)
            visible = authorized_names(
                ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, (t["topic"] for t in d["topics"]), log_denied=False
            )
            d = {**d, "topics": [t for t in d["topics"] if t["topic"] in visible]}
        except KafkaError as exc:
            d = {
                "transactional_id": tid,
                "error_code": exc.code,
                "transaction_state": "",
                "transaction_timeout_ms": 0,
                "transaction_start_time_ms": -1,
                "producer_id": -1,
                "producer_epoch": -1,
                "topics": [],
            }
        states.append(
            {
                "error_code": d["error_code"],
                "transactional_id": tid,
                "transaction_state": d["transaction_state"],
                "transaction_timeout": d["transaction_timeout_ms"],
                "transaction_start_time": _instant(d["transaction_start_time_ms"]),
                "producer_id": d["producer_id"],
                "producer_epoch": d["producer_epoch"],
                "topics": d["topics"],
            }
        )
    return {"throttle_time": 0, "transaction_states": states}


@api(66)
async def handle_list_transactions(ctx: RequestContext, req: Any) -> dict[str, Any]:
    pattern = getattr(req, "transactional_id_pattern", None)
    try:
        if pattern:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise KafkaError(ErrorCode.invalid_regular_expression, f"bad transactional id pattern: {exc}") from None
        out = _txn(ctx).list_transactions(
            list(req.state_filters),
            [int(p) for p in req.producer_id_filters],
            int(getattr(req, "duration_filter", -1)),
            pattern,
        )
        visible = authorized_names(
            ctx,
            AclOperation.DESCRIBE,
            ResourceType.TRANSACTIONAL_ID,
            (s["transactional_id"] for s in out.get("transaction_states", ())),
            log_denied=False,
        )
        out = {
            **out,
            "transaction_states": [s for s in out.get("transaction_states", ()) if s["transactional_id"] in visible],
        }
    except KafkaError as exc:
        out = {"error_code": exc.code, "unknown_state_filters": [], "transaction_states": []}
    return {"throttle_time": 0, **out}
