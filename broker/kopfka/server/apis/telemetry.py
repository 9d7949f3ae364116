"""GetTelemetrySubscriptions and PushTelemetry (KIP-714), served by the ClientMetricsManager."""

from __future__ import annotations

from typing import Any

from kopfka.protocol.api_versions import EXTRA_APIS
from kopfka.protocol.errors import ErrorCode
from kopfka.server.apis.registry import api
from kopfka.server.request_context import RequestContext

GET_TELEMETRY_SUBSCRIPTIONS, PUSH_TELEMETRY = 71, 72
EXTRA_APIS[GET_TELEMETRY_SUBSCRIPTIONS] = (0, 0)
EXTRA_APIS[PUSH_TELEMETRY] = (0, 0)


@api(GET_TELEMETRY_SUBSCRIPTIONS)
async def handle_get_telemetry_subscriptions(ctx: RequestContext, req: Any) -> dict[str, Any]:
    mgr = ctx.services.telemetry
    if mgr is None:
        return {
            "throttle_time": 0,
            "error_code": ErrorCode.unsupported_version,
            "client_instance_id": req.client_instance_id,
            "subscription_id": 0,
            "accepted_compression_types": [],
            "push_interval": 0,
            "telemetry_max_bytes": 0,
            "delta_temporality": True,
            "requested_metrics": [],
        }
    return dict(mgr.get_subscriptions(ctx, req.client_instance_id))


@api(PUSH_TELEMETRY)
async def handle_push_telemetry(ctx: RequestContext, req: Any) -> dict[str, Any]:
    mgr = ctx.services.telemetry
    if mgr is None:
        return {"throttle_time": 0, "error_code": ErrorCode.unsupported_version}
    return dict(
        mgr.push(
            ctx,
            req.client_instance_id,
            req.subscription_id,
            req.terminating,
            int(req.compression_type),
            bytes(req.metrics),
        )
    )
