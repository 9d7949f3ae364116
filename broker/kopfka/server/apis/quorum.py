"""DescribeQuorum, AddRaftVoter and RemoveRaftVoter sent to a broker: forwarded to the active
controller, as Kafka's brokers do, so `kafka-metadata-quorum --bootstrap-server` and admin
clients' describeMetadataQuorum/addRaftVoter/removeRaftVoter work against brokers (the embedded
default included: its broker forwards to its own controller)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import AclOperation, authorize_cluster
from kopfka.server.request_context import RequestContext

DESCRIBE_QUORUM, ADD_RAFT_VOTER, REMOVE_RAFT_VOTER = 55, 80, 81
EXTRA_APIS.update({DESCRIBE_QUORUM: (0, 2), ADD_RAFT_VOTER: (0, 1), REMOVE_RAFT_VOTER: (0, 0)})


def as_dict(entity: Any) -> dict[str, Any]:
    """A kio entity as the plain dict the response builder takes."""
    return dataclasses.asdict(entity)


def _leader_moved(resp: Any) -> bool:
    return any(
        int(p.error_code) == ErrorCode.not_leader_or_follower for t in getattr(resp, "topics", ()) for p in t.partitions
    )


@api(DESCRIBE_QUORUM)
async def handle_describe_quorum(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not authorize_cluster(ctx, AclOperation.DESCRIBE):
        return {"error_code": ErrorCode.cluster_authorization_failed, "error_message": None, "topics": [], "nodes": []}
    forward = ctx.services.controller.forward
    deadline = time.monotonic() + int(ctx.services.config["request.timeout.ms"]) / 1000
    try:
        while True:
            resp = await forward(DESCRIBE_QUORUM, ctx.api_version, as_dict(req))
            if not _leader_moved(resp) or time.monotonic() >= deadline:
                return as_dict(resp)
            await asyncio.sleep(0.05)  # the leader changed under us: ask the new one
    except KafkaError as exc:
        return {"error_code": exc.code, "error_message": str(exc), "topics": [], "nodes": []}


async def _forward_voter_change(ctx: RequestContext, api_key: int, req: Any) -> dict[str, Any]:
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "error_message": None}
    forward = ctx.services.controller.forward
    try:
        return as_dict(await forward(api_key, ctx.api_version, as_dict(req)))
    except KafkaError as exc:
        return {"throttle_time": 0, "error_code": exc.code, "error_message": str(exc)}


@api(ADD_RAFT_VOTER)
async def handle_add_raft_voter(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return await _forward_voter_change(ctx, ADD_RAFT_VOTER, req)


@api(REMOVE_RAFT_VOTER)
async def handle_remove_raft_voter(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return await _forward_voter_change(ctx, REMOVE_RAFT_VOTER, req)
