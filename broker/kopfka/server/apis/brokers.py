"""UnregisterBroker on brokers: handed to the controller, as Kafka's brokers forward it, so
`kafka-cluster unregister --bootstrap-server` removes a decommissioned broker's registration."""

from __future__ import annotations

from typing import Any

from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode, KafkaError
from kopfka.server.apis.registry import api
from kopfka.server.auth_helper import AclOperation, authorize_cluster
from kopfka.server.request_context import RequestContext

UNREGISTER_BROKER = 64
EXTRA_APIS[UNREGISTER_BROKER] = (0, 0)


@api(UNREGISTER_BROKER)
async def handle_unregister_broker(ctx: RequestContext, req: Any) -> dict[str, Any]:
    if not authorize_cluster(ctx, AclOperation.ALTER):
        return {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "error_message": None}
    try:
        await ctx.services.controller.unregister_broker(int(req.broker_id))
    except KafkaError as exc:
        return {"throttle_time": 0, "error_code": exc.code, "error_message": exc.message}
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None}
