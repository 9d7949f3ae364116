"""Client-facing replication admin APIs, forwarded to the active controller: ElectLeaders,
AlterPartitionReassignments and ListPartitionReassignments. (AlterPartition, the leaders' ISR
proposals, is served on the controller listener only.)"""

from __future__ import annotations

from typing import Any

from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import AclOperation, authorize_cluster
from kopfka.server.request_context import RequestContext

EXTRA_APIS.update({43: (0, 2), 45: (0, 0), 46: (0, 0)})


@api(43)
async def handle_elect_leaders(ctx: RequestContext, req: Any) -> dict[str, Any]:
    wanted = None if req.topic_partitions is None else [
        (t.topic, int(p)) for t in req.topic_partitions for p in t.partitions]
    election_type = int(getattr(req, "election_type", 0))
    if not authorize_cluster(ctx, AclOperation.ALTER):
        refused = ErrorCode.cluster_authorization_failed
        return {"throttle_time": 0, "error_code": refused, "replica_election_results": [
            {"topic": t.topic, "partition_result": [{"partition_id": int(p), "error_code": refused,
                                                     "error_message": None} for p in t.partitions]}
            for t in req.topic_partitions or ()]}
    try:
        results = await ctx.services.controller.elect_leaders(election_type, wanted)
    except KafkaError as exc:
        return {"throttle_time": 0, "error_code": exc.code, "replica_election_results": []}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(
            {"partition_id": r.partition, "error_code": r.error, "error_message": r.message})
    return {"throttle_time": 0, "error_code": ErrorCode.none,
            "replica_election_results": [{"topic": t, "partition_result": ps} for t, ps in by_topic.items()]}


@api(45)
async def handle_alter_partition_reassignments(ctx: RequestContext, req: Any) -> dict[str, Any]:
    items = [(t.name, int(p.partition_index), None if p.replicas is None else [int(r) for r in p.replicas])
             for t in req.topics for p in t.partitions]
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "error_message": None,
                "responses": []}
    try:
        results = await ctx.services.controller.alter_partition_reassignments(items)
    except KafkaError as exc:
        return {"throttle_time": 0, "error_code": exc.code, "error_message": exc.message, "responses": []}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(
            {"partition_index": r.partition, "error_code": r.error, "error_message": r.message})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "responses": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}


@api(46)
async def handle_list_partition_reassignments(ctx: RequestContext, req: Any) -> dict[str, Any]:
    wanted = None if req.topics is None else [(t.name, int(p)) for t in req.topics for p in t.partition_indexes]
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "error_message": None,
                "topics": []}
    try:
        ongoing = await ctx.services.controller.list_partition_reassignments(wanted)
    except KafkaError as exc:
        return {"throttle_time": 0, "error_code": exc.code, "error_message": exc.message, "topics": []}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for o in ongoing:
        by_topic.setdefault(o.topic, []).append(
            {"partition_index": o.partition, "replicas": list(o.replicas), "adding_replicas": list(o.adding),
             "removing_replicas": list(o.removing)})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
