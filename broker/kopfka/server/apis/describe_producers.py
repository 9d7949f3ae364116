"""DescribeProducers (KIP-664): the producers a partition leader holds state for, as
`kafka-transactions describe-producers` and the admin client's describeProducers read them."""

from __future__ import annotations

from typing import Any

from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import AclOperation, ResourceType, authorized_names
from kopfka.server.request_context import RequestContext

DESCRIBE_PRODUCERS = 61
EXTRA_APIS[DESCRIBE_PRODUCERS] = (0, 0)


def _partition(ctx: RequestContext, topic: str, index: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "partition_index": index,
        "error_code": ErrorCode.none,
        "error_message": None,
        "active_producers": [],
    }
    try:
        part = ctx.services.replica_manager.get_leader_partition((topic, index))
    except KafkaError as exc:
        out["error_code"] = exc.code
        return out
    for pid, entry in sorted(part.log.producer_state.active_producers().items()):
        out["active_producers"].append(
            {
                "producer_id": pid,
                "producer_epoch": entry.producer_epoch,
                "last_sequence": entry.last_seq,
                "last_timestamp": entry.last_timestamp,
                "coordinator_epoch": entry.coordinator_epoch,
                "current_txn_start_offset": -1
                if entry.current_txn_first_offset is None
                else entry.current_txn_first_offset,
            }
        )
    return out


def _refused(index: int) -> dict[str, Any]:
    return {
        "partition_index": index,
        "error_code": ErrorCode.topic_authorization_failed,
        "error_message": None,
        "active_producers": [],
    }


@api(DESCRIBE_PRODUCERS)
async def handle_describe_producers(ctx: RequestContext, req: Any) -> dict[str, Any]:
    may_read = authorized_names(ctx, AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    topics = [
        {
            "name": t.name,
            "partitions": [
                _partition(ctx, t.name, int(i)) if t.name in may_read else _refused(int(i)) for i in t.partition_indexes
            ],
        }
        for t in req.topics
    ]
    return {"throttle_time": 0, "topics": topics}
