"""The share coordinator's RPCs (KIP-932): Initialize/Read/Write/Delete ShareGroupState and
ReadShareGroupStateSummary. Partition leaders and the group coordinator send them to the
broker leading the key's `__share_group_state` partition (a broker sends them to itself
in-process, kopfka.server.share.persister); like Kafka, they need CLUSTER_ACTION."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import AclOperation, authorize_cluster
from kopfka.server.request_context import RequestContext

if TYPE_CHECKING:  # the share coordinator's types: it is built on first need (coordinator_slots)
    from kopfka.coordinator.share.coordinator import PartitionResult

INITIALIZE, READ, WRITE, DELETE, READ_SUMMARY = 83, 84, 85, 86, 87
EXTRA_APIS.update({INITIALIZE: (0, 0), READ: (0, 0), WRITE: (0, 1), DELETE: (0, 0), READ_SUMMARY: (0, 1)})


def _coordinator(ctx: RequestContext) -> Any:
    return getattr(ctx.services, "share_coordinator", None)


def _error_fields(result: PartitionResult) -> dict[str, Any]:
    message = result.message if result.error != ErrorCode.none else None
    return {"error_code": result.error, "error_message": message}


async def _each(ctx: RequestContext, req: Any, call: Any, render: Any) -> dict[str, Any]:
    """Answer every (topic, partition) of the request: ClusterAction first, then the coordinator."""
    from kopfka.coordinator.share.coordinator import PartitionResult

    coord = _coordinator(ctx)
    refused = not authorize_cluster(ctx, AclOperation.CLUSTER_ACTION)
    results = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if refused:
                res = PartitionResult(ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
            elif coord is None:
                res = PartitionResult(ErrorCode.coordinator_not_available, "The share coordinator is not running.")
            else:
                res = await call(coord, req.group_id, t.topic_id, p)
            parts.append({"partition": p.partition, **render(res)})
        results.append({"topic_id": t.topic_id, "partitions": parts})
    return {"results": results}


@api(INITIALIZE)
async def handle_initialize_share_group_state(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return await _each(
        ctx,
        req,
        lambda c, g, tid, p: c.initialize_state(g, tid, p.partition, p.state_epoch, p.start_offset),
        _error_fields,
    )


def _read_fields(res: PartitionResult) -> dict[str, Any]:
    st = res.state
    return {
        **_error_fields(res),
        "state_epoch": st.state_epoch if st is not None else 0,
        "start_offset": st.start_offset if st is not None else 0,
        "state_batches": [
            {
                "first_offset": b.first_offset,
                "last_offset": b.last_offset,
                "delivery_state": b.delivery_state,
                "delivery_count": b.delivery_count,
            }
            for b in (st.batches if st is not None and res.error == ErrorCode.none else [])
        ],
    }


@api(READ)
async def handle_read_share_group_state(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return await _each(ctx, req, lambda c, g, tid, p: c.read_state(g, tid, p.partition, p.leader_epoch), _read_fields)


@api(WRITE)
async def handle_write_share_group_state(ctx: RequestContext, req: Any) -> dict[str, Any]:
    from kopfka.coordinator.share.records import StateBatch

    def call(c: Any, g: str, tid: Any, p: Any) -> Any:
        return c.write_state(
            g,
            tid,
            p.partition,
            state_epoch=p.state_epoch,
            leader_epoch=p.leader_epoch,
            start_offset=p.start_offset,
            delivery_complete_count=getattr(p, "delivery_complete_count", -1),
            batches=[
                StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches
            ],
        )

    return await _each(ctx, req, call, _error_fields)


@api(DELETE)
async def handle_delete_share_group_state(ctx: RequestContext, req: Any) -> dict[str, Any]:
    return await _each(ctx, req, lambda c, g, tid, p: c.delete_state(g, tid, p.partition), _error_fields)


def _summary_fields(res: PartitionResult) -> dict[str, Any]:
    st = res.state
    ok = st is not None and res.error == ErrorCode.none
    return {
        **_error_fields(res),
        "state_epoch": st.state_epoch if ok and st else 0,
        "leader_epoch": st.leader_epoch if ok and st else 0,
        "start_offset": st.start_offset if ok and st else 0,
        "delivery_complete_count": st.delivery_complete_count if ok and st else -1,
    }


@api(READ_SUMMARY)
async def handle_read_share_group_state_summary(ctx: RequestContext, req: Any) -> dict[str, Any]:
    async def call(c: Any, g: str, tid: Any, p: Any) -> PartitionResult:
        return c.read_summary(g, tid, p.partition)  # type: ignore[no-any-return]

    return await _each(ctx, req, call, _summary_fields)
