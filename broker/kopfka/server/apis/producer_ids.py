"""InitProducerId for idempotent producers (transactions are a later issue)."""

from __future__ import annotations

from typing import Any

from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.apis.registry import api
from kopfka.server.request_context import RequestContext


@api(22)
async def handle_init_producer_id(ctx: RequestContext, req: Any) -> dict[str, Any]:
    base = {
        "throttle_time": 0,
        "producer_id": -1,
        "producer_epoch": -1,
        "ongoing_txn_producer_id": -1,
        "ongoing_txn_producer_epoch": -1,
    }
    if req.transactional_id is not None:
        return {**base, "error_code": ErrorCode.transactional_id_authorization_failed}
    try:
        pid = await ctx.services.producer_ids.generate()
    except KafkaError as exc:
        return {**base, "error_code": exc.code}
    return {**base, "error_code": ErrorCode.none, "producer_id": pid, "producer_epoch": 0}
